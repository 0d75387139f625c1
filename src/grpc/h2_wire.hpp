#pragma once
// HTTP/2's bytes as the server writes them (RFC 9113 §4, §6; RFC 7541 for header blocks): frame
// headers, and header blocks of indexed and literal fields. The server's header blocks put two
// fields only into HPACK's dynamic table, the two every gRPC response repeats (kept_fields):
// each is a literal the first time and a one-byte index after, which the client's decoder
// reads without copying a string. Everything else is a literal without indexing and without
// Huffman coding: a handful of short fields per response, written with two memcpys where an
// encoder's table would cost a lookup per field and state to keep in step with the peer.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace ringrpc::detail::grpc {

/// A header field, as the server sends it or a request's header block decoded to. Names are
/// lower-case (RFC 9113 §8.2.1).
struct h2_field {
  std::string_view name;
  std::string_view value;
  /// What the encoder may take the field for without comparing its name and value: 0 (it
  /// compares), or the form of h2::status_200, h2::grpc_content_type or h2::grpc_status_ok
  /// (the session's fixed fields).
  std::uint8_t form = 0;
};

}  // namespace ringrpc::detail::grpc

namespace ringrpc::detail::grpc::h2 {

inline constexpr std::string_view client_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr std::size_t frame_header_bytes = 9;
inline constexpr std::uint32_t default_window = 65535;
inline constexpr std::uint32_t default_max_frame = 16384;
inline constexpr std::int64_t max_window = 0x7fffffff;

enum frame_type : std::uint8_t {
  t_data = 0,
  t_headers = 1,
  t_priority = 2,
  t_rst_stream = 3,
  t_settings = 4,
  t_push_promise = 5,
  t_ping = 6,
  t_goaway = 7,
  t_window_update = 8,
  t_continuation = 9,
};

enum frame_flag : std::uint8_t {
  f_end_stream = 0x1,
  f_ack = 0x1,
  f_end_headers = 0x4,
  f_padded = 0x8,
  f_priority = 0x20,
};

enum error_code : std::uint32_t {
  e_no_error = 0,
  e_protocol = 1,
  e_internal = 2,
  e_flow_control = 3,
  e_settings_timeout = 4,
  e_stream_closed = 5,
  e_frame_size = 6,
  e_refused_stream = 7,
  e_cancel = 8,
  e_compression = 9,
  e_enhance_your_calm = 11,
};

enum setting_id : std::uint16_t {
  s_header_table_size = 1,
  s_enable_push = 2,
  s_max_concurrent_streams = 3,
  s_initial_window_size = 4,
  s_max_frame_size = 5,
  s_max_header_list_size = 6,
  s_no_rfc7540_priorities = 9,
};

inline std::uint32_t read24(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) << 16 | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]);
}
inline std::uint32_t read32(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | static_cast<std::uint32_t>(p[3]);
}
inline void write32(std::byte* p, std::uint32_t v) noexcept {
  p[0] = std::byte(v >> 24);
  p[1] = std::byte(v >> 16);
  p[2] = std::byte(v >> 8);
  p[3] = std::byte(v);
}

/// Appends a frame header and makes room for `length` bytes of payload; returns where the
/// payload goes.
inline std::byte* put_frame(std::vector<std::byte>& out, std::uint32_t length, frame_type type, std::uint8_t flags,
                            std::uint32_t stream) {
  const std::size_t at = out.size();
  out.resize(at + frame_header_bytes + length);
  std::byte* p = out.data() + at;
  p[0] = std::byte(length >> 16);
  p[1] = std::byte(length >> 8);
  p[2] = std::byte(length);
  p[3] = std::byte(type);
  p[4] = std::byte(flags);
  write32(p + 5, stream & 0x7fffffffu);
  return p + frame_header_bytes;
}

inline void put_rst_stream(std::vector<std::byte>& out, std::uint32_t stream, std::uint32_t code) {
  write32(put_frame(out, 4, t_rst_stream, 0, stream), code);
}

inline void put_window_update(std::vector<std::byte>& out, std::uint32_t stream, std::uint32_t increment) {
  write32(put_frame(out, 4, t_window_update, 0, stream), increment);
}

/// HPACK's prefixed integer (RFC 7541 §5.1): `first` holds the pattern bits above the prefix.
inline void put_hpack_int(std::vector<std::byte>& out, std::uint8_t first, unsigned prefix_bits, std::size_t v) {
  const std::size_t max_prefix = (std::size_t{1} << prefix_bits) - 1;
  if (v < max_prefix) {
    out.push_back(std::byte(first | v));
    return;
  }
  out.push_back(std::byte(first | max_prefix));
  v -= max_prefix;
  while (v >= 128) {
    out.push_back(std::byte(0x80 | (v & 0x7f)));
    v >>= 7;
  }
  out.push_back(std::byte(v));
}

inline void put_hpack_string(std::vector<std::byte>& out, std::string_view s) {
  put_hpack_int(out, 0x00, 7, s.size());  // H = 0: not Huffman-coded
  const std::size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

/// A field as "literal without indexing" with a literal name (RFC 7541 §6.2.2).
inline void put_literal_field(std::vector<std::byte>& out, std::string_view name, std::string_view value) {
  out.push_back(std::byte{0x00});
  put_hpack_string(out, name);
  put_hpack_string(out, value);
}

/// ... with the name given by its index in HPACK's static table.
inline void put_indexed_name_field(std::vector<std::byte>& out, unsigned name_index, std::string_view value) {
  put_hpack_int(out, 0x00, 4, name_index);
  put_hpack_string(out, value);
}

// Static-table entries the server's responses use (RFC 7541 Appendix A).
inline constexpr std::uint8_t hpack_status_200 = 0x88;  // indexed field 8, ":status: 200"
inline constexpr unsigned hpack_name_status = 8;
inline constexpr unsigned hpack_name_content_type = 31;
inline constexpr unsigned hpack_static_entries = 61;  // the dynamic table's newest entry is 62
inline constexpr std::uint32_t default_table_size = 4096;  // SETTINGS_HEADER_TABLE_SIZE's initial value

/// A field the server inserts into the peer's dynamic table the first time it sends it, and
/// refers to by index after. `name_index`: its name's static-table index, or 0 (a literal name).
struct kept_field {
  std::string_view name;
  std::string_view value;
  unsigned name_index;
};
inline constexpr kept_field kept_fields[] = {{"content-type", "application/grpc", hpack_name_content_type},
                                             {"grpc-status", "0", 0}};
inline constexpr std::size_t kept_field_count = sizeof(kept_fields) / sizeof(kept_fields[0]);
/// What they take of the table: 32 + name + value bytes each (RFC 7541 §4.1). A peer whose
/// table is smaller gets literals only.
inline constexpr std::uint32_t kept_fields_bytes = (32 + 12 + 16) + (32 + 11 + 1);

// The fields every gRPC response has, named so that the encoder needs no compare for them.
inline constexpr std::uint8_t form_status_200 = 1;
inline constexpr std::uint8_t form_kept = 2;  // + the index in kept_fields
inline constexpr h2_field status_200{":status", "200", form_status_200};
inline constexpr h2_field grpc_content_type{kept_fields[0].name, kept_fields[0].value, form_kept + 0};
inline constexpr h2_field grpc_status_ok{kept_fields[1].name, kept_fields[1].value, form_kept + 1};
static_assert(kept_fields[0].name == "content-type" && kept_fields[1].name == "grpc-status");

}  // namespace ringrpc::detail::grpc::h2

#include "h2_request_block.hpp"

#include "grpc/h2_wire.hpp"

namespace ringrpc::load::h2_detail {

namespace {

namespace h2 = ringrpc::detail::grpc::h2;

// Static-table entries a request uses (RFC 7541 Appendix A): whole fields, then names.
struct static_field {
  std::string_view name;
  std::string_view value;
  unsigned index;
};
constexpr static_field static_fields[] = {
    {":method", "GET", 2}, {":method", "POST", 3}, {":path", "/", 4}, {":scheme", "http", 6}, {":scheme", "https", 7}};
constexpr static_field static_names[] = {{":authority", {}, 1},     {":method", {}, 2},    {":path", {}, 4},
                                         {":scheme", {}, 6},        {"accept", {}, 19},
                                         {"content-type", {}, 31}, {"user-agent", {}, 58}};
constexpr unsigned authorization_index = 23;

std::string_view text(const std::uint8_t* p, std::size_t n) { return {reinterpret_cast<const char*>(p), n}; }

}  // namespace

void put_request_field(std::vector<std::byte>& out, std::string_view name, std::string_view value) {
  if (name == "authorization") {
    // A credential: no proxy re-encoding the request may put it in a table.
    h2::put_hpack_int(out, 0x10, 4, authorization_index);
    return h2::put_hpack_string(out, value);
  }
  for (const static_field& f : static_fields) {
    if (f.name == name && f.value == value) return h2::put_hpack_int(out, 0x80, 7, f.index);
  }
  for (const static_field& f : static_names) {
    if (f.name == name) return h2::put_indexed_name_field(out, f.index, value);
  }
  h2::put_literal_field(out, name, value);
}

request_block encode_request_block(const h2_settings& s, const request_kind& kind) {
  const std::vector<nghttp2_nv> fields = request_headers(s, kind);
  request_block b;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i == path_index) continue;
    put_request_field(i < path_index ? b.before_path : b.after_path, text(fields[i].name, fields[i].namelen),
                      text(fields[i].value, fields[i].valuelen));
  }
  const nghttp2_nv& path = fields[path_index];
  b.whole = b.before_path;
  put_request_field(b.whole, text(path.name, path.namelen), text(path.value, path.valuelen));
  b.whole.insert(b.whole.end(), b.after_path.begin(), b.after_path.end());
  return b;
}

}  // namespace ringrpc::load::h2_detail

// The server's side of HTTP/2 without I/O (src/grpc/h2_server.hpp), driven with raw frames built
// here. Request header blocks come from nghttp2's HPACK encoder (Huffman coding and the dynamic
// table, as a real client's); the server's header blocks are read back with nghttp2's HPACK
// decoder. Every test parses what the server wrote into frames and asserts on them. Nothing here
// depends on time: the rapid-reset test gives its token bucket no refill.

#include "grpc/h2_server.hpp"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace g = ringrpc::detail::grpc;
namespace h2 = ringrpc::detail::grpc::h2;

using bytes = std::vector<std::byte>;
using field = std::pair<std::string, std::string>;
using field_list = std::vector<field>;
using setting = std::pair<std::uint16_t, std::uint32_t>;

// ---------------------------------------------------------------------------------------------
// Bytes.

bytes to_bytes(std::string_view s) {
  bytes b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string to_text(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

void put32(bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(std::byte(v >> shift));
}

/// The concatenation of its arguments (frames, usually). Written join{a, b, c}: in braces the
/// arguments are evaluated in order, which matters when each encodes a header block with the
/// same HPACK encoder (its dynamic table must change in the order the server decodes them).
struct join : bytes {
  template <class... B>
  explicit join(const B&... parts) {
    (insert(end(), parts.begin(), parts.end()), ...);
  }
};

/// `n` bytes of a recognisable pattern.
std::string pattern(std::size_t n, char first = 'a') {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(first + i % 26);
  return s;
}

// ---------------------------------------------------------------------------------------------
// What the client sends: frames (RFC 9113 §4.1) and HPACK header blocks.

bytes frame(std::uint8_t type, std::uint8_t flags, std::uint32_t id, std::span<const std::byte> payload) {
  bytes b;
  const std::size_t n = payload.size();
  b.push_back(std::byte(n >> 16));
  b.push_back(std::byte(n >> 8));
  b.push_back(std::byte(n));
  b.push_back(std::byte(type));
  b.push_back(std::byte(flags));
  put32(b, id);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

bytes frame(std::uint8_t type, std::uint8_t flags, std::uint32_t id, std::string_view payload) {
  return frame(type, flags, id, to_bytes(payload));
}

bytes settings_frame(std::initializer_list<setting> settings = {}) {
  bytes p;
  for (const auto& [id, value] : settings) {
    p.push_back(std::byte(id >> 8));
    p.push_back(std::byte(id));
    put32(p, value);
  }
  return frame(h2::t_settings, 0, 0, p);
}

bytes settings_ack() { return frame(h2::t_settings, h2::f_ack, 0, bytes{}); }

bytes u32_frame(std::uint8_t type, std::uint32_t id, std::uint32_t v) {
  bytes p;
  put32(p, v);
  return frame(type, 0, id, p);
}

bytes window_update(std::uint32_t id, std::uint32_t increment) { return u32_frame(h2::t_window_update, id, increment); }
bytes rst_stream(std::uint32_t id, std::uint32_t code) { return u32_frame(h2::t_rst_stream, id, code); }

bytes data_frame(std::uint32_t id, std::string_view payload, std::uint8_t flags = 0) {
  return frame(h2::t_data, flags, id, payload);
}

bytes ping(std::string_view payload = "01234567", std::uint8_t flags = 0) {
  return frame(h2::t_ping, flags, 0, payload);
}

bytes goaway(std::uint32_t last, std::uint32_t code) {
  bytes p;
  put32(p, last);
  put32(p, code);
  return frame(h2::t_goaway, 0, 0, p);
}

bytes client_preface(std::initializer_list<setting> settings = {}) {
  return join{to_bytes(h2::client_preface), settings_frame(settings)};
}

/// A well-formed gRPC request's fields, `extra` after them.
field_list request_fields(std::string path = "/pkg.Service/Method", const field_list& extra = {}) {
  field_list f{{":method", "POST"},
               {":scheme", "http"},
               {":path", std::move(path)},
               {":authority", "localhost:50051"},
               {"content-type", "application/grpc"},
               {"te", "trailers"}};
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

/// The client's HPACK encoder: its dynamic table lives as long as the connection.
class hpack_encoder {
 public:
  hpack_encoder() {
    if (nghttp2_hd_deflate_new(&_deflater, 4096) != 0) throw std::bad_alloc();
  }
  ~hpack_encoder() { nghttp2_hd_deflate_del(_deflater); }
  hpack_encoder(const hpack_encoder&) = delete;
  hpack_encoder& operator=(const hpack_encoder&) = delete;

  bytes encode(const field_list& fields) {
    std::vector<nghttp2_nv> nv;
    for (const auto& [name, value] : fields) {
      nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NONE});
    }
    bytes b(nghttp2_hd_deflate_bound(_deflater, nv.data(), nv.size()));
    const ssize_t n =
        nghttp2_hd_deflate_hd(_deflater, reinterpret_cast<std::uint8_t*>(b.data()), b.size(), nv.data(), nv.size());
    if (n < 0) {
      ADD_FAILURE() << "nghttp2_hd_deflate_hd: " << nghttp2_strerror(static_cast<int>(n));
      return {};
    }
    b.resize(static_cast<std::size_t>(n));
    return b;
  }

 private:
  nghttp2_hd_deflater* _deflater = nullptr;
};

// ---------------------------------------------------------------------------------------------
// What the server sends: frames, and header blocks decoded with nghttp2's HPACK decoder.

struct frame_in {
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::uint32_t id = 0;
  bytes payload;

  std::uint32_t u32(std::size_t at = 0) const { return h2::read32(payload.data() + at); }
  std::string text() const { return to_text(payload); }
  bool has(std::uint8_t flag) const { return (flags & flag) != 0; }
};

using frames = std::vector<frame_in>;

frames parse(std::span<const std::byte> b) {
  frames f;
  while (!b.empty()) {
    if (b.size() < h2::frame_header_bytes) {
      ADD_FAILURE() << "the server wrote " << b.size() << " bytes that are not a whole frame header";
      break;
    }
    const std::uint32_t length = h2::read24(b.data());
    if (b.size() < h2::frame_header_bytes + length) {
      ADD_FAILURE() << "the server wrote a frame cut short";
      break;
    }
    frame_in x;
    x.type = static_cast<std::uint8_t>(b[3]);
    x.flags = static_cast<std::uint8_t>(b[4]);
    x.id = h2::read32(b.data() + 5) & 0x7fffffffu;
    x.payload.assign(b.begin() + h2::frame_header_bytes, b.begin() + h2::frame_header_bytes + length);
    f.push_back(std::move(x));
    b = b.subspan(h2::frame_header_bytes + length);
  }
  return f;
}

std::string error_name(std::uint32_t code) {
  switch (code) {
    case h2::e_no_error: return "NO_ERROR";
    case h2::e_protocol: return "PROTOCOL_ERROR";
    case h2::e_internal: return "INTERNAL_ERROR";
    case h2::e_flow_control: return "FLOW_CONTROL_ERROR";
    case h2::e_stream_closed: return "STREAM_CLOSED";
    case h2::e_frame_size: return "FRAME_SIZE_ERROR";
    case h2::e_refused_stream: return "REFUSED_STREAM";
    case h2::e_cancel: return "CANCEL";
    case h2::e_compression: return "COMPRESSION_ERROR";
    case h2::e_enhance_your_calm: return "ENHANCE_YOUR_CALM";
    default: return "error " + std::to_string(code);
  }
}

/// One line per frame, e.g. "HEADERS 1 END_STREAM END_HEADERS; RST_STREAM 3 PROTOCOL_ERROR".
std::string summary(const frames& f) {
  std::string s;
  for (const frame_in& x : f) {
    if (!s.empty()) s += "; ";
    const std::string id = std::to_string(x.id);
    switch (x.type) {
      case h2::t_data:
        s += "DATA " + id + " len=" + std::to_string(x.payload.size()) + (x.has(h2::f_end_stream) ? " END_STREAM" : "");
        break;
      case h2::t_headers:
        s += "HEADERS " + id + (x.has(h2::f_end_stream) ? " END_STREAM" : "") +
             (x.has(h2::f_end_headers) ? " END_HEADERS" : "");
        break;
      case h2::t_continuation:
        s += "CONTINUATION " + id + (x.has(h2::f_end_headers) ? " END_HEADERS" : "");
        break;
      case h2::t_rst_stream:
        s += "RST_STREAM " + id + " " + error_name(x.u32());
        break;
      case h2::t_settings:
        s += x.has(h2::f_ack) ? "SETTINGS ACK" : "SETTINGS";
        break;
      case h2::t_ping:
        s += x.has(h2::f_ack) ? "PING ACK" : "PING";
        break;
      case h2::t_goaway:
        s += "GOAWAY last=" + std::to_string(x.u32() & 0x7fffffffu) + " " + error_name(x.u32(4));
        break;
      case h2::t_window_update:
        s += "WINDOW_UPDATE " + id + " +" + std::to_string(x.u32());
        break;
      default:
        s += "type " + std::to_string(x.type) + " " + id;
    }
  }
  return s;
}

std::vector<setting> settings_of(const frame_in& f) {
  std::vector<setting> s;
  for (std::size_t at = 0; at + 6 <= f.payload.size(); at += 6) {
    s.emplace_back(static_cast<std::uint16_t>(static_cast<unsigned>(f.payload[at]) << 8 |
                                              static_cast<unsigned>(f.payload[at + 1])),
                   f.u32(at + 2));
  }
  return s;
}

frames of_type(const frames& f, std::uint8_t type, std::optional<std::uint32_t> id = std::nullopt) {
  frames r;
  for (const frame_in& x : f) {
    if (x.type == type && (!id || x.id == *id)) r.push_back(x);
  }
  return r;
}

/// The DATA the frames carry on stream `id`, in order.
std::string data_of(const frames& f, std::uint32_t id) {
  std::string s;
  for (const frame_in& x : of_type(f, h2::t_data, id)) s += x.text();
  return s;
}

/// One header block the server sent: its HEADERS' flags and the block, CONTINUATIONs joined.
struct block_out {
  std::uint32_t id = 0;
  std::uint8_t flags = 0;
  bytes block;
  std::size_t frame_count = 0;
};

std::vector<block_out> header_blocks(const frames& f) {
  std::vector<block_out> blocks;
  bool in_block = false;
  for (const frame_in& x : f) {
    if (in_block && (x.type != h2::t_continuation || x.id != blocks.back().id)) {
      ADD_FAILURE() << "a header block cut by another frame: " << summary(f);
      in_block = false;
    }
    if (x.type == h2::t_headers) {
      blocks.push_back({x.id, x.flags, x.payload, 1});
      in_block = !x.has(h2::f_end_headers);
    } else if (x.type == h2::t_continuation) {
      if (!in_block) {
        ADD_FAILURE() << "a CONTINUATION with no header block before it: " << summary(f);
        continue;
      }
      blocks.back().block.insert(blocks.back().block.end(), x.payload.begin(), x.payload.end());
      ++blocks.back().frame_count;
      in_block = !x.has(h2::f_end_headers);
    }
  }
  if (in_block) ADD_FAILURE() << "a header block without END_HEADERS: " << summary(f);
  return blocks;
}

/// The client's HPACK decoder for the server's header blocks.
class hpack_decoder {
 public:
  hpack_decoder() {
    if (nghttp2_hd_inflate_new(&_inflater) != 0) throw std::bad_alloc();
  }
  ~hpack_decoder() { nghttp2_hd_inflate_del(_inflater); }
  hpack_decoder(const hpack_decoder&) = delete;
  hpack_decoder& operator=(const hpack_decoder&) = delete;

  /// Our SETTINGS_HEADER_TABLE_SIZE, as a client applies it once the server acknowledged it:
  /// if it is below the table's size now, the server's next block must start with a size update.
  void limit(std::size_t size) { ASSERT_EQ(nghttp2_hd_inflate_change_table_size(_inflater, size), 0); }

  field_list decode(std::span<const std::byte> block) {
    field_list fields;
    const auto* in = reinterpret_cast<const std::uint8_t*>(block.data());
    std::size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t rv = nghttp2_hd_inflate_hd2(_inflater, &nv, &flags, in, left, 1);
      if (rv < 0) {
        ADD_FAILURE() << "the server's header block does not decode: " << nghttp2_strerror(static_cast<int>(rv));
        return fields;
      }
      in += rv;
      left -= static_cast<std::size_t>(rv);
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
        fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
        nghttp2_hd_inflate_end_headers(_inflater);
        return fields;
      }
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) return fields;
    }
  }

 private:
  nghttp2_hd_inflater* _inflater = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The handler: every callback recorded.

struct test_stream : g::h2_stream {
  field_list request;
  field_list trailers;
  std::string data;
  std::size_t sent = 0;
};

class recorder final : public g::h2_handler {
 public:
  std::deque<test_stream> streams;  // the records on_open hands out (a deque: they never move)
  std::vector<std::string> events;
  std::vector<std::pair<std::int32_t, bool>> closed;  // on_closed's (id, by_peer)
  std::size_t sent = 0;
  int pings = 0;
  int settings = 0;
  std::function<void()> ping_hook;  // run in on_ping, after it is recorded

  /// The latest record opened for `id`.
  test_stream* stream(std::int32_t id) {
    for (auto it = streams.rbegin(); it != streams.rend(); ++it) {
      if (it->id == id) return &*it;
    }
    return nullptr;
  }

  g::h2_stream& on_open(std::int32_t id) override {
    events.push_back("open " + std::to_string(id));
    return streams.emplace_back();
  }
  void on_field(g::h2_stream& s, std::string_view name, std::string_view value, bool trailer) override {
    events.push_back((trailer ? "trailer " : "field ") + std::to_string(s.id) + " " + std::string(name) + ": " +
                     std::string(value));
    (trailer ? as(s).trailers : as(s).request).emplace_back(name, value);
  }
  // Kept blocks (h2_handler::on_known_block): with `knows`, a block's fields are remembered as
  // the request took them and given back in one step; the streams each happened to.
  bool knows = false;
  std::map<std::uint8_t, std::pair<std::uint64_t, field_list>> remembered;  // by slot: (block, fields)
  std::vector<std::int32_t> remembered_on, known_on;
  bool on_known_block(g::h2_stream& s, std::uint64_t id, std::uint8_t slot) override {
    const auto it = remembered.find(slot);
    if (!knows || it == remembered.end() || it->second.first != id) return false;
    known_on.push_back(s.id);
    as(s).request = it->second.second;
    return true;
  }
  void remember_block(g::h2_stream& s, std::uint64_t id, std::uint8_t slot) override {
    remembered_on.push_back(s.id);
    remembered[slot] = {id, as(s).request};
  }
  void on_headers(g::h2_stream& s) override { events.push_back("headers " + std::to_string(s.id)); }
  void on_data(g::h2_stream& s, std::span<const std::byte> data) override {
    events.push_back("data " + std::to_string(s.id) + " +" + std::to_string(data.size()));
    as(s).data += to_text(data);
  }
  void on_request_end(g::h2_stream& s) override { events.push_back("end " + std::to_string(s.id)); }
  void on_sent(g::h2_stream& s, std::size_t n) override {
    sent += n;
    as(s).sent += n;
  }
  void on_closed(g::h2_stream& s, bool by_peer) noexcept override {
    events.push_back("closed " + std::to_string(s.id) + (by_peer ? " by peer" : ""));
    closed.emplace_back(s.id, by_peer);
  }
  void on_ping() override {
    events.push_back("ping");
    ++pings;
    if (ping_hook) ping_hook();
  }
  void on_settings() override {
    events.push_back("settings");
    ++settings;
  }

 private:
  static test_stream& as(g::h2_stream& s) { return static_cast<test_stream&>(s); }
};

std::vector<g::h2_field> response_headers() {
  return {{":status", "200"}, {"content-type", "application/grpc"}};
}
std::vector<g::h2_field> ok_trailers() { return {{"grpc-status", "0"}}; }

// ---------------------------------------------------------------------------------------------
// The fixture: a server, its handler, the client's HPACK both ways.

class H2Server : public ::testing::Test {
 protected:
  H2Server() { connect({}); }

  /// A new connection with these limits.
  void connect(const g::h2_limits& limits) {
    server.reset();
    handler = std::make_unique<recorder>();
    encoder = std::make_unique<hpack_encoder>();
    decoder = std::make_unique<hpack_decoder>();
    server = std::make_unique<g::h2_server>(*handler, limits, memory);
    server->set_output(&out);
  }

  /// The client's bytes in, as the session gives them (then settle()); what the server wrote.
  frames send(std::span<const std::byte> in) {
    out.clear();
    server->receive(in);
    server->settle();
    return parse(out);
  }

  /// A call of ours into the server (then settle()); what it wrote.
  template <class F>
  frames call(F&& f) {
    out.clear();
    f();
    server->settle();
    return parse(out);
  }

  /// The client preface with `settings`: the server answers with its SETTINGS and an ACK.
  /// The events list starts empty after it.
  void handshake(std::initializer_list<setting> settings = {}) {
    const frames f = send(client_preface(settings));
    ASSERT_EQ(summary(f), "SETTINGS; SETTINGS ACK");
    handler->events.clear();
  }

  bytes headers(std::uint32_t id, const field_list& fields, std::uint8_t flags = h2::f_end_headers) {
    return frame(h2::t_headers, flags, id, encoder->encode(fields));
  }

  /// A request's HEADERS, with END_STREAM if `end`.
  bytes request(std::uint32_t id, bool end = true, const field_list& extra = {}) {
    return headers(id, request_fields("/pkg.Service/Method", extra),
                   static_cast<std::uint8_t>(h2::f_end_headers | (end ? h2::f_end_stream : 0)));
  }

  /// Opens stream `id` with a request that is still sending (no END_STREAM).
  void open(std::uint32_t id) {
    const frames f = send(request(id, false));
    ASSERT_EQ(summary(f), "");
    ASSERT_NE(server->find(static_cast<std::int32_t>(id)), nullptr);
  }

  g::h2_stream& stream(std::uint32_t id) {
    g::h2_stream* s = server->find(static_cast<std::int32_t>(id));
    if (s == nullptr) throw std::runtime_error("no stream " + std::to_string(id));
    return *s;
  }

  /// Our DATA on stream `id`: one payload, `prefix` then `body`.
  frames send_data(std::uint32_t id, std::string_view body, std::string_view prefix = {}) {
    const bytes a = to_bytes(prefix);
    const bytes b = to_bytes(body);
    return call([&] { server->send_data(stream(id), a, b); });
  }

  bool connection_ok() const { return !server->failed(); }

  /// A whole conversation fed in pieces of `chunk` bytes: the preface with a SETTINGS, a
  /// request whose header block is cut by a CONTINUATION, its DATA, a PING.
  void conversation_in_chunks(std::size_t chunk) {
    const bytes block = encoder->encode(request_fields());
    const std::size_t half = block.size() / 2;
    const bytes all = join{client_preface({{h2::s_initial_window_size, 1000}}),
                           frame(h2::t_headers, 0, 1, std::span(block).first(half)),
                           frame(h2::t_continuation, h2::f_end_headers, 1, std::span(block).subspan(half)),
                           data_frame(1, "hello "), data_frame(1, "world", h2::f_end_stream), ping("pingpong")};
    bytes written;
    for (std::size_t at = 0; at < all.size(); at += chunk) {
      send(std::span(all).subspan(at, std::min(chunk, all.size() - at)));
      written.insert(written.end(), out.begin(), out.end());
      ASSERT_TRUE(connection_ok()) << server->error();
    }
    const frames f = parse(written);
    EXPECT_EQ(summary(f), "SETTINGS; SETTINGS ACK; PING ACK");
    ASSERT_FALSE(f.empty());
    EXPECT_EQ(f.back().text(), "pingpong");
    std::vector<std::string> expected{"settings", "open 1"};
    for (const auto& [name, value] : request_fields()) expected.push_back("field 1 " + name + ": " + value);
    expected.insert(expected.end(), {"headers 1", "data 1 +6", "data 1 +5", "end 1", "ping"});
    EXPECT_EQ(handler->events, expected);
    ASSERT_NE(handler->stream(1), nullptr);
    EXPECT_EQ(handler->stream(1)->data, "hello world");
    // The client's window (1000) applies to the stream opened after it.
    EXPECT_EQ(stream(1).send_window, 1000);
    EXPECT_FALSE(server->holds_partial_frame());
  }

  g::library_memory memory{0, std::size_t{1} << 30};
  std::vector<std::byte> out;
  std::unique_ptr<recorder> handler;  // outlives the server, which points into its records
  std::unique_ptr<hpack_encoder> encoder;
  std::unique_ptr<hpack_decoder> decoder;
  std::unique_ptr<g::h2_server> server;
};

// ---------------------------------------------------------------------------------------------
// The connection preface (RFC 9113 §3.4).

TEST_F(H2Server, StartWritesOneSettingsFrameWithTheServersLimits) {
  g::h2_limits limits;
  limits.max_concurrent_streams = 7;
  limits.max_header_list_bytes = 8000;
  connect(limits);
  const frames f = call([&] { server->start(); });
  ASSERT_EQ(summary(f), "SETTINGS");
  EXPECT_EQ(f[0].id, 0u);
  EXPECT_EQ(f[0].flags, 0);
  EXPECT_EQ(settings_of(f[0]), (std::vector<setting>{{h2::s_max_concurrent_streams, 7},
                                                     {h2::s_max_header_list_size, 8000},
                                                     {h2::s_no_rfc7540_priorities, 1}}));
  // Once only: neither start() again nor the client's preface sends it again.
  EXPECT_EQ(summary(call([&] { server->start(); })), "");
  EXPECT_EQ(summary(send(client_preface())), "SETTINGS ACK");
}

TEST_F(H2Server, ReceiveSendsTheServerSettingsWhenStartWasNotCalled) {
  const frames f = send(client_preface());
  ASSERT_EQ(summary(f), "SETTINGS; SETTINGS ACK");
  EXPECT_EQ(settings_of(f[0]), (std::vector<setting>{{h2::s_max_concurrent_streams, 100},
                                                     {h2::s_max_header_list_size, 16 * 1024},
                                                     {h2::s_no_rfc7540_priorities, 1}}));
}

TEST_F(H2Server, ReceiveOfPartOfThePrefaceSendsTheServerSettingsAtOnce) {
  EXPECT_EQ(summary(send(to_bytes(h2::client_preface.substr(0, 5)))), "SETTINGS");
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, ReceiveOfNothingSendsTheServerSettingsAndWaits) {
  EXPECT_EQ(summary(send(std::span<const std::byte>())), "SETTINGS");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(send(client_preface())), "SETTINGS ACK");
  EXPECT_EQ(summary(send(std::span<const std::byte>())), "");
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, WrongClientPrefaceIsProtocolError) {
  const frames f = send(to_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(summary(f), "SETTINGS; GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());
  // Nothing more is taken, not even a good preface.
  EXPECT_EQ(summary(send(client_preface())), "");
}

TEST_F(H2Server, WrongClientPrefaceIsSeenBeforeItIsWhole) {
  server->start();
  EXPECT_EQ(summary(send(to_bytes("PRI * HTTP/2"))), "");  // so far, so good
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(send(to_bytes(".1"))), "GOAWAY last=0 PROTOCOL_ERROR");  // "2.0" it was to be
  EXPECT_TRUE(server->failed());
}

TEST_F(H2Server, FirstFrameNotSettingsIsProtocolError) {
  EXPECT_EQ(summary(send(join{to_bytes(h2::client_preface), ping()})), "SETTINGS; GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());
  EXPECT_EQ(handler->pings, 0);

  connect({});  // a SETTINGS acknowledgement is not the client's SETTINGS
  EXPECT_EQ(summary(send(join{to_bytes(h2::client_preface), settings_ack()})),
            "SETTINGS; GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());

  connect({});  // nor is a request
  EXPECT_EQ(summary(send(join{to_bytes(h2::client_preface), request(1)})), "SETTINGS; GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(handler->events.empty());
}

TEST_F(H2Server, PrefaceAndFramesSplitAtEveryByteStillWork) { conversation_in_chunks(1); }

// Pieces that end inside a frame after whole ones, at every offset the sizes give.
TEST_F(H2Server, PrefaceAndFramesInChunksOfOtherSizesStillWork) {
  for (const std::size_t chunk : {2, 3, 5, 7, 9, 10, 13, 25, 33, 64, 100, 1000}) {
    SCOPED_TRACE("chunks of " + std::to_string(chunk));
    connect({});
    conversation_in_chunks(chunk);
  }
}

// ---------------------------------------------------------------------------------------------
// A request and its response.

TEST_F(H2Server, RequestCallbacksComeInOrder) {
  handshake();
  const field_list fields = request_fields("/pkg.Service/Method", {{"grpc-timeout", "1S"}, {"x-user", "ada"}});
  const frames f = send(join{headers(1, fields), data_frame(1, "hello", h2::f_end_stream)});
  EXPECT_EQ(summary(f), "");
  std::vector<std::string> expected{"open 1"};
  for (const auto& [name, value] : fields) expected.push_back("field 1 " + name + ": " + value);
  expected.insert(expected.end(), {"headers 1", "data 1 +5", "end 1"});
  EXPECT_EQ(handler->events, expected);
  const test_stream* s = handler->stream(1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->request, fields);
  EXPECT_EQ(s->data, "hello");
  EXPECT_TRUE(s->remote_closed);
  EXPECT_EQ(s->data_received, 5u);
  EXPECT_EQ(server->open_streams(), 1u);  // half-closed (remote): the response is still to come
}

TEST_F(H2Server, ResponseIsHeadersDataTrailersAndClosesTheStream) {
  handshake();
  send(join{request(1, false), data_frame(1, "hello", h2::f_end_stream)});
  g::h2_stream& s = stream(1);

  out.clear();
  server->send_headers(s, response_headers(), false);
  const bytes prefix = to_bytes(std::string_view("\0\0\0\0\x05", 5));
  const bytes body = to_bytes("world");
  server->send_data(s, prefix, body);
  server->send_trailers(s, ok_trailers());
  // The stream is closed (both ends ended) but on_closed waits for settle().
  EXPECT_TRUE(handler->closed.empty());
  EXPECT_EQ(server->open_streams(), 0u);
  server->settle();
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));

  const frames f = parse(out);
  ASSERT_EQ(summary(f), "HEADERS 1 END_HEADERS; DATA 1 len=10; HEADERS 1 END_STREAM END_HEADERS");
  EXPECT_EQ(f[1].text(), std::string("\0\0\0\0\x05world", 10));
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(decoder->decode(blocks[0].block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
  EXPECT_EQ(decoder->decode(blocks[1].block), (field_list{{"grpc-status", "0"}}));
  EXPECT_EQ(handler->sent, 10u);
  EXPECT_EQ(handler->stream(1)->sent, 10u);
  EXPECT_EQ(server->find(1), nullptr);
}

TEST_F(H2Server, ContentTypeAndGrpcStatusAreIndexedAfterTheirFirstUse) {
  handshake();
  send(join{request(1), request(3)});
  const frames f = call([&] {
    server->send_headers(stream(1), response_headers(), false);
    server->send_trailers(stream(1), ok_trailers());
    server->send_headers(stream(3), response_headers(), false);
    server->send_trailers(stream(3), std::vector<g::h2_field>{{"grpc-status", "0"}, {"x-why", "none"}});
  });
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 4u);
  // First use: literals with incremental indexing (RFC 7541 §6.2.1); no table size update.
  EXPECT_EQ(to_text(blocks[0].block), std::string("\x88\x5f\x10" "application/grpc"));
  EXPECT_EQ(to_text(blocks[1].block), std::string("\x40\x0bgrpc-status\x01" "0"));
  // After: content-type is entry 63 (grpc-status, inserted after it, is 62).
  EXPECT_EQ(to_text(blocks[2].block), "\x88\xbf");
  // Anything else is a literal without indexing, without Huffman coding.
  EXPECT_EQ(to_text(blocks[3].block), std::string("\xbe\x00\x05x-why\x04none", 13));
  EXPECT_EQ(decoder->decode(blocks[0].block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
  EXPECT_EQ(decoder->decode(blocks[1].block), (field_list{{"grpc-status", "0"}}));
  EXPECT_EQ(decoder->decode(blocks[2].block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
  EXPECT_EQ(decoder->decode(blocks[3].block), (field_list{{"grpc-status", "0"}, {"x-why", "none"}}));
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}, {3, false}}));
}

TEST_F(H2Server, NamedResponseFieldsAreWrittenAsTheSameTextIs) {
  // h2::status_200 and the kept fields by name (the session's fixed fields: no compare in the
  // encoder) against the same text as plain fields, on streams 1 and 3 both ways round.
  handshake();
  send(join{request(1), request(3), request(5)});
  const std::vector<g::h2_field> named_headers{h2::status_200, h2::grpc_content_type};
  const std::vector<g::h2_field> named_trailers{h2::grpc_status_ok, {"x-why", "none"}};
  const frames f = call([&] {
    server->send_headers(stream(1), named_headers, false);
    server->send_trailers(stream(1), named_trailers);
    server->send_headers(stream(3), response_headers(), false);
    server->send_trailers(stream(3), std::vector<g::h2_field>{{"grpc-status", "0"}, {"x-why", "none"}});
    server->send_headers(stream(5), named_headers, false);
    server->send_trailers(stream(5), named_trailers);
  });
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 6u);
  EXPECT_EQ(to_text(blocks[0].block), std::string("\x88\x5f\x10" "application/grpc"));
  EXPECT_EQ(to_text(blocks[1].block), std::string("\x40\x0bgrpc-status\x01" "0" "\x00\x05x-why\x04none", 27));
  for (std::size_t i : {2u, 4u}) EXPECT_EQ(to_text(blocks[i].block), "\x88\xbf") << i;
  for (std::size_t i : {3u, 5u}) EXPECT_EQ(to_text(blocks[i].block), std::string("\xbe\x00\x05x-why\x04none", 13)) << i;
  for (std::size_t i = 0; i < blocks.size(); ++i) {  // in order: the decoder's table follows them
    EXPECT_EQ(decoder->decode(blocks[i].block),
              i % 2 == 0 ? (field_list{{":status", "200"}, {"content-type", "application/grpc"}})
                         : (field_list{{"grpc-status", "0"}, {"x-why", "none"}}))
        << i;
  }
}

TEST_F(H2Server, APeerThatShrinksItsTableGetsASizeUpdateAndKeepsTheIndexedFieldsThatFit) {
  handshake();
  send(request(1));
  frames f = call([&] {
    server->send_headers(stream(1), response_headers(), false);
    server->send_trailers(stream(1), ok_trailers());
  });
  for (const block_out& b : header_blocks(f)) decoder->decode(b.block);
  EXPECT_EQ(summary(send(settings_frame({{h2::s_header_table_size, 1000}}))), "SETTINGS ACK");
  decoder->limit(1000);
  send(request(3));
  f = call([&] {
    server->send_headers(stream(3), response_headers(), false);
    server->send_trailers(stream(3), ok_trailers());
  });
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 2u);
  // A size update to 1000 (31 + 969: 0x3f 0xc9 0x07), then the indexes as before.
  EXPECT_EQ(to_text(blocks[0].block), "\x3f\xc9\x07\x88\xbf");
  EXPECT_EQ(to_text(blocks[1].block), "\xbe");
  // The client's decoder refuses a block without the update it expects (COMPRESSION_ERROR).
  EXPECT_EQ(decoder->decode(blocks[0].block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
  EXPECT_EQ(decoder->decode(blocks[1].block), (field_list{{"grpc-status", "0"}}));
}

TEST_F(H2Server, TrailersHeldBehindDataNeitherUseNorChangeTheTableAndCarryAPendingSizeUpdate) {
  handshake({{h2::s_initial_window_size, 4}});
  send(join{request(1), request(3)});
  // Stream 1's reply waits for its window; its trailers wait behind it, encoded now.
  frames f = call([&] {
    server->send_headers(stream(1), response_headers(), false);
    server->send_data(stream(1), to_bytes(std::string_view("\0\0\0\0\x08", 5)), to_bytes("12345678"));
    server->send_trailers(stream(1), ok_trailers());
    // Stream 3 answers without data: its blocks go out now, and use the table.
    server->send_headers(stream(3), response_headers(), false);
    server->send_trailers(stream(3), ok_trailers());
  });
  EXPECT_EQ(summary(f), "HEADERS 1 END_HEADERS; DATA 1 len=4; HEADERS 3 END_HEADERS; HEADERS 3 END_STREAM END_HEADERS");
  std::vector<block_out> blocks = header_blocks(f);
  for (const block_out& b : blocks) decoder->decode(b.block);
  // The peer shrinks its table before stream 1's trailers go: they are the first block it reads
  // after that, so they say so, and decode with the client's decoder, which insists on it.
  EXPECT_EQ(summary(send(settings_frame({{h2::s_header_table_size, 2000}}))), "SETTINGS ACK");
  decoder->limit(2000);
  f = send(window_update(1, 100));
  EXPECT_EQ(summary(f), "DATA 1 len=9; HEADERS 1 END_STREAM END_HEADERS");
  blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(to_text(blocks[0].block).substr(0, 3), "\x3f\xb1\x0f");  // size update to 2000 (31 + 1969)
  EXPECT_NE(to_text(blocks[0].block).find("grpc-status"), std::string::npos);  // a literal: encoded while held
  EXPECT_EQ(decoder->decode(blocks[0].block), (field_list{{"grpc-status", "0"}}));
  // The next block needs no update, and indexes again.
  send(request(5));
  f = call([&] { server->send_headers(stream(5), response_headers(), true); });
  EXPECT_EQ(to_text(header_blocks(f).at(0).block), "\x88\xbf");
  EXPECT_EQ(decoder->decode(header_blocks(f).at(0).block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
}

TEST_F(H2Server, ATableShrunkThenGrownBeforeOurNextBlockIsSignalledAtItsSmallest) {
  handshake();
  send(request(1));
  frames f = call([&] { server->send_headers(stream(1), response_headers(), true); });
  decoder->decode(header_blocks(f).at(0).block);  // content-type is in the client's table
  // 50 bytes, then 4096 again, with no block of ours between: RFC 7541 §4.2 wants the
  // smallest (50) said first; the client's decoder refuses the block otherwise.
  EXPECT_EQ(summary(send(join{settings_frame({{h2::s_header_table_size, 50}}),
                              settings_frame({{h2::s_header_table_size, 4096}})})),
            "SETTINGS ACK; SETTINGS ACK");
  decoder->limit(50);
  decoder->limit(4096);
  send(request(3));
  f = call([&] { server->send_headers(stream(3), response_headers(), true); });
  const bytes block = header_blocks(f).at(0).block;
  EXPECT_EQ(block.at(0), std::byte{0x20});  // emptied: 50 bytes hold neither kept field
  EXPECT_NE(to_text(block).find("application/grpc"), std::string::npos);
  EXPECT_EQ(decoder->decode(block), (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
  // Once said, not again.
  send(request(5));
  f = call([&] { server->send_headers(stream(5), response_headers(), true); });
  EXPECT_NE(header_blocks(f).at(0).block.at(0), std::byte{0x20});
  EXPECT_EQ(decoder->decode(header_blocks(f).at(0).block),
            (field_list{{":status", "200"}, {"content-type", "application/grpc"}}));
}

TEST_F(H2Server, APeerTableTooSmallForTheKeptFieldsGetsLiteralsOnly) {
  handshake({{h2::s_header_table_size, 64}});
  decoder->limit(64);
  send(join{request(1), request(3)});
  const frames f = call([&] {
    for (std::uint32_t id : {1u, 3u}) {
      server->send_headers(stream(id), response_headers(), false);
      server->send_trailers(stream(id), ok_trailers());
    }
  });
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].block.at(0), std::byte{0x20});  // the table emptied, once
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) {
      EXPECT_NE(blocks[i].block.at(0), std::byte{0x20}) << "block " << i;
    }
    const field_list fields = decoder->decode(blocks[i].block);
    EXPECT_EQ(fields, i % 2 == 0 ? (field_list{{":status", "200"}, {"content-type", "application/grpc"}})
                                 : (field_list{{"grpc-status", "0"}}))
        << "block " << i;
    EXPECT_NE(to_text(blocks[i].block).find(i % 2 == 0 ? "application/grpc" : "grpc-status"), std::string::npos)
        << "block " << i << " is not literal";
  }
}

// ---------------------------------------------------------------------------------------------
// Header blocks in pieces (RFC 9113 §6.10).

TEST_F(H2Server, HeadersSplitByContinuationsAreDecoded) {
  handshake();
  const field_list fields = request_fields("/pkg.Service/Method", {{"x-long", pattern(300)}});
  const bytes block = encoder->encode(fields);
  const std::size_t third = block.size() / 3;
  const std::span<const std::byte> b(block);
  const frames f = send(join{frame(h2::t_headers, h2::f_end_stream, 1, b.first(third)),
                             frame(h2::t_continuation, 0, 1, b.subspan(third, third)),
                             frame(h2::t_continuation, h2::f_end_headers, 1, b.subspan(2 * third))});
  EXPECT_EQ(summary(f), "");
  ASSERT_NE(handler->stream(1), nullptr);
  EXPECT_EQ(handler->stream(1)->request, fields);
  EXPECT_EQ(handler->events.back(), "end 1");  // END_STREAM on the HEADERS counts once the block is whole
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, MoreContinuationsThanTheLimitIsEnhanceYourCalm) {
  g::h2_limits limits;
  limits.max_continuations = 2;
  connect(limits);
  handshake();
  // `pieces` frames for one header block: HEADERS, then pieces - 1 CONTINUATIONs.
  const auto split = [&](std::uint32_t id, std::size_t pieces) {
    const bytes block = encoder->encode(request_fields());
    const std::span<const std::byte> b(block);
    const std::size_t n = block.size() / pieces;
    bytes all = frame(h2::t_headers, h2::f_end_stream, id, b.first(n));
    for (std::size_t i = 1; i < pieces; ++i) {
      const bool last = i + 1 == pieces;
      all = join{all, frame(h2::t_continuation, last ? h2::f_end_headers : 0, id,
                            last ? b.subspan(i * n) : b.subspan(i * n, n))};
    }
    return all;
  };
  EXPECT_EQ(summary(send(split(1, 3))), "");  // two CONTINUATIONs: the limit
  EXPECT_EQ(handler->events.back(), "end 1");
  EXPECT_EQ(summary(send(split(3, 4))), "GOAWAY last=3 ENHANCE_YOUR_CALM");
  EXPECT_TRUE(server->failed());
  EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "headers 3"), 0);
}

TEST_F(H2Server, FrameBetweenHeadersAndItsContinuationIsProtocolError) {
  const auto cut_by = [&](const bytes& intruder) {
    connect({});
    handshake();
    const bytes block = encoder->encode(request_fields());
    const std::span<const std::byte> b(block);
    return send(join{frame(h2::t_headers, 0, 1, b.first(4)), intruder,
                     frame(h2::t_continuation, h2::f_end_headers, 1, b.subspan(4))});
  };
  EXPECT_EQ(summary(cut_by(ping())), "GOAWAY last=1 PROTOCOL_ERROR");
  EXPECT_EQ(handler->pings, 0);
  EXPECT_EQ(summary(cut_by(data_frame(1, "x"))), "GOAWAY last=1 PROTOCOL_ERROR");
  EXPECT_EQ(summary(cut_by(settings_frame())), "GOAWAY last=1 PROTOCOL_ERROR");
  // A CONTINUATION of another stream cuts it too.
  EXPECT_EQ(summary(cut_by(frame(h2::t_continuation, 0, 3, bytes{}))), "GOAWAY last=1 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());
}

TEST_F(H2Server, ContinuationWithoutHeadersIsProtocolError) {
  handshake();
  const bytes block = encoder->encode(request_fields());
  EXPECT_EQ(summary(send(frame(h2::t_continuation, h2::f_end_headers, 1, block))), "GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(handler->events.empty());

  connect({});  // nor after a header block that has ended
  handshake();
  EXPECT_EQ(summary(send(request(1))), "");
  EXPECT_EQ(summary(send(frame(h2::t_continuation, h2::f_end_headers, 1, bytes{}))), "GOAWAY last=1 PROTOCOL_ERROR");
}

// ---------------------------------------------------------------------------------------------
// Malformed requests (RFC 9113 §8.1.1, §8.2, §8.3): a stream error; the connection goes on.

class H2ServerMalformed : public H2Server {
 protected:
  H2ServerMalformed() { handshake(); }

  /// A request of `fields` on the next stream: it must be reset with PROTOCOL_ERROR without
  /// on_headers, and the connection (HPACK's table included) must serve the next request.
  void expect_reset(const field_list& fields) {
    const std::uint32_t id = next_id();
    SCOPED_TRACE("stream " + std::to_string(id));
    handler->events.clear();
    handler->closed.clear();
    const frames f = send(headers(id, fields, h2::f_end_headers | h2::f_end_stream));
    EXPECT_EQ(summary(f), "RST_STREAM " + std::to_string(id) + " PROTOCOL_ERROR");
    EXPECT_TRUE(connection_ok()) << server->error();
    EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "headers " + std::to_string(id)), 0);
    EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "end " + std::to_string(id)), 0);
    EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{static_cast<std::int32_t>(id), false}}));
    // The next request's block takes "x-fine" from HPACK's dynamic table, where the malformed
    // block put it: it decodes only if the server decoded that block to its end.
    expect_served(request_fields("/ok", {{"x-fine", "indexed"}}));
  }

  /// A request of `fields` on the next stream: it must be served.
  void expect_served(const field_list& fields) {
    const std::uint32_t id = next_id();
    SCOPED_TRACE("stream " + std::to_string(id));
    handler->events.clear();
    EXPECT_EQ(summary(send(headers(id, fields, h2::f_end_headers | h2::f_end_stream))), "");
    EXPECT_TRUE(connection_ok()) << server->error();
    ASSERT_NE(handler->stream(static_cast<std::int32_t>(id)), nullptr);
    EXPECT_EQ(handler->stream(static_cast<std::int32_t>(id))->request, fields);
    ASSERT_FALSE(handler->events.empty());
    EXPECT_EQ(handler->events.back(), "end " + std::to_string(id));
  }

  std::uint32_t next_id() {
    const std::uint32_t id = _next;
    _next += 2;
    return id;
  }

 private:
  std::uint32_t _next = 1;
};

/// The well-formed request's fields without those named in `removed`, then "x-fine" (a field
/// the next request takes from HPACK's dynamic table), then `added`.
field_list with(const field_list& added, const std::vector<std::string>& removed = {}) {
  field_list f;
  for (const field& x : request_fields()) {
    if (std::find(removed.begin(), removed.end(), x.first) == removed.end()) f.push_back(x);
  }
  f.push_back({"x-fine", "indexed"});
  f.insert(f.end(), added.begin(), added.end());
  return f;
}

TEST_F(H2ServerMalformed, UpperCaseFieldNameResetsTheStream) {
  expect_reset(with({{"X-Upper", "1"}}));
  expect_reset(with({{"x-Upper", "1"}}));
  expect_reset(with({{":PATH", "/x"}}, {":path"}));
}

TEST_F(H2ServerMalformed, OtherInvalidFieldNamesResetTheStream) {
  expect_reset(with({{"x bad", "1"}}));
  expect_reset(with({{"x:bad", "1"}}));
  expect_reset(with({{"", "1"}}));
  expect_reset(with({{":", "1"}}));
}

TEST_F(H2ServerMalformed, PseudoHeaderAfterARegularFieldResetsTheStream) {
  field_list f = with({}, {":authority"});
  f.push_back({":authority", "late"});
  expect_reset(f);
}

TEST_F(H2ServerMalformed, UnknownOrResponsePseudoHeaderResetsTheStream) {
  field_list f = request_fields();
  f.insert(f.begin(), {":protocol-x", "1"});
  expect_reset(f);
  f = request_fields();
  f.insert(f.begin(), {":status", "200"});
  expect_reset(f);
}

TEST_F(H2ServerMalformed, DuplicatePseudoHeaderResetsTheStream) {
  field_list f = request_fields();
  f.insert(f.begin() + 3, {":path", "/again"});
  expect_reset(f);
  f = request_fields();
  f.insert(f.begin() + 1, {":method", "GET"});
  expect_reset(f);
}

TEST_F(H2ServerMalformed, MissingRequiredPseudoHeaderResetsTheStream) {
  expect_reset(with({}, {":path"}));
  expect_reset(with({}, {":method"}));
  expect_reset(with({}, {":scheme"}));
  field_list f = with({}, {":path"});  // an empty :path is as good as none (RFC 9113 §8.3.1)
  f.insert(f.begin(), {":path", ""});
  expect_reset(f);
}

TEST_F(H2ServerMalformed, ConnectionSpecificFieldResetsTheStream) {
  expect_reset(with({{"connection", "keep-alive"}}));
  expect_reset(with({{"transfer-encoding", "chunked"}}));
  expect_reset(with({{"keep-alive", "timeout=5"}}));
  expect_reset(with({{"upgrade", "h2c"}}));
  expect_reset(with({{"proxy-connection", "close"}}));
}

TEST_F(H2ServerMalformed, TeOtherThanTrailersResetsTheStream) {
  expect_reset(with({{"te", "gzip"}}, {"te"}));
  expect_reset(with({{"te", "trailers, gzip"}}, {"te"}));
}

TEST_F(H2ServerMalformed, ValueWithCrLfNulOrEdgeWhitespaceResetsTheStream) {
  expect_reset(with({{"x-v", "a\rb"}}));
  expect_reset(with({{"x-v", "a\nb"}}));
  expect_reset(with({{"x-v", std::string("a\0b", 3)}}));
  expect_reset(with({{"x-v", " leading"}}));
  expect_reset(with({{"x-v", "trailing "}}));
  expect_reset(with({{"x-v", "\ttab"}}));
  // Inner spaces and tabs are fine.
  expect_served(request_fields("/ok", {{"x-v", "a b\tc"}}));
}

TEST_F(H2ServerMalformed, ContentLengthNotMatchingTheDataResetsTheStream) {
  const frames f = send(join{request(1, false, {{"content-length", "10"}}), data_frame(1, "hello", h2::f_end_stream)});
  EXPECT_EQ(summary(f), "RST_STREAM 1 PROTOCOL_ERROR");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(handler->stream(1)->data, "hello");
  EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "end 1"), 0);
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));

  // More DATA than it said.
  EXPECT_EQ(summary(send(join{request(3, false, {{"content-length", "2"}}), data_frame(3, "hello", h2::f_end_stream)})),
            "RST_STREAM 3 PROTOCOL_ERROR");
  // A content-length with no DATA at all.
  EXPECT_EQ(summary(send(request(5, true, {{"content-length", "1"}}))), "RST_STREAM 5 PROTOCOL_ERROR");
  // Not a number.
  EXPECT_EQ(summary(send(request(7, true, {{"content-length", "1x"}}))), "RST_STREAM 7 PROTOCOL_ERROR");

  // One that matches is a request like any other.
  EXPECT_EQ(summary(send(join{request(9, false, {{"content-length", "5"}}), data_frame(9, "hel"),
                              data_frame(9, "lo", h2::f_end_stream)})),
            "");
  EXPECT_EQ(handler->events.back(), "end 9");
}

TEST_F(H2ServerMalformed, TrailersWithoutEndStreamResetTheStream) {
  const frames f =
      send(join{request(1, false), data_frame(1, "x"), headers(1, {{"x-trailer", "1"}}, h2::f_end_headers)});
  EXPECT_EQ(summary(f), "RST_STREAM 1 PROTOCOL_ERROR");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "end 1"), 0);

  // With END_STREAM they are the request's trailers.
  handler->events.clear();
  EXPECT_EQ(summary(send(join{request(3, false), data_frame(3, "x"),
                              headers(3, {{"x-trailer", "1"}}, h2::f_end_headers | h2::f_end_stream)})),
            "");
  EXPECT_EQ(handler->events, (std::vector<std::string>{"open 3", "field 3 :method: POST", "field 3 :scheme: http",
                                                       "field 3 :path: /pkg.Service/Method",
                                                       "field 3 :authority: localhost:50051",
                                                       "field 3 content-type: application/grpc",
                                                       "field 3 te: trailers", "headers 3", "data 3 +1",
                                                       "trailer 3 x-trailer: 1", "end 3"}));
  // A pseudo-header in trailers is malformed.
  EXPECT_EQ(summary(send(join{request(5, false),
                              headers(5, {{":path", "/late"}}, h2::f_end_headers | h2::f_end_stream)})),
            "RST_STREAM 5 PROTOCOL_ERROR");
}

// ---------------------------------------------------------------------------------------------
// Padding (RFC 9113 §6.1, §6.2).

TEST_F(H2Server, PaddedDataIsUnpadded) {
  handshake();
  open(1);
  bytes p = to_bytes("\x04hello");
  p.resize(p.size() + 4, std::byte{0});
  EXPECT_EQ(summary(send(frame(h2::t_data, h2::f_padded | h2::f_end_stream, 1, p))), "");
  EXPECT_EQ(handler->stream(1)->data, "hello");
  EXPECT_EQ(handler->stream(1)->data_received, 5u);
  EXPECT_EQ(handler->events.back(), "end 1");

  // Padding (and the pad length) counts against the connection's window: 2 frames of 16384
  // bytes of which 1 + 255 are padding give back all their bytes.
  open(3);
  bytes big(16384, std::byte{'z'});
  big[0] = std::byte{255};
  // (The 10 bytes of stream 1's frame count too.)
  EXPECT_EQ(summary(send(join{frame(h2::t_data, h2::f_padded, 3, big), frame(h2::t_data, h2::f_padded, 3, big)})),
            "WINDOW_UPDATE 0 +32778");
  EXPECT_EQ(handler->stream(3)->data.size(), 2u * (16384 - 256));
}

TEST_F(H2Server, PaddedHeadersWithPriorityAreUnpadded) {
  handshake();
  const field_list fields = request_fields();
  const bytes block = encoder->encode(fields);
  bytes p{std::byte{7}};                                                         // pad length
  p.insert(p.end(), {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{16}});  // depends on 0, weight 17
  p.insert(p.end(), block.begin(), block.end());
  p.resize(p.size() + 7, std::byte{0});
  const frames f = send(frame(h2::t_headers, h2::f_padded | h2::f_priority | h2::f_end_headers | h2::f_end_stream, 1, p));
  EXPECT_EQ(summary(f), "");
  ASSERT_NE(handler->stream(1), nullptr);
  EXPECT_EQ(handler->stream(1)->request, fields);
  EXPECT_EQ(handler->events.back(), "end 1");
}

TEST_F(H2Server, PadLengthAsLongAsTheFrameIsProtocolError) {
  handshake();
  open(1);
  // Payload of 3 bytes: pad length 3 leaves no room for the padding itself.
  EXPECT_EQ(summary(send(frame(h2::t_data, h2::f_padded, 1, to_bytes("\x03" "ab")))), "GOAWAY last=1 PROTOCOL_ERROR");
  EXPECT_TRUE(handler->stream(1)->data.empty());

  connect({});
  handshake();
  open(1);
  // Pad length 2 of 3 bytes is all padding, no data: fine.
  EXPECT_EQ(summary(send(frame(h2::t_data, h2::f_padded | h2::f_end_stream, 1, to_bytes("\x02" "ab")))), "");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(handler->events.back(), "end 1");

  connect({});
  handshake();
  const bytes block = encoder->encode(request_fields());
  bytes p{std::byte(block.size() + 1)};
  p.insert(p.end(), block.begin(), block.end());
  EXPECT_EQ(summary(send(frame(h2::t_headers, h2::f_padded | h2::f_end_headers, 1, p))),
            "GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(handler->streams.empty());
}

// ---------------------------------------------------------------------------------------------
// Flow control of what the client sends (RFC 9113 §6.9).

TEST_F(H2Server, DataPastTheStreamWindowIsAFlowControlStreamError) {
  handshake();
  open(1);
  const std::string full(16384, 'd');
  // 3 * 16384 + 16383 = 65535: the whole default window, no more.
  const frames f = send(join{data_frame(1, full), data_frame(1, full), data_frame(1, full),
                             data_frame(1, std::string_view(full).substr(1))});
  EXPECT_EQ(of_type(f, h2::t_rst_stream).size(), 0u) << summary(f);
  EXPECT_EQ(handler->stream(1)->data.size(), 65535u);
  EXPECT_EQ(stream(1).recv_window, 0);
  EXPECT_EQ(summary(send(data_frame(1, "!"))), "RST_STREAM 1 FLOW_CONTROL_ERROR");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(handler->stream(1)->data.size(), 65535u);
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));
}

TEST_F(H2Server, TheConnectionWindowComesBackOnceHalfOfItIsReceived) {
  handshake();
  open(1);
  const std::string full(16384, 'd');
  EXPECT_EQ(summary(send(join{data_frame(1, full), data_frame(1, std::string_view(full).substr(2))})), "");  // 32766
  EXPECT_EQ(summary(send(data_frame(1, "x"))), "WINDOW_UPDATE 0 +32767");
  // Counting starts over.
  open(3);
  EXPECT_EQ(summary(send(join{data_frame(3, full), data_frame(3, std::string_view(full).substr(2))})), "");
  EXPECT_EQ(summary(send(data_frame(3, "xy"))), "WINDOW_UPDATE 0 +32768");
}

// The server gives the connection's window back as soon as half of it has come, so that before
// any DATA frame at least 65535 - 32766 bytes of it are left: more than a frame may carry (our
// SETTINGS_MAX_FRAME_SIZE is 16384). A peer cannot overrun it; the streams' windows pace it.
TEST_F(H2Server, TheConnectionWindowNeverRunsOutWhileStreamWindowsAreRespected) {
  handshake();
  const std::string full(16384, 'd');
  std::uint64_t given_back = 0;
  for (std::uint32_t id = 1; id <= 19; id += 2) {
    open(id);
    const frames f = send(join{data_frame(id, full), data_frame(id, full), data_frame(id, full),
                               data_frame(id, std::string_view(full).substr(1), h2::f_end_stream)});
    ASSERT_TRUE(connection_ok()) << server->error();
    for (const frame_in& w : of_type(f, h2::t_window_update, 0)) given_back += w.u32();
    EXPECT_EQ(of_type(f, h2::t_rst_stream).size(), 0u) << summary(f);
  }
  // 10 streams of 65535 bytes: all came back but for less than half a window.
  EXPECT_LE(given_back, 655350u);
  EXPECT_GT(given_back, 655350u - 32767u);
}

TEST_F(H2Server, ConsumeGivesAStreamWindowUpdateOnlyOnceHalfTheWindowIsConsumed) {
  handshake();
  open(1);
  const std::string full(16384, 'd');
  EXPECT_EQ(summary(send(join{data_frame(1, full), data_frame(1, full)})), "WINDOW_UPDATE 0 +32768");
  EXPECT_EQ(summary(call([&] { server->consume(stream(1), 32766); })), "");
  EXPECT_EQ(summary(call([&] { server->consume(stream(1), 1); })), "WINDOW_UPDATE 1 +32767");
  EXPECT_EQ(stream(1).recv_window, 65535 - 32768 + 32767);
  // The window it gave is the client's to use: 65534 more bytes, and not one past them.
  const frames f = send(join{data_frame(1, full), data_frame(1, full), data_frame(1, full),
                             data_frame(1, std::string_view(full).substr(2))});
  EXPECT_EQ(of_type(f, h2::t_rst_stream).size(), 0u) << summary(f);
  EXPECT_EQ(summary(of_type(send(data_frame(1, "!")), h2::t_rst_stream)), "RST_STREAM 1 FLOW_CONTROL_ERROR");
}

TEST_F(H2Server, ConsumeAfterTheRequestEndedGivesNoWindowUpdate) {
  handshake();
  open(1);
  send(join{data_frame(1, std::string(16384, 'd')), data_frame(1, std::string(16384, 'd'), h2::f_end_stream)});
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(call([&] { server->consume(stream(1), 40000); })), "");
}

// ---------------------------------------------------------------------------------------------
// Flow control of what the server sends.

TEST_F(H2Server, ASmallStreamWindowHoldsDataAndTrailersUntilWindowUpdates) {
  handshake({{h2::s_initial_window_size, 10}});
  send(request(1));
  g::h2_stream& s = stream(1);
  EXPECT_EQ(s.send_window, 10);
  EXPECT_EQ(summary(call([&] { server->send_headers(s, response_headers(), false); })), "HEADERS 1 END_HEADERS");

  const std::string body = "0123456789ABCDEF";  // 5 + 16 = 21 bytes
  frames f = send_data(1, body, std::string_view("\0\0\0\0\x10", 5));
  ASSERT_EQ(summary(f), "DATA 1 len=10");
  std::string received = data_of(f, 1);
  EXPECT_EQ(server->pending_bytes(), 11u);
  EXPECT_EQ(handler->sent, 10u);
  // Trailers wait behind the data; more data sent meanwhile waits too, in order.
  f = send_data(1, "tail");
  EXPECT_EQ(summary(f), "");
  f = call([&] { server->send_trailers(s, ok_trailers()); });
  EXPECT_EQ(summary(f), "");
  const std::size_t trailer_bytes = server->pending_bytes() - 15;
  EXPECT_GT(trailer_bytes, 0u);
  EXPECT_TRUE(handler->closed.empty());

  f = send(window_update(1, 5));
  ASSERT_EQ(summary(f), "DATA 1 len=5");
  received += data_of(f, 1);
  EXPECT_EQ(server->pending_bytes(), 10u + trailer_bytes);

  f = send(window_update(1, 100));
  ASSERT_EQ(summary(f), "DATA 1 len=10; HEADERS 1 END_STREAM END_HEADERS");
  received += data_of(f, 1);
  EXPECT_EQ(received, std::string("\0\0\0\0\x10", 5) + body + "tail");
  EXPECT_EQ(decoder->decode(header_blocks(f).at(0).block), (field_list{{"grpc-status", "0"}}));
  EXPECT_EQ(server->pending_bytes(), 0u);
  EXPECT_EQ(handler->sent, 25u);
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));
}

TEST_F(H2Server, AnExhaustedConnectionWindowHoldsStreamsAndAWindowUpdateReleasesThemInOrder) {
  handshake({{h2::s_initial_window_size, 1 << 20}});
  send(join{request(1), request(3), request(5)});
  frames f = send_data(1, std::string(65535, 'a'));
  EXPECT_EQ(data_of(f, 1), std::string(65535, 'a'));
  EXPECT_EQ(summary(send_data(3, std::string(100, 'b'))), "");
  EXPECT_EQ(summary(call([&] { server->send_trailers(stream(3), ok_trailers()); })), "");
  EXPECT_EQ(summary(send_data(5, std::string(100, 'c'))), "");
  EXPECT_GT(server->pending_bytes(), 200u);

  f = send(window_update(0, 150));
  EXPECT_EQ(summary(f), "DATA 3 len=100; HEADERS 3 END_STREAM END_HEADERS; DATA 5 len=50");
  EXPECT_EQ(server->pending_bytes(), 50u);
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{3, false}}));

  f = send(window_update(0, 1000));
  EXPECT_EQ(summary(f), "DATA 5 len=50");
  EXPECT_EQ(server->pending_bytes(), 0u);
  // What is not held goes at once.
  EXPECT_EQ(summary(send_data(5, "now")), "DATA 5 len=3");
}

TEST_F(H2Server, InitialWindowSizeChangeMovesOpenStreamWindowsByTheDifference) {
  handshake();
  send(request(1));
  EXPECT_EQ(summary(send_data(1, std::string(60, 'a'))), "DATA 1 len=60");
  EXPECT_EQ(stream(1).send_window, 65535 - 60);

  // Down to 50: the window goes negative (RFC 9113 §6.9.2).
  EXPECT_EQ(summary(send(settings_frame({{h2::s_initial_window_size, 50}}))), "SETTINGS ACK");
  EXPECT_EQ(stream(1).send_window, -10);
  EXPECT_EQ(summary(send_data(1, "bcdef")), "");
  EXPECT_EQ(server->pending_bytes(), 5u);
  EXPECT_EQ(summary(send(window_update(1, 12))), "DATA 1 len=2");
  EXPECT_EQ(stream(1).send_window, 0);

  // Up to 100: +50, and what waited goes.
  const frames f = send(settings_frame({{h2::s_initial_window_size, 100}}));
  EXPECT_EQ(summary(f), "SETTINGS ACK; DATA 1 len=3");
  EXPECT_EQ(data_of(f, 1), "def");
  EXPECT_EQ(stream(1).send_window, 47);
  EXPECT_EQ(server->pending_bytes(), 0u);

  // A stream opened now starts at the new size.
  send(request(3));
  EXPECT_EQ(stream(3).send_window, 100);
  EXPECT_EQ(summary(send_data(3, std::string(150, 'x'))), "DATA 3 len=100");
}

TEST_F(H2Server, AStreamWindowOverflowIsAFlowControlStreamError) {
  handshake();
  open(1);
  open(3);
  EXPECT_EQ(summary(send(window_update(1, 0x7fffffff - 65535))), "");  // exactly 2^31-1
  EXPECT_EQ(stream(1).send_window, 0x7fffffff);
  EXPECT_EQ(summary(send(window_update(1, 1))), "RST_STREAM 1 FLOW_CONTROL_ERROR");
  EXPECT_EQ(summary(send(window_update(3, 0x7fffffff))), "RST_STREAM 3 FLOW_CONTROL_ERROR");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(send(ping())), "PING ACK");
}

TEST_F(H2Server, AConnectionWindowOverflowIsAFlowControlConnectionError) {
  handshake();
  EXPECT_EQ(summary(send(window_update(0, 0x7fffffff - 65535))), "");
  EXPECT_EQ(summary(send(window_update(0, 1))), "GOAWAY last=0 FLOW_CONTROL_ERROR");
  EXPECT_TRUE(server->failed());
}

TEST_F(H2Server, AnInitialWindowSizeThatOverflowsAStreamWindowIsAFlowControlConnectionError) {
  handshake();
  open(1);
  EXPECT_EQ(summary(send(window_update(1, 0x7fffffff - 65535 - 10))), "");
  EXPECT_EQ(summary(send(settings_frame({{h2::s_initial_window_size, 65535 + 11}}))),
            "GOAWAY last=1 FLOW_CONTROL_ERROR");

  connect({});
  handshake();
  EXPECT_EQ(summary(send(settings_frame({{h2::s_initial_window_size, 0x80000000u}}))),
            "GOAWAY last=0 FLOW_CONTROL_ERROR");
}

TEST_F(H2Server, AWindowUpdateOfZeroIsProtocolError) {
  handshake();
  open(1);
  // On a stream, a stream error (RFC 9113 §6.9).
  EXPECT_EQ(summary(send(window_update(1, 0))), "RST_STREAM 1 PROTOCOL_ERROR");
  EXPECT_TRUE(connection_ok());
  // On the connection, the connection's.
  EXPECT_EQ(summary(send(window_update(0, 0))), "GOAWAY last=1 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());
}

TEST_F(H2Server, DataFramesNeverExceedThePeersMaxFrameSize) {
  handshake({{h2::s_initial_window_size, 1 << 20}});
  send(window_update(0, 1 << 20));
  send(request(1));
  const std::string body = pattern(40000);
  frames f = send_data(1, body, "hdr");
  EXPECT_EQ(summary(f), "DATA 1 len=16384; DATA 1 len=16384; DATA 1 len=7235");
  EXPECT_EQ(data_of(f, 1), "hdr" + body);

  EXPECT_EQ(summary(send(settings_frame({{h2::s_max_frame_size, 32768}}))), "SETTINGS ACK");
  f = send_data(1, body);
  EXPECT_EQ(summary(f), "DATA 1 len=32768; DATA 1 len=7232");
  EXPECT_EQ(data_of(f, 1), body);

  // Held DATA that goes later is cut the same way.
  connect({});
  handshake({{h2::s_initial_window_size, 0}});
  send(request(1));
  EXPECT_EQ(summary(send_data(1, body)), "");
  EXPECT_EQ(summary(send(window_update(0, 1 << 20))), "");
  f = send(window_update(1, 1 << 20));
  EXPECT_EQ(summary(f), "DATA 1 len=16384; DATA 1 len=16384; DATA 1 len=7232");
  EXPECT_EQ(data_of(f, 1), body);
}

// ---------------------------------------------------------------------------------------------
// Streams (RFC 9113 §5.1).

TEST_F(H2Server, AnEvenStreamIdIsProtocolError) {
  handshake();
  EXPECT_EQ(summary(send(request(2))), "GOAWAY last=0 PROTOCOL_ERROR");
  EXPECT_TRUE(handler->streams.empty());
}

TEST_F(H2Server, FramesOnAnIdleStreamAreProtocolErrors) {
  for (const bytes& f : {data_frame(5, "x"), window_update(5, 10), rst_stream(5, h2::e_cancel)}) {
    connect({});
    handshake();
    open(1);
    EXPECT_EQ(summary(send(f)), "GOAWAY last=1 PROTOCOL_ERROR");
    EXPECT_TRUE(server->failed());
  }
}

TEST_F(H2Server, DataOnAStreamClosedEarlierIsIgnoredButCountsForTheConnectionWindow) {
  handshake();
  send(request(1));
  call([&] { server->send_headers(stream(1), response_headers(), true); });
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));
  handler->events.clear();
  const std::string full(16384, 'd');
  EXPECT_EQ(summary(send(data_frame(1, full))), "");
  EXPECT_EQ(summary(send(data_frame(1, std::string_view(full).substr(1), h2::f_end_stream))),
            "WINDOW_UPDATE 0 +32767");
  EXPECT_TRUE(connection_ok());
  EXPECT_TRUE(handler->events.empty());

  // A stream the server reset, likewise.
  open(3);
  call([&] { server->reset(stream(3), h2::e_cancel); });
  handler->events.clear();
  EXPECT_EQ(summary(send(data_frame(3, "late", h2::f_end_stream))), "");
  EXPECT_TRUE(connection_ok());
  EXPECT_TRUE(handler->events.empty());
}

TEST_F(H2Server, RstStreamFromThePeerClosesTheStreamByPeer) {
  handshake({{h2::s_initial_window_size, 10}});
  open(1);
  send_data(1, std::string(30, 'x'));
  EXPECT_EQ(server->pending_bytes(), 20u);

  out.clear();
  const bytes rst = rst_stream(1, h2::e_cancel);
  server->receive(rst);
  EXPECT_TRUE(handler->closed.empty());  // on_closed waits for settle()
  EXPECT_EQ(server->find(1), nullptr);
  EXPECT_EQ(server->open_streams(), 0u);
  EXPECT_EQ(server->pending_bytes(), 0u);  // what waited for the window is dropped
  server->settle();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, true}}));
  // Its window opening later sends nothing.
  EXPECT_EQ(summary(send(window_update(1, 100))), "");
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, StreamsPastMaxConcurrentBeforeTheAckAreRefusedAndTheirBlockStillDecoded) {
  g::h2_limits limits;
  limits.max_concurrent_streams = 1;
  connect(limits);
  handshake();
  EXPECT_EQ(summary(send(request(1, false, {{"x-token", "abc"}}))), "");
  // Its fields enter HPACK's dynamic table on both sides ...
  const field_list refused = request_fields("/pkg.Service/Method", {{"x-token", "abc"}, {"x-only-here", pattern(60)}});
  const bytes first = encoder->encode(refused);
  EXPECT_EQ(summary(send(frame(h2::t_headers, h2::f_end_headers | h2::f_end_stream, 3, first))),
            "RST_STREAM 3 REFUSED_STREAM");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(handler->stream(3), nullptr);
  EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "open 3"), 0);

  EXPECT_EQ(summary(send(rst_stream(1, h2::e_cancel))), "");
  // ... so the same fields again are a few indices, which decode only if the server kept step.
  const bytes again = encoder->encode(refused);
  EXPECT_LT(again.size() + 40, first.size());
  EXPECT_EQ(summary(send(frame(h2::t_headers, h2::f_end_headers | h2::f_end_stream, 5, again))), "");
  ASSERT_NE(handler->stream(5), nullptr);
  EXPECT_EQ(handler->stream(5)->request, refused);
  EXPECT_EQ(handler->events.back(), "end 5");
}

TEST_F(H2Server, StreamsPastMaxConcurrentAfterTheAckAreProtocolError) {
  g::h2_limits limits;
  limits.max_concurrent_streams = 1;
  connect(limits);
  handshake();
  EXPECT_EQ(summary(send(settings_ack())), "");
  open(1);
  EXPECT_EQ(summary(send(request(3))), "GOAWAY last=3 PROTOCOL_ERROR");
  EXPECT_TRUE(server->failed());
  EXPECT_EQ(handler->stream(3), nullptr);
}

TEST_F(H2Server, ARapidResetBurstIsEnhanceYourCalm) {
  g::h2_limits limits;
  limits.reset_burst = 3;
  limits.resets_per_second = 0;  // no refill: the test does not depend on time
  connect(limits);
  handshake();
  for (std::uint32_t id = 1; id <= 7; id += 2) open(id);
  EXPECT_EQ(summary(send(join{rst_stream(1, h2::e_cancel), rst_stream(3, h2::e_cancel), rst_stream(5, h2::e_cancel)})),
            "");
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, true}, {3, true}, {5, true}}));
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(send(rst_stream(7, h2::e_cancel))), "GOAWAY last=7 ENHANCE_YOUR_CALM");
  EXPECT_TRUE(server->failed());
}

// ---------------------------------------------------------------------------------------------
// PING and SETTINGS (RFC 9113 §6.5, §6.7), frame types and sizes.

TEST_F(H2Server, PingIsAnsweredWithAnAckOfTheSameEightBytes) {
  handshake();
  const frames f = send(ping("\x01\x02\x03\x04\x05\x06\x07\x08"));
  ASSERT_EQ(summary(f), "PING ACK");
  EXPECT_EQ(f[0].text(), "\x01\x02\x03\x04\x05\x06\x07\x08");
  EXPECT_EQ(f[0].id, 0u);
  EXPECT_EQ(handler->pings, 1);
}

TEST_F(H2Server, APingAckFromThePeerIsNotAnswered) {
  handshake();
  EXPECT_EQ(summary(send(ping("abcdefgh", h2::f_ack))), "");
  EXPECT_EQ(handler->pings, 0);
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, APingOfTheWrongLengthIsFrameSizeError) {
  handshake();
  EXPECT_EQ(summary(send(ping("1234567"))), "GOAWAY last=0 FRAME_SIZE_ERROR");
  EXPECT_EQ(handler->pings, 0);
  connect({});
  handshake();
  EXPECT_EQ(summary(send(ping("123456789"))), "GOAWAY last=0 FRAME_SIZE_ERROR");
  connect({});
  handshake();
  EXPECT_EQ(summary(send(frame(h2::t_ping, 0, 1, "12345678"))), "GOAWAY last=0 PROTOCOL_ERROR");
}

TEST_F(H2Server, SettingsAreAcknowledged) {
  handshake();
  EXPECT_EQ(handler->settings, 1);
  const frames f = send(settings_frame({{h2::s_header_table_size, 0},
                                        {h2::s_enable_push, 0},
                                        {h2::s_max_concurrent_streams, 10},
                                        {0x99, 12345}}));  // unknown: ignored
  ASSERT_EQ(summary(f), "SETTINGS ACK");
  EXPECT_TRUE(f[0].payload.empty());
  EXPECT_EQ(handler->settings, 2);
  // An acknowledgement of ours is not answered.
  EXPECT_EQ(summary(send(settings_ack())), "");
  EXPECT_EQ(handler->settings, 2);
}

TEST_F(H2Server, SettingsNotAMultipleOfSixBytesIsFrameSizeError) {
  handshake();
  EXPECT_EQ(summary(send(frame(h2::t_settings, 0, 0, std::string(5, '\0')))), "GOAWAY last=0 FRAME_SIZE_ERROR");
  connect({});
  handshake();
  // An acknowledgement with a payload, likewise.
  EXPECT_EQ(summary(send(frame(h2::t_settings, h2::f_ack, 0, std::string(6, '\0')))),
            "GOAWAY last=0 FRAME_SIZE_ERROR");
  connect({});
  handshake();
  EXPECT_EQ(summary(send(frame(h2::t_settings, 0, 1, bytes{}))), "GOAWAY last=0 PROTOCOL_ERROR");  // on a stream
}

TEST_F(H2Server, EnablePushOtherThanZeroOrOneIsProtocolError) {
  handshake();
  EXPECT_EQ(summary(send(settings_frame({{h2::s_enable_push, 1}}))), "SETTINGS ACK");
  EXPECT_EQ(summary(send(settings_frame({{h2::s_enable_push, 2}}))), "GOAWAY last=0 PROTOCOL_ERROR");
}

TEST_F(H2Server, MaxFrameSizeOutOfRangeIsProtocolError) {
  handshake();
  EXPECT_EQ(summary(send(settings_frame({{h2::s_max_frame_size, 16384}}))), "SETTINGS ACK");
  EXPECT_EQ(summary(send(settings_frame({{h2::s_max_frame_size, 0xffffff}}))), "SETTINGS ACK");
  EXPECT_EQ(summary(send(settings_frame({{h2::s_max_frame_size, 16383}}))), "GOAWAY last=0 PROTOCOL_ERROR");
  connect({});
  handshake();
  EXPECT_EQ(summary(send(settings_frame({{h2::s_max_frame_size, 0x1000000}}))), "GOAWAY last=0 PROTOCOL_ERROR");
}

TEST_F(H2Server, PushPromiseFromTheClientIsProtocolError) {
  handshake();
  open(1);
  bytes p;
  put32(p, 2);
  const bytes block = encoder->encode(request_fields());
  p.insert(p.end(), block.begin(), block.end());
  EXPECT_EQ(summary(send(frame(h2::t_push_promise, h2::f_end_headers, 1, p))), "GOAWAY last=1 PROTOCOL_ERROR");
}

TEST_F(H2Server, UnknownFrameTypesAreIgnored) {
  handshake();
  open(1);
  EXPECT_EQ(summary(send(join{frame(0x42, 0xff, 0, "whatever"), frame(0xfa, 0, 1, "x"), frame(0x20, 0, 99, "")})),
            "");
  EXPECT_TRUE(connection_ok());
  EXPECT_EQ(summary(send(ping())), "PING ACK");
  // ... and PRIORITY, deprecated, is let be.
  EXPECT_EQ(summary(send(frame(h2::t_priority, 0, 1, std::string(5, '\0')))), "");
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, AFrameLargerThan16384IsFrameSizeError) {
  handshake();
  open(1);
  // The frame header alone tells it: the server need not wait for the payload.
  const bytes big = data_frame(1, std::string(16385, 'x'));
  EXPECT_EQ(summary(send(std::span(big).first(h2::frame_header_bytes))), "GOAWAY last=1 FRAME_SIZE_ERROR");
  EXPECT_TRUE(server->failed());
  EXPECT_TRUE(handler->stream(1)->data.empty());
  // 16384 is fine.
  connect({});
  handshake();
  open(1);
  EXPECT_EQ(summary(send(data_frame(1, std::string(16384, 'x')))), "");
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, FixedSizeFramesOfAnotherLengthAreFrameSizeErrors) {
  const std::vector<bytes> wrong{frame(h2::t_rst_stream, 0, 1, "abc"), frame(h2::t_window_update, 0, 1, "abcde"),
                                 frame(h2::t_window_update, 0, 0, "abc"), frame(h2::t_priority, 0, 1, "abcd"),
                                 frame(h2::t_goaway, 0, 0, "1234567")};
  for (const bytes& f : wrong) {
    connect({});
    handshake();
    open(1);
    EXPECT_EQ(summary(send(f)), "GOAWAY last=1 FRAME_SIZE_ERROR");
  }
}

TEST_F(H2Server, StreamFramesOnStreamZeroAndConnectionFramesOnAStreamAreProtocolErrors) {
  const std::vector<bytes> wrong{data_frame(0, "x"), headers(0, request_fields()), rst_stream(0, h2::e_cancel),
                                 frame(h2::t_priority, 0, 0, std::string(5, '\0')), goaway(0, 0)};
  for (std::size_t i = 0; i < wrong.size(); ++i) {
    connect({});
    handshake();
    bytes f = wrong[i];
    if (i == 4) f[8] = std::byte{1};  // GOAWAY on stream 1
    EXPECT_EQ(summary(send(f)), "GOAWAY last=0 PROTOCOL_ERROR") << i;
  }
}

TEST_F(H2Server, AHeaderBlockThatDoesNotDecodeIsCompressionError) {
  handshake();
  // Indexed field 63: past the static table (61 entries), in a dynamic table still empty.
  EXPECT_EQ(summary(send(frame(h2::t_headers, h2::f_end_headers | h2::f_end_stream, 1, to_bytes("\xbf")))),
            "GOAWAY last=1 COMPRESSION_ERROR");
  EXPECT_TRUE(server->failed());
  EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "headers 1"), 0);
}

// ---------------------------------------------------------------------------------------------
// GOAWAY (RFC 9113 §6.8).

TEST_F(H2Server, APeerGoawayMakesTheConnectionDoneOnceNoStreamIsOpen) {
  handshake();
  send(request(1));
  EXPECT_FALSE(server->done());
  EXPECT_EQ(summary(send(goaway(0, h2::e_no_error))), "");
  EXPECT_FALSE(server->done());  // stream 1 still runs
  out.clear();
  server->send_headers(stream(1), response_headers(), true);
  EXPECT_FALSE(server->done());  // closed, but on_closed has not come yet
  server->settle();
  EXPECT_TRUE(server->done());
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));

  connect({});
  handshake();
  send(goaway(0, h2::e_no_error));
  EXPECT_TRUE(server->done());
}

TEST_F(H2Server, ShutDownWritesGoawayWithTheLastStreamAndNewStreamsOpenNothing) {
  handshake();
  open(1);
  open(3);
  EXPECT_EQ(summary(call([&] { server->shut_down(); })), "GOAWAY last=3 NO_ERROR");
  EXPECT_EQ(summary(call([&] { server->shut_down(); })), "");  // once

  // Stream 5's block is decoded (its field enters HPACK's table) but opens nothing.
  handler->events.clear();
  EXPECT_EQ(summary(send(request(5, true, {{"x-after", "goaway"}}))), "");
  EXPECT_TRUE(handler->events.empty());
  EXPECT_EQ(handler->stream(5), nullptr);
  EXPECT_EQ(server->open_streams(), 2u);

  // The streams already open run to their end; stream 3's trailers use that table entry.
  const field_list trailers{{"x-after", "goaway"}};
  EXPECT_EQ(summary(send(join{data_frame(3, "three"), headers(3, trailers, h2::f_end_headers | h2::f_end_stream)})),
            "");
  EXPECT_TRUE(connection_ok()) << server->error();
  EXPECT_EQ(handler->stream(3)->trailers, trailers);
  EXPECT_EQ(handler->events.back(), "end 3");
  EXPECT_EQ(summary(call([&] { server->send_headers(stream(3), response_headers(), true); })),
            "HEADERS 3 END_STREAM END_HEADERS");
  EXPECT_EQ(summary(send(data_frame(1, "one", h2::f_end_stream))), "");
  EXPECT_EQ(handler->stream(1)->data, "one");
}

// RFC 9113 §6.8: after its GOAWAY the server "can discard frames for streams initiated by the
// receiver with identifiers higher than the identified last stream". A client that sent a
// request (HEADERS, then DATA) before it saw the GOAWAY must not get a connection error for it.
TEST_F(H2Server, DataOnAStreamPastOurGoawayIsDiscarded) {
  handshake();
  open(1);
  call([&] { server->shut_down(); });
  EXPECT_EQ(summary(send(join{request(3, false), data_frame(3, "in flight"), window_update(3, 10),
                              data_frame(3, "end", h2::f_end_stream), rst_stream(3, h2::e_cancel)})),
            "");
  EXPECT_TRUE(connection_ok()) << server->error();
  EXPECT_EQ(handler->stream(3), nullptr);
}

// h2_server.hpp: done() is "The peer sent GOAWAY (or we did) and no stream is left".
TEST_F(H2Server, OurShutDownMakesTheConnectionDoneOnceNoStreamIsOpen) {
  handshake();
  send(request(1));
  call([&] { server->shut_down(); });
  EXPECT_FALSE(server->done());
  call([&] { server->send_headers(stream(1), response_headers(), true); });
  EXPECT_TRUE(server->done());
}

// ---------------------------------------------------------------------------------------------
// The handler's word, and large header blocks.

TEST_F(H2Server, FailFromOnPingEndsTheConnectionAndNothingAfterIsProcessed) {
  handshake();
  open(1);
  handler->ping_hook = [&] { server->fail(h2::e_enhance_your_calm, "too many pings", "ping flood"); };
  handler->events.clear();
  const frames f = send(join{ping(), ping(), request(3), data_frame(1, "after")});
  ASSERT_EQ(summary(f), "GOAWAY last=1 ENHANCE_YOUR_CALM");
  EXPECT_EQ(to_text(std::span(f[0].payload).subspan(8)), "ping flood");
  EXPECT_TRUE(server->failed());
  EXPECT_EQ(server->error(), "too many pings");
  EXPECT_EQ(handler->events, std::vector<std::string>{"ping"});
  EXPECT_EQ(handler->pings, 1);
  // Nor in a later call.
  EXPECT_EQ(summary(send(ping())), "");
  EXPECT_EQ(handler->pings, 1);
}

TEST_F(H2Server, ALargeResponseHeaderBlockIsSplitIntoContinuations) {
  handshake();
  send(request(1));
  const std::string big = pattern(40000, 'A');
  const std::vector<g::h2_field> fields{{":status", "200"}, {"x-big", big}, {"x-after", "1"}};
  const frames f = call([&] { server->send_headers(stream(1), fields, true); });
  EXPECT_EQ(summary(f), "HEADERS 1 END_STREAM; CONTINUATION 1; CONTINUATION 1 END_HEADERS");
  for (const frame_in& x : f) EXPECT_LE(x.payload.size(), 16384u);
  const std::vector<block_out> blocks = header_blocks(f);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].frame_count, 3u);
  EXPECT_EQ(decoder->decode(blocks[0].block), (field_list{{":status", "200"}, {"x-big", big}, {"x-after", "1"}}));
  EXPECT_EQ(handler->closed, (std::vector<std::pair<std::int32_t, bool>>{{1, false}}));

  // After the peer allows larger frames, fewer.
  send(settings_frame({{h2::s_max_frame_size, 32768}}));
  send(request(3));
  const frames g2 = call([&] { server->send_headers(stream(3), fields, false); });
  EXPECT_EQ(summary(g2), "HEADERS 3; CONTINUATION 3 END_HEADERS");
  EXPECT_EQ(decoder->decode(header_blocks(g2).at(0).block), (field_list{{":status", "200"}, {"x-big", big}, {"x-after", "1"}}));
}

// ---------------------------------------------------------------------------------------------
// Header blocks sent again byte for byte (hpack_repeats.hpp): their fields replayed, not
// decoded, while HPACK's dynamic table is as it was.

/// RFC 7541 §5.1 by hand: `v` with an N-bit prefix after the bits of `first`.
void put_hpack_int(bytes& b, std::uint8_t first, unsigned prefix_bits, std::size_t v) {
  const std::size_t max = (1u << prefix_bits) - 1;
  if (v < max) {
    b.push_back(std::byte(first | v));
    return;
  }
  b.push_back(std::byte(first | max));
  for (v -= max; v >= 128; v >>= 7) b.push_back(std::byte(0x80 | (v & 0x7f)));
  b.push_back(std::byte(v));
}

/// A literal field with a literal name (§6.2): `first` 0x40 inserts it into the table, 0x00
/// does not, 0x10 never.
bytes literal(std::uint8_t first, std::string_view name, std::string_view value) {
  bytes b{std::byte(first)};
  put_hpack_int(b, 0, 7, name.size());
  b.insert(b.end(), reinterpret_cast<const std::byte*>(name.data()), reinterpret_cast<const std::byte*>(name.data()) + name.size());
  put_hpack_int(b, 0, 7, value.size());
  b.insert(b.end(), reinterpret_cast<const std::byte*>(value.data()), reinterpret_cast<const std::byte*>(value.data()) + value.size());
  return b;
}

/// :method POST, :scheme http, :path / (static table 3, 6, 4).
bytes static_pseudo() { return {std::byte(0x83), std::byte(0x86), std::byte(0x84)}; }

bytes indexed(unsigned index) {
  bytes b;
  put_hpack_int(b, 0x80, 7, index);
  return b;
}

bytes whole_request(std::uint32_t id, std::span<const std::byte> block) {
  return frame(h2::t_headers, h2::f_end_headers | h2::f_end_stream, id, block);
}

TEST(HpackBlocks, OnlyIndexedFieldsAndLiteralsNotIndexedLeaveTheTableAlone) {
  EXPECT_TRUE(g::leaves_table_alone({}));
  EXPECT_TRUE(g::leaves_table_alone(join{static_pseudo(), indexed(62), indexed(300)}));
  EXPECT_TRUE(g::leaves_table_alone(join{literal(0x00, "x-a", "1"), literal(0x10, "x-b", pattern(200))}));
  // Literal value with an indexed name (0000xxxx, name index 31: content-type).
  EXPECT_TRUE(g::leaves_table_alone(join{bytes{std::byte(0x0f), std::byte(0x10)}, to_bytes("\x03" "a/b")}));
  EXPECT_FALSE(g::leaves_table_alone(join{static_pseudo(), literal(0x40, "x-a", "1")}));  // an insertion
  EXPECT_FALSE(g::leaves_table_alone(join{bytes{std::byte(0x20)}, static_pseudo()}));     // a size update
  EXPECT_FALSE(g::leaves_table_alone(indexed(0)));                                      // index 0: an error
  const bytes cut = literal(0x00, "x-a", "123");
  EXPECT_FALSE(g::leaves_table_alone(std::span(cut).first(cut.size() - 1)));  // cut short
  EXPECT_FALSE(g::leaves_table_alone(bytes{std::byte(0xff), std::byte(0xff), std::byte(0xff), std::byte(0xff),
                                           std::byte(0xff), std::byte(0x01)}));  // an index past 2^28
}

TEST_F(H2Server, ABlockSentAgainIsReplayedWithTheSameFields) {
  handshake();
  // nghttp2's encoder: the first request inserts its fields into the table, the next ones
  // refer to them, in the same bytes each time.
  const bytes first = encoder->encode(request_fields());
  const bytes second = encoder->encode(request_fields());
  const bytes third = encoder->encode(request_fields());
  ASSERT_NE(first, second);
  ASSERT_EQ(second, third);
  EXPECT_EQ(summary(send(join{whole_request(1, first), whole_request(3, second)})), "");
  EXPECT_EQ(server->repeated_blocks(), 0u);
  EXPECT_EQ(summary(send(whole_request(5, third))), "");
  EXPECT_EQ(server->repeated_blocks(), 1u);
  for (std::int32_t id : {1, 3, 5}) {
    ASSERT_NE(handler->stream(id), nullptr);
    EXPECT_EQ(handler->stream(id)->request, request_fields()) << "stream " << id;
    EXPECT_TRUE(handler->stream(id)->remote_closed);
  }
  const auto headers_events = std::count_if(handler->events.begin(), handler->events.end(),
                                            [](const std::string& e) { return e.starts_with("headers "); });
  EXPECT_EQ(headers_events, 3);
  EXPECT_GT(server->held_bytes(), second.size());  // the kept block is the connection's memory
}

TEST_F(H2Server, ABlockAfterATableChangeIsDecodedAfresh) {
  handshake();
  const bytes refer = join{static_pseudo(), indexed(62)};  // the table's newest entry
  send(whole_request(1, join{static_pseudo(), literal(0x40, "x-a", "1")}));
  send(whole_request(3, refer));
  send(whole_request(5, refer));
  EXPECT_EQ(server->repeated_blocks(), 1u);
  // x-a: 2 becomes entry 62: the same bytes now name it.
  send(whole_request(7, join{static_pseudo(), literal(0x40, "x-a", "2")}));
  send(whole_request(9, refer));
  EXPECT_EQ(server->repeated_blocks(), 1u);
  send(whole_request(11, refer));
  EXPECT_EQ(server->repeated_blocks(), 2u);
  const field_list pseudo{{":method", "POST"}, {":scheme", "http"}, {":path", "/"}};
  const auto with = [&](std::string v) {
    field_list f = pseudo;
    f.emplace_back("x-a", std::move(v));
    return f;
  };
  for (std::int32_t id : {1, 3, 5}) EXPECT_EQ(handler->stream(id)->request, with("1")) << "stream " << id;
  for (std::int32_t id : {7, 9, 11}) EXPECT_EQ(handler->stream(id)->request, with("2")) << "stream " << id;
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, ABlockSplitByAContinuationMayChangeTheTableAndForgetsWhatWasKept) {
  handshake();
  const bytes refer = join{static_pseudo(), indexed(62)};
  send(whole_request(1, join{static_pseudo(), literal(0x40, "x-a", "1")}));
  send(whole_request(3, refer));
  const bytes insert = join{static_pseudo(), literal(0x40, "x-a", "2")};
  send(join{frame(h2::t_headers, h2::f_end_stream, 5, std::span(insert).first(2)),
            frame(h2::t_continuation, h2::f_end_headers, 5, std::span(insert).subspan(2))});
  send(whole_request(7, refer));
  EXPECT_EQ(server->repeated_blocks(), 0u);
  EXPECT_EQ(handler->stream(7)->request.back(), (field{"x-a", "2"}));
}

TEST_F(H2Server, AnInvalidFieldSentTwiceMakesBothRequestsMalformed) {
  handshake();
  const bytes bad = join{static_pseudo(), literal(0x00, "X-Upper", "1")};
  EXPECT_EQ(summary(send(whole_request(1, bad))), "RST_STREAM 1 PROTOCOL_ERROR");
  EXPECT_EQ(summary(send(whole_request(3, bad))), "RST_STREAM 3 PROTOCOL_ERROR");
  EXPECT_EQ(server->repeated_blocks(), 0u);
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, RepeatedFieldsAreStillCheckedAgainstTheirStream) {
  handshake();
  // Each field is valid alone; the block repeats a pseudo-header, which makes any request
  // with it malformed, replayed or not.
  const bytes twice = join{static_pseudo(), indexed(4)};
  EXPECT_EQ(summary(send(whole_request(1, twice))), "RST_STREAM 1 PROTOCOL_ERROR");
  EXPECT_EQ(summary(send(whole_request(3, twice))), "RST_STREAM 3 PROTOCOL_ERROR");
  EXPECT_EQ(server->repeated_blocks(), 1u);
  const bytes fine = join{static_pseudo(), literal(0x00, "x-a", "1")};
  EXPECT_EQ(summary(send(join{whole_request(5, fine), whole_request(7, fine)})), "");
  EXPECT_EQ(server->repeated_blocks(), 2u);
}

TEST_F(H2Server, AKnownBlockOpensARequestInOneStepWithTheChecksItPassedBefore) {
  handshake();
  handler->knows = true;
  // The same bytes (literals not indexed: the table never changes) open every request.
  const bytes block = join{static_pseudo(), literal(0x00, "x-a", "1"), literal(0x00, "content-length", "3")};
  const field_list fields{{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"x-a", "1"}, {"content-length", "3"}};
  const auto request = [&](std::uint32_t id, std::string_view body) {
    return join{frame(h2::t_headers, h2::f_end_headers, id, block), frame(h2::t_data, h2::f_end_stream, id, to_bytes(body))};
  };
  EXPECT_EQ(summary(send(request(1, "abc"))), "");  // decoded, kept
  EXPECT_EQ(summary(send(request(3, "abc"))), "");  // replayed field by field, remembered
  EXPECT_EQ(summary(send(request(5, "abc"))), "");  // known: one step
  EXPECT_EQ(summary(send(request(7, "abc"))), "");
  EXPECT_EQ(handler->remembered_on, (std::vector<std::int32_t>{3}));
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{5, 7}));
  for (std::int32_t id : {1, 3, 5, 7}) {
    EXPECT_EQ(handler->stream(id)->request, fields) << "stream " << id;
    EXPECT_EQ(handler->stream(id)->data, "abc") << "stream " << id;
    EXPECT_EQ(std::count(handler->events.begin(), handler->events.end(), "headers " + std::to_string(id)), 1);
  }
  // The content-length the known block carries still binds its request's DATA.
  EXPECT_EQ(summary(send(request(9, "abcd"))), "RST_STREAM 9 PROTOCOL_ERROR");
  EXPECT_EQ(handler->known_on.back(), 9);
  // As trailers the same block is taken field by field (and is malformed there: pseudo-headers).
  const bytes opening = join{static_pseudo(), literal(0x00, "x-b", "2")};
  send(frame(h2::t_headers, h2::f_end_headers, 11, opening));
  send(frame(h2::t_headers, h2::f_end_headers | h2::f_end_stream, 11, block));
  EXPECT_EQ(handler->known_on.back(), 9);
  EXPECT_EQ(handler->stream(11)->trailers.size(), 0u);
  EXPECT_EQ(server->repeated_blocks(), 5u);
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, AMalformedBlockIsNeverKnownAndATableChangeForgetsWhatWas) {
  handshake();
  handler->knows = true;
  const bytes twice = join{static_pseudo(), indexed(4)};  // :path twice
  for (std::uint32_t id : {1u, 3u, 5u}) {
    EXPECT_EQ(summary(send(whole_request(id, twice))), "RST_STREAM " + std::to_string(id) + " PROTOCOL_ERROR");
  }
  EXPECT_TRUE(handler->remembered_on.empty());
  EXPECT_TRUE(handler->known_on.empty());
  // A block known, then the same bytes meaning another value after the table changed.
  const bytes refer = join{static_pseudo(), indexed(62)};
  send(whole_request(7, join{static_pseudo(), literal(0x40, "x-a", "1")}));
  for (std::uint32_t id : {9u, 11u, 13u}) send(whole_request(id, refer));
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{13}));
  send(whole_request(15, join{static_pseudo(), literal(0x40, "x-a", "2")}));
  for (std::uint32_t id : {17u, 19u, 21u}) send(whole_request(id, refer));
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{13, 21}));
  EXPECT_EQ(handler->stream(13)->request.back(), (field{"x-a", "1"}));
  for (std::int32_t id : {17, 19, 21}) EXPECT_EQ(handler->stream(id)->request.back(), (field{"x-a", "2"})) << id;
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, ASlotKeptForAnotherBlockNeverAppliesWhatTheOldOneMeant) {
  handshake();
  handler->knows = true;
  // Literals not indexed: no block changes the table, and each distinct one takes the next of
  // the 4 slots, so the fifth takes the first block's slot.
  const auto block = [](std::string_view v) { return join{static_pseudo(), literal(0x00, "x-n", v)}; };
  const auto sent_as = [&](std::int32_t id) { return handler->stream(id)->request.back().second; };
  for (std::uint32_t id : {1u, 3u, 5u}) send(whole_request(id, block("a")));
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{5}));
  std::uint32_t id = 7;
  for (std::string_view v : {"b", "c", "d", "e"}) send(whole_request(id++ * 2 - 7, block(v)));
  // "e" holds the slot "a" had, under another id: its replays are its own fields.
  for (std::uint32_t i : {15u, 17u, 19u}) send(whole_request(i, block("e")));
  for (std::int32_t i : {15, 17, 19}) EXPECT_EQ(sent_as(i), "e") << i;
  EXPECT_EQ(handler->remembered_on, (std::vector<std::int32_t>{3, 15}));
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{5, 17, 19}));
  // "a" again: no longer kept, decoded as it is.
  for (std::uint32_t i : {21u, 23u}) send(whole_request(i, block("a")));
  EXPECT_EQ(sent_as(21), "a");
  EXPECT_EQ(sent_as(23), "a");
  EXPECT_EQ(handler->known_on, (std::vector<std::int32_t>{5, 17, 19}));
  EXPECT_TRUE(connection_ok());
}

TEST_F(H2Server, LongBlocksAreNotKept) {
  handshake();
  const bytes long_block = join{static_pseudo(), literal(0x00, "x-long", pattern(g::hpack_repeats::max_block_bytes))};
  send(join{whole_request(1, long_block), whole_request(3, long_block)});
  EXPECT_EQ(server->repeated_blocks(), 0u);
  EXPECT_EQ(handler->stream(3)->request.back().second, pattern(g::hpack_repeats::max_block_bytes));
}

}  // namespace

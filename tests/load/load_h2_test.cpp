// Tests for ringrpc-load's HTTP/2 and gRPC pieces (tools/load/proto_h2.cpp, grpc_framing.cpp,
// grpc_request.cpp) and --shard / --start-at (shard.cpp). The h2c and grpc codecs talk to an
// HTTP/2 server session of nghttp2's in the same process: bytes go both ways in memory.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "grpc_framing.hpp"
#include "grpc_request.hpp"
#include "h2_stream_table.hpp"
#include "protocol.hpp"
#include "shard.hpp"
#include "template_options.hpp"

namespace {

using namespace ringrpc::load;

std::span<const std::byte> as_bytes(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

// --- grpc framing -------------------------------------------------------------------------------

TEST(GrpcFraming, FramesAMessageWithItsPrefix) {
  const auto framed = grpc_frame_message(as_bytes("abc"));
  ASSERT_EQ(framed.size(), 8u);
  EXPECT_EQ(framed[0], std::byte{0});
  EXPECT_EQ(framed[4], std::byte{3});
  EXPECT_EQ(static_cast<char>(framed[5]), 'a');
}

TEST(GrpcFraming, ReaderCountsMessagesAcrossChunks) {
  std::string body;
  for (const std::string m : {"hello", "", "xyz"}) {
    const auto f = grpc_frame_message(as_bytes(m));
    body.append(reinterpret_cast<const char*>(f.data()), f.size());
  }
  for (std::size_t split = 0; split <= body.size(); ++split) {
    grpc_message_reader r;
    ASSERT_TRUE(r.feed(as_bytes(body.substr(0, split))));
    EXPECT_EQ(r.at_boundary(), split == 0 || split == 10 || split == 15 || split == body.size()) << split;
    ASSERT_TRUE(r.feed(as_bytes(body.substr(split))));
    EXPECT_TRUE(r.at_boundary());
    EXPECT_EQ(r.messages(), 3u);
  }
}

TEST(GrpcFraming, ReaderRefusesBadFlagAndOversizedMessage) {
  grpc_message_reader bad_flag;
  EXPECT_FALSE(bad_flag.feed(as_bytes(std::string("\x02\0\0\0\0", 5))));
  EXPECT_NE(bad_flag.error(), nullptr);
  grpc_message_reader small(10);
  EXPECT_FALSE(small.feed(as_bytes(std::string("\0\0\0\0\x0b", 5))));
  grpc_message_reader exact(11);
  EXPECT_TRUE(exact.feed(as_bytes(std::string("\0\0\0\0\x0b", 5))));
  EXPECT_FALSE(exact.at_boundary());  // the 11 bytes are still to come
}

TEST(GrpcFraming, StatusParsingAndKinds) {
  EXPECT_EQ(parse_grpc_status("0"), 0u);
  EXPECT_EQ(parse_grpc_status("16"), 16u);
  EXPECT_FALSE(parse_grpc_status("17"));
  EXPECT_FALSE(parse_grpc_status("05"));
  EXPECT_FALSE(parse_grpc_status(""));
  EXPECT_FALSE(parse_grpc_status("1x"));
  EXPECT_EQ(grpc_status_kind(5), "grpc_not_found");
  EXPECT_EQ(grpc_status_kind(14), "grpc_unavailable");
  EXPECT_EQ(grpc_status_kind(40), "grpc_status_40");
}

TEST(GrpcFraming, CallOutcome) {
  grpc_message_reader whole;
  ASSERT_TRUE(whole.feed(as_bytes(std::string("\0\0\0\0\0", 5))));
  EXPECT_EQ(grpc_call_outcome(200, "0", whole), "");
  EXPECT_EQ(grpc_call_outcome(200, "5", whole), "grpc_not_found");
  EXPECT_EQ(grpc_call_outcome(200, "", whole), "grpc_no_status");
  EXPECT_EQ(grpc_call_outcome(200, "x", whole), "grpc_bad_status");
  EXPECT_EQ(grpc_call_outcome(503, "0", whole), "http_503");
  grpc_message_reader cut;
  ASSERT_TRUE(cut.feed(as_bytes(std::string("\0\0\0\0\x04zz", 7))));
  EXPECT_EQ(grpc_call_outcome(200, "0", cut), "grpc_bad_message");
  grpc_message_reader big(16);  // --max-body 16: a message claiming 17 bytes is too large
  EXPECT_FALSE(big.feed(as_bytes(std::string("\0\0\0\0\x11", 5))));
  EXPECT_EQ(grpc_call_outcome(200, "0", big), "reply_too_large");
}

// --- targets -----------------------------------------------------------------------------------

TEST(H2Target, ParsesH2cAndGrpc) {
  auto t = parse_target("h2c://127.0.0.1:8080/a/b");
  EXPECT_EQ(t.scheme, "h2c");
  EXPECT_EQ(t.path, "/a/b");
  EXPECT_EQ(parse_target("h2c://localhost").port, 80);
  t = parse_target("grpc://[::1]:50051/pkg.Svc/Method");
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.path, "/pkg.Svc/Method");
  for (const char* bad : {"grpc://h:1", "grpc://h:1/Svc", "grpc://h:1/pkg.Svc/", "grpc://h:1//M", "grpc://h:1/a/b/c",
                          "grpc://h/pkg.Svc/M"}) {
    EXPECT_THROW(parse_target(bad), std::invalid_argument) << bad;
  }
}

TEST(H2Target, ResolvesToItsOneEndpoint) {
  const auto e = resolve_endpoints("grpc://127.0.0.1:9/p.S/M");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].port, 9);
}

// --- --proto / --data --------------------------------------------------------------------------

TEST(GrpcRequest, ConvertsJsonWithTheProtoFile) {
  const std::string bytes = grpc_request_from_json(RINGRPC_ECHO_PROTO, {}, "ringtest.Echo/Say", R"({"text":"hello"})");
  EXPECT_EQ(bytes, std::string("\x0a\x05hello", 7));
  const std::string fail = grpc_request_from_json(RINGRPC_ECHO_PROTO, {}, "ringtest.Echo/Say", R"({"failWith":5})");
  EXPECT_EQ(fail, std::string("\x10\x05", 2));
}

TEST(GrpcRequest, ClearErrors) {
  auto message_of = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of([] { grpc_request_from_json(RINGRPC_ECHO_PROTO, {}, "ringtest.Echo/Nope", "{}"); })
                .find("has no method ringtest.Echo.Nope"),
            std::string::npos);
  EXPECT_NE(message_of([] { grpc_request_from_json(RINGRPC_ECHO_PROTO, {}, "ringtest.Echo/Watch", "{}"); })
                .find("streaming"),
            std::string::npos);
  EXPECT_NE(message_of([] { grpc_request_from_json(RINGRPC_ECHO_PROTO, {}, "ringtest.Echo/Say", R"({"nope":1})"); })
                .find("--data is not a ringtest.EchoRequest"),
            std::string::npos);
  EXPECT_NE(message_of([] { grpc_request_from_json("/nonexistent.proto", {}, "a.B/C", "{}"); }).find("cannot read"),
            std::string::npos);
}

// --- the codec against an nghttp2 server session -------------------------------------------------

// A tiny HTTP/2 server in memory: answers each request with `status` and `body`, and for gRPC
// with a framed message and grpc-status trailers.
class memory_server {
 public:
  std::string status = "200";
  std::string body = "hello";
  std::string grpc_status;  // empty: plain HTTP/2
  std::map<std::string, std::string> last_headers;
  std::vector<std::string> paths;  // each request's :path, in arrival order
  std::string data;                // every request body received, one after another
  unsigned requests = 0;
  unsigned refuse = 0;  // the next this many requests get RST_STREAM REFUSED_STREAM, unanswered

  memory_server() {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &memory_server::on_frame);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &memory_server::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &memory_server::on_data);
    nghttp2_session_server_new(&_s, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(_s, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~memory_server() { nghttp2_session_del(_s); }

  void receive(const std::vector<std::byte>& in) {
    ASSERT_EQ(nghttp2_session_mem_recv(_s, reinterpret_cast<const std::uint8_t*>(in.data()), in.size()),
              static_cast<ssize_t>(in.size()));
  }
  std::vector<std::byte> send() {
    std::vector<std::byte> out;
    const std::uint8_t* p = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(_s, &p)) > 0;) {
      out.insert(out.end(), reinterpret_cast<const std::byte*>(p), reinterpret_cast<const std::byte*>(p) + n);
    }
    return out;
  }
  void go_away(std::int32_t last, std::uint32_t code = NGHTTP2_NO_ERROR) {
    nghttp2_submit_goaway(_s, NGHTTP2_FLAG_NONE, last, code, nullptr, 0);
  }
  void reset(std::int32_t id, std::uint32_t code = NGHTTP2_INTERNAL_ERROR) {
    nghttp2_submit_rst_stream(_s, NGHTTP2_FLAG_NONE, id, code);
  }
  void limit_streams(std::uint32_t n) { settings(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, n); }
  void settings(std::int32_t id, std::uint32_t value) {
    const nghttp2_settings_entry e{id, value};
    nghttp2_submit_settings(_s, NGHTTP2_FLAG_NONE, &e, 1);
  }

 private:
  struct reply_body {
    std::string bytes;
    std::size_t sent = 0;
  };

  static int on_header(nghttp2_session*, const nghttp2_frame*, const std::uint8_t* n, std::size_t nl,
                       const std::uint8_t* v, std::size_t vl, std::uint8_t, void* user) {
    auto* self = static_cast<memory_server*>(user);
    const std::string name(reinterpret_cast<const char*>(n), nl), value(reinterpret_cast<const char*>(v), vl);
    self->last_headers[name] = value;
    if (name == ":path") self->paths.push_back(value);
    return 0;
  }
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t, const std::uint8_t* d, std::size_t n, void* user) {
    static_cast<memory_server*>(user)->data.append(reinterpret_cast<const char*>(d), n);
    return 0;
  }
  static ssize_t read(nghttp2_session* s, std::int32_t id, std::uint8_t* buf, std::size_t len, std::uint32_t* flags,
                      nghttp2_data_source* src, void* user) {
    auto* self = static_cast<memory_server*>(user);
    auto* b = static_cast<reply_body*>(src->ptr);
    const std::size_t n = std::min(len, b->bytes.size() - b->sent);
    std::memcpy(buf, b->bytes.data() + b->sent, n);
    b->sent += n;
    if (b->sent == b->bytes.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!self->grpc_status.empty()) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        const std::string name = "grpc-status";
        nghttp2_nv t{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                     reinterpret_cast<std::uint8_t*>(self->grpc_status.data()), name.size(), self->grpc_status.size(),
                     NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_trailer(s, id, &t, 1);
      }
    }
    return static_cast<ssize_t>(n);
  }
  static int on_frame(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    auto* self = static_cast<memory_server*>(user);
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    ++self->requests;
    if (self->refuse > 0) {
      --self->refuse;
      nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    self->_bodies.push_back(std::make_unique<reply_body>());
    reply_body* b = self->_bodies.back().get();
    if (self->grpc_status.empty()) {
      b->bytes = self->body;
    } else {
      const auto framed = grpc_frame_message(as_bytes(self->body));
      b->bytes.assign(reinterpret_cast<const char*>(framed.data()), framed.size());
    }
    const std::string n = ":status";
    nghttp2_nv h{reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                 reinterpret_cast<std::uint8_t*>(self->status.data()), n.size(), self->status.size(), NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider d{};
    d.source.ptr = b;
    d.read_callback = &memory_server::read;
    nghttp2_submit_response(s, f->hd.stream_id, &h, 1, &d);
    return 0;
  }

  nghttp2_session* _s = nullptr;
  std::vector<std::unique_ptr<reply_body>> _bodies;
};

struct outcome {
  std::map<std::uint64_t, std::string> answered;  // seq -> "" (ok) or the error kind
  unsigned no_replies = 0;
  bool close_after = false;
  std::string protocol_error;
  std::string lost_as;  // the error kind the protocol error's calls are counted under
};

// Feeds the server's bytes to the codec as the engine would: reply by reply from the front.
outcome parse_all(connection_codec& codec, const std::vector<std::byte>& bytes) {
  outcome o;
  std::span<const std::byte> in(bytes);
  while (!in.empty()) {
    const reply r = codec.parse_reply(in);
    if (r.status == reply_status::incomplete) break;
    if (r.status == reply_status::protocol_error) {
      o.protocol_error = r.error;
      o.lost_as = r.lost_as;
      break;
    }
    o.close_after = o.close_after || r.close_after;
    if (r.status == reply_status::no_reply) {
      ++o.no_replies;
    } else {
      EXPECT_EQ(o.answered.count(r.seq), 0u) << "answered twice: " << r.seq;
      o.answered[r.seq] = r.status == reply_status::ok ? "" : r.error;
    }
    in = in.subspan(r.consumed);
  }
  return o;
}

struct h2_fixture {
  explicit h2_fixture(const std::string& url, std::vector<std::string> headers = {}, std::string payload = {},
                      std::shared_ptr<const request_templates> templates = {}) {
    t = parse_target(url);
    codec_options o;
    o.templates = std::move(templates);
    o.headers = std::move(headers);
    o.payload.assign(reinterpret_cast<const std::byte*>(payload.data()),
                     reinterpret_cast<const std::byte*>(payload.data()) + payload.size());
    proto = make_protocol(t, o);
    kinds = proto->default_kinds();
    codec = proto->new_connection();
  }
  void request(std::uint64_t seq) { codec->write_request(out, seq, kinds[0]); }
  /// A first call answered, then a second (stream 3) the server has read but not answered.
  void second_call_pending() {
    request(0);
    round_trip();
    request(1);
    server.receive(out);
    out.clear();
  }
  // One round trip: what the codec wrote goes to the server, the server's answer comes back.
  outcome round_trip() {
    server.receive(out);
    out.clear();
    const outcome o = parse_all(*codec, server.send());
    codec->write_pending(out);  // the SETTINGS ack, WINDOW_UPDATEs
    return o;
  }
  target t;
  std::unique_ptr<protocol> proto;
  std::vector<request_kind> kinds;
  std::unique_ptr<connection_codec> codec;
  std::vector<std::byte> out;
  memory_server server;
};

// Request templates (--template, placeholders in the path): each stream carries its own call's
// path and body, and a refused stream goes again with the same bytes.
TEST(H2Codec, TemplatedPathAndBodyPerCall) {
  h2_fixture f("h2c://127.0.0.1:8080/u/{seq}", {}, {}, make_request_templates({"b{seq};", "", ""}, "h2c"));
  f.kinds[0].method = "POST";
  f.server.refuse = 1;
  for (std::uint64_t seq = 0; seq < 3; ++seq) f.request(seq);
  outcome o = f.round_trip();
  o = f.round_trip();  // the refused first stream, sent again
  EXPECT_EQ(o.protocol_error, "");
  EXPECT_EQ(f.server.paths, (std::vector<std::string>{"/u/0", "/u/1", "/u/2", "/u/0"}));
  EXPECT_EQ(f.server.data, "b0;b1;b2;b0;");
}

TEST(H2Codec, ManyStreamsAnsweredOncePerSeq) {
  h2_fixture f("h2c://127.0.0.1:8080/ok", {"X-Test: yes"});
  EXPECT_TRUE(f.proto->talks_unasked());
  for (std::uint64_t seq = 0; seq < 10; ++seq) f.request(seq);
  const outcome o = f.round_trip();
  EXPECT_EQ(o.protocol_error, "");
  ASSERT_EQ(o.answered.size(), 10u);
  for (const auto& [seq, err] : o.answered) EXPECT_EQ(err, "") << seq;
  EXPECT_EQ(o.no_replies, 0u);  // SETTINGS and each reply's HEADERS ride with the frame ending it
  EXPECT_EQ(f.server.requests, 10u);
  EXPECT_EQ(f.server.last_headers[":path"], "/ok");
  EXPECT_EQ(f.server.last_headers[":method"], "GET");
  EXPECT_EQ(f.server.last_headers[":authority"], "127.0.0.1:8080");
  EXPECT_EQ(f.server.last_headers["x-test"], "yes");
  // The next round on the same connection: stream ids go on, the session stays sound.
  for (std::uint64_t seq = 10; seq < 15; ++seq) f.request(seq);
  const outcome o2 = f.round_trip();
  EXPECT_EQ(o2.answered.size(), 5u);
  EXPECT_EQ(o2.answered.begin()->first, 10u);
}

TEST(H2Codec, HttpErrorStatusIsItsKind) {
  h2_fixture f("h2c://127.0.0.1:8080/missing");
  f.server.status = "404";
  f.request(0);
  const outcome o = f.round_trip();
  ASSERT_EQ(o.answered.size(), 1u);
  EXPECT_EQ(o.answered.at(0), "http_404");
}

TEST(H2Codec, GrpcStatusFromTrailers) {
  h2_fixture f("grpc://127.0.0.1:1/ringtest.Echo/Say", {}, std::string("\x0a\x01x", 3));
  f.server.grpc_status = "0";
  f.request(0);
  outcome o = f.round_trip();
  ASSERT_EQ(o.answered.size(), 1u);
  EXPECT_EQ(o.answered.at(0), "");
  EXPECT_EQ(f.server.last_headers[":method"], "POST");
  EXPECT_EQ(f.server.last_headers["content-type"], "application/grpc");
  EXPECT_EQ(f.server.last_headers["te"], "trailers");
  f.server.grpc_status = "14";
  f.request(1);
  o = f.round_trip();
  ASSERT_EQ(o.answered.size(), 1u);
  EXPECT_EQ(o.answered.at(1), "grpc_unavailable");
}

TEST(H2Codec, GoawayDropsTheRefusedAndClosesAfter) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.second_call_pending();  // stream 3
  f.server.go_away(3);  // the last stream it takes
  f.request(2);  // stream 5: crosses the GOAWAY, refused unanswered
  f.server.receive(f.out);
  f.out.clear();
  const outcome o = parse_all(*f.codec, f.server.send());
  EXPECT_EQ(o.protocol_error, "");
  EXPECT_TRUE(o.close_after);
  EXPECT_EQ(o.answered.count(1), 1u);
  EXPECT_EQ(o.answered.count(2), 0u);
}

TEST(H2Codec, RefusedStreamIsSentAgainAndAnsweredOnce) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.server.refuse = 2;
  f.request(0);
  f.request(1);
  f.request(2);
  outcome o = f.round_trip();  // streams 1 and 3 refused, 5 answered; the refused go again
  EXPECT_EQ(o.protocol_error, "");
  ASSERT_EQ(o.answered.size(), 1u);
  EXPECT_EQ(o.answered.at(2), "");
  ASSERT_FALSE(f.out.empty());  // the refused requests' new HEADERS
  o = f.round_trip();
  EXPECT_EQ(o.protocol_error, "");
  ASSERT_EQ(o.answered.size(), 2u);
  EXPECT_EQ(o.answered.at(0), "");
  EXPECT_EQ(o.answered.at(1), "");
  EXPECT_EQ(f.server.requests, 5u);
}

TEST(H2Codec, StreamRefusedEveryTimeEndsAsAnError) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.server.refuse = 1000;
  f.request(0);
  std::map<std::uint64_t, std::string> answered;
  for (int round = 0; round < 20 && answered.empty(); ++round) {
    const outcome o = f.round_trip();
    ASSERT_EQ(o.protocol_error, "");
    answered = o.answered;
  }
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered.at(0), "h2_refused_stream");
  EXPECT_EQ(f.server.requests, 9u);  // the first attempt and 8 more
}

TEST(H2Codec, ResetStreamIsAnError) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.request(0);
  f.server.receive(f.out);
  f.out.clear();
  f.server.reset(1);
  const outcome o = parse_all(*f.codec, f.server.send());
  ASSERT_EQ(o.answered.count(0), 1u);
  EXPECT_EQ(o.answered.at(0), "h2_internal_error");
}

TEST(H2Codec, Http11ReplyIsAProtocolError) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.request(0);
  const std::string h1 = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  const reply r = f.codec->parse_reply(as_bytes(h1));
  EXPECT_EQ(r.status, reply_status::protocol_error);
  // A frame that is not SETTINGS first is refused before its length is even complete.
  const std::string ping("\0\0\x08\x06\0\0\0\0\0", 9);
  h2_fixture g("h2c://127.0.0.1:8080/ok");
  EXPECT_EQ(g.codec->parse_reply(as_bytes(ping)).status, reply_status::protocol_error);
}

TEST(H2Codec, OversizedReplyIsRefused) {
  auto t = parse_target("h2c://127.0.0.1:8080/ok");
  codec_options o;
  o.max_reply_bytes = 100;
  auto proto = make_protocol(t, o);
  auto kinds = proto->default_kinds();
  auto codec = proto->new_connection();
  memory_server server;
  server.body = std::string(1000, 'z');
  std::vector<std::byte> out;
  codec->write_request(out, 0, kinds[0]);
  server.receive(out);
  const outcome r = parse_all(*codec, server.send());
  EXPECT_NE(r.protocol_error.find("over --max-body"), std::string::npos) << r.protocol_error;
  EXPECT_EQ(r.lost_as, "reply_too_large");
}

// A server ending the connection for an error: the calls in flight fail by the code it gave
// (they used to wait for an answer that never came and end the run as "unfinished").
TEST(H2Codec, GoawayWithAnErrorCodeFailsTheConnectionByItsCode) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.second_call_pending();  // stream 3, which the GOAWAY covers but the server never answers
  f.server.go_away(3, NGHTTP2_ENHANCE_YOUR_CALM);
  const outcome o = parse_all(*f.codec, f.server.send());
  EXPECT_NE(o.protocol_error.find("ENHANCE_YOUR_CALM"), std::string::npos) << o.protocol_error;
  EXPECT_EQ(o.lost_as, "h2_goaway_enhance_your_calm");
}

// A WINDOW_UPDATE that takes the connection's send window past 2^31-1 is a connection error
// (RFC 9113 6.9.1): named FLOW_CONTROL_ERROR, not left for the calls to go unanswered.
TEST(H2Codec, WindowOverflowIsAFlowControlError) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.second_call_pending();
  std::vector<std::byte> in = f.server.send();  // stream 3's answer is not in it yet: it is sent below
  in.clear();
  const unsigned char overflow[] = {0, 0, 4, NGHTTP2_WINDOW_UPDATE, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
  for (const unsigned char b : overflow) in.push_back(std::byte{b});
  const outcome o = parse_all(*f.codec, in);
  EXPECT_NE(o.protocol_error.find("FLOW_CONTROL_ERROR"), std::string::npos) << o.protocol_error;
  EXPECT_EQ(o.lost_as, "h2_flow_control_error");
}

// Frames that each want an answer (PING), more than nghttp2 queues answers for: a flood, which
// ends the connection; its calls count as ENHANCE_YOUR_CALM (excessive load).
TEST(H2Codec, AFloodOfPingsIsNamed) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.second_call_pending();
  std::vector<std::byte> in;
  for (int i = 0; i < 20000; ++i) {
    const unsigned char ping[] = {0, 0, 8, NGHTTP2_PING, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    for (const unsigned char b : ping) in.push_back(std::byte{b});
  }
  const outcome o = parse_all(*f.codec, in);
  EXPECT_NE(o.protocol_error, "");
  EXPECT_EQ(o.lost_as, "h2_enhance_your_calm") << o.protocol_error;
}

TEST(H2Codec, ResetStreamCodesAreNamed) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.request(0);
  f.server.receive(f.out);
  f.out.clear();
  f.server.reset(1, NGHTTP2_FLOW_CONTROL_ERROR);
  const outcome o = parse_all(*f.codec, f.server.send());
  ASSERT_EQ(o.answered.count(0), 1u);
  EXPECT_EQ(o.answered.at(0), "h2_flow_control_error");
}

TEST(H2Codec, PseudoAndOwnHeadersRefused) {
  codec_options o;
  o.headers = {":path: /x"};
  EXPECT_THROW(make_protocol(parse_target("h2c://h:1/"), o), std::invalid_argument);
  o.headers = {"content-type: text/plain"};
  EXPECT_THROW(make_protocol(parse_target("grpc://h:1/a.B/C"), o), std::invalid_argument);
  EXPECT_NO_THROW(make_protocol(parse_target("h2c://h:1/"), o));
}

// The server's SETTINGS_MAX_CONCURRENT_STREAMS holds streams back, in order, until one closes.
TEST(H2Codec, StreamsPastTheServersLimitWaitTheirTurn) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.server.limit_streams(2);
  f.request(0);
  outcome o = f.round_trip();  // the limit arrives with the first answer
  ASSERT_EQ(o.answered.size(), 1u);
  for (std::uint64_t seq = 1; seq <= 5; ++seq) f.request(seq);
  std::map<std::uint64_t, std::string> answered;
  for (int round = 0; round < 5 && answered.size() < 5; ++round) {
    const unsigned before = f.server.requests;
    o = f.round_trip();
    ASSERT_EQ(o.protocol_error, "");
    EXPECT_LE(f.server.requests - before, 2u) << "round " << round;
    answered.insert(o.answered.begin(), o.answered.end());
  }
  ASSERT_EQ(answered.size(), 5u);
  EXPECT_EQ(answered.begin()->first, 1u);
  EXPECT_EQ(f.server.requests, 6u);
}

// Bodies past the server's 64 KiB windows go out as the server's WINDOW_UPDATEs allow them:
// three streams wait for the connection's window at once, in turn.
TEST(H2Codec, BodiesPastTheWindowsWaitForWindowUpdates) {
  const std::string body(200000, 'b');
  h2_fixture f("h2c://127.0.0.1:8080/up", {}, body);
  f.kinds[0].method = "POST";
  for (std::uint64_t seq = 0; seq < 3; ++seq) f.request(seq);
  EXPECT_LT(f.out.size(), 70000u);  // 65,535 bytes of DATA and the frames around them
  std::map<std::uint64_t, std::string> answered;
  for (int round = 0; round < 40 && answered.size() < 3; ++round) {
    const outcome o = f.round_trip();
    ASSERT_EQ(o.protocol_error, "");
    answered.insert(o.answered.begin(), o.answered.end());
  }
  ASSERT_EQ(answered.size(), 3u);
  for (const auto& [seq, err] : answered) EXPECT_EQ(err, "") << seq;
  EXPECT_EQ(f.server.data, body + body + body);  // all 'b': interleaved or not, the same
}

// A server whose HPACK table shrinks (SETTINGS_HEADER_TABLE_SIZE under 4096) wants the next
// header block after our acknowledgement to begin with a table size update; nghttp2's decoder
// ends the connection (COMPRESSION_ERROR) otherwise.
TEST(H2Codec, AShrunkHeaderTableIsAcknowledgedInTheNextBlock) {
  h2_fixture f("grpc://127.0.0.1:1/ringtest.Echo/Say", {"authorization: Bearer x"}, std::string("\x0a\x01x", 3));
  f.server.grpc_status = "0";
  f.server.settings(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0);
  f.request(0);
  outcome o = f.round_trip();  // answered; our acknowledgement goes out after it
  ASSERT_EQ(o.protocol_error, "");
  ASSERT_EQ(o.answered.size(), 1u);
  for (std::uint64_t seq = 1; seq <= 2; ++seq) f.request(seq);
  o = f.round_trip();
  EXPECT_EQ(o.protocol_error, "");
  EXPECT_EQ(o.answered.size(), 2u);
  EXPECT_EQ(f.server.requests, 3u);
  EXPECT_EQ(f.server.last_headers["authorization"], "Bearer x");
}

// A header block the server never ends (CONTINUATION after CONTINUATION) is a flood.
TEST(H2Codec, AnEndlessHeaderBlockIsAFlood) {
  h2_fixture f("h2c://127.0.0.1:8080/ok");
  f.second_call_pending();
  std::vector<std::byte> in;
  auto put = [&](std::uint8_t type, std::uint8_t flags, std::initializer_list<unsigned char> payload) {
    const unsigned char h[] = {0, 0, static_cast<unsigned char>(payload.size()), type, flags, 0, 0, 0, 3};
    for (const unsigned char b : h) in.push_back(std::byte{b});
    for (const unsigned char b : payload) in.push_back(std::byte{b});
  };
  put(NGHTTP2_HEADERS, 0, {0x88});  // :status 200, no END_HEADERS
  for (int i = 0; i < 100; ++i) put(NGHTTP2_CONTINUATION, 0, {});
  const outcome o = parse_all(*f.codec, in);
  EXPECT_NE(o.protocol_error.find("more than 32 frames"), std::string::npos) << o.protocol_error;
  EXPECT_EQ(o.lost_as, "h2_enhance_your_calm");
  // A frame of another stream inside a header block breaks the connection too.
  h2_fixture g("h2c://127.0.0.1:8080/ok");
  g.second_call_pending();
  in.clear();
  put(NGHTTP2_HEADERS, 0, {0x88});
  put(NGHTTP2_PING, 0, {1, 2, 3, 4, 5, 6, 7, 8});
  const outcome p = parse_all(*g.codec, in);
  EXPECT_EQ(p.lost_as, "h2_protocol_error") << p.protocol_error;
}

TEST(H2StreamTable, FindsWhatItHoldsThroughGrowthAndDeletion) {
  struct s_t {
    std::int32_t id;
  };
  ringrpc::load::h2_detail::stream_table<s_t> table;
  std::map<std::int32_t, std::unique_ptr<s_t>> model;
  std::mt19937 rng(7);
  std::int32_t next = 1;
  for (int step = 0; step < 20000; ++step) {
    if (model.size() < 300 && (model.empty() || rng() % 3 != 0)) {
      // Ids go up by two; now and then one jumps a table's length, to make probe runs collide.
      next += rng() % 10 == 0 ? 2 * 64 : 2;
      auto s = std::make_unique<s_t>(s_t{next});
      table.insert(s.get());
      model.emplace(next, std::move(s));
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      table.erase(it->first);
      model.erase(it);
    }
    ASSERT_EQ(table.size(), model.size());
    if (step % 97 == 0) {
      for (const auto& [id, s] : model) ASSERT_EQ(table.find(id), s.get()) << id;
      EXPECT_EQ(table.find(next + 2), nullptr);
    }
  }
  std::size_t seen = 0;
  table.for_each([&](s_t*) { ++seen; });
  EXPECT_EQ(seen, model.size());
}

// --- --shard and --start-at --------------------------------------------------------------------

TEST(Shard, SharesSumToTheTotal) {
  for (unsigned n = 1; n <= 7; ++n) {
    for (std::uint64_t total : {0ull, 1ull, 5ull, 64ull, 1001ull}) {
      std::uint64_t sum = 0;
      double rate_sum = 0;
      for (unsigned k = 1; k <= n; ++k) {
        const std::uint64_t share = shard_share(total, {k, n});
        EXPECT_LE(share, total / n + 1);
        EXPECT_GE(share, total / n);
        sum += share;
        rate_sum += shard_rate(static_cast<double>(total), {k, n});
      }
      EXPECT_EQ(sum, total);
      EXPECT_EQ(rate_sum, static_cast<double>(total));
    }
  }
  EXPECT_EQ(shard_share(10, {1, 3}), 4u);  // the remainder goes to the first shards
  EXPECT_EQ(shard_share(10, {3, 3}), 3u);
  EXPECT_DOUBLE_EQ(shard_rate(2.5, {1, 2}), 1.25);
}

TEST(Shard, Parse) {
  const auto s = parse_shard("2/3");
  EXPECT_EQ(s.index, 2u);
  EXPECT_EQ(s.count, 3u);
  for (const char* bad : {"0/3", "4/3", "1/0", "1", "a/b", "1/2/3", "/2", "1/"}) {
    EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
  }
}

TEST(StartAt, ParsesUnixSecondsAndRfc3339) {
  using namespace std::chrono;
  const auto at = parse_start_at("@1733050000");
  EXPECT_EQ(duration_cast<seconds>(at.time_since_epoch()).count(), 1733050000);
  EXPECT_EQ(parse_start_at("2024-12-01T10:46:40Z"), at);
  EXPECT_EQ(parse_start_at("2024-12-01T11:46:40+01:00"), at);
  EXPECT_EQ(parse_start_at("2024-12-01T10:46:40.5Z") - at, milliseconds(500));
  EXPECT_EQ(parse_start_at("@1733050000.25") - at, milliseconds(250));
  EXPECT_EQ(format_utc(at), "2024-12-01T10:46:40.000Z");
  for (const char* bad : {"", "@", "@x", "2024-12-01T10:46:40", "2024-13-01T10:46:40Z", "2024-12-01 10:46Z",
                          "tomorrow", "2024-12-01T10:46:40Zjunk"}) {
    EXPECT_THROW(parse_start_at(bad), std::invalid_argument) << bad;
  }
}

TEST(StartAt, RefusesThePastBeyondTolerance) {
  using namespace std::chrono;
  const auto now = parse_start_at("@1733050000");
  EXPECT_EQ(wait_until_start(now + seconds(5), now), seconds(5));
  EXPECT_EQ(wait_until_start(now - milliseconds(500), now), nanoseconds(0));
  try {
    wait_until_start(now - seconds(3), now);
    FAIL() << "a time 3 s ago was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3.000 s in the past"), std::string::npos) << e.what();
  }
  EXPECT_THROW(wait_until_start(now + hours(25), now), std::invalid_argument);
}

}  // namespace

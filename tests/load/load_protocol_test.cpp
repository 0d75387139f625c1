// Tests for ringrpc-load's protocol codecs (tools/load/protocol.hpp) and target parsing.
#include "protocol.hpp"

#include "wire/frame_codec.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace ringrpc::load;
using ringrpc::detail::decode_frame;
using ringrpc::detail::decode_outcome;
using ringrpc::detail::frame_encoder;
using ringrpc::detail::frame_view;
using ringrpc::wire::Kind;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string str(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

request_kind kind_of(std::string method, std::string path = {}) {
  request_kind k;
  k.name = method;
  k.method = std::move(method);
  k.path = std::move(path);
  return k;
}

std::unique_ptr<protocol> make(std::string_view url, codec_options options = {}) {
  return make_protocol(parse_target(url), options);
}

// The codec after `count` requests of `kind`, seqs first_seq, first_seq + 1, ...
std::unique_ptr<connection_codec> with_requests(const protocol& p, const request_kind& kind, int count,
                                                std::uint64_t first_seq = 7) {
  auto c = p.new_connection();
  std::vector<std::byte> sink;
  for (int i = 0; i < count; ++i) c->write_request(sink, first_seq + static_cast<std::uint64_t>(i), kind);
  return c;
}

std::string request_bytes(const protocol& p, const request_kind& kind, std::uint64_t seq = 7) {
  std::vector<std::byte> out;
  p.new_connection()->write_request(out, seq, kind);
  return str(out);
}

// Checks one reply (answering seq 7) whole, at every split point, and followed by a second reply
// answering seq 8: `next` if given (ringrpc names the call in the bytes), else a copy of itself.
void expect_reply(const protocol& p, const request_kind& kind, std::string_view wire, reply_status want,
                  std::string_view want_error = {}, std::string_view next = {}) {
  const auto data = bytes_of(wire);
  auto whole = with_requests(p, kind, 1)->parse_reply(data);
  EXPECT_EQ(whole.status, want) << wire << " / " << whole.error;
  EXPECT_EQ(whole.consumed, data.size()) << wire;
  EXPECT_EQ(whole.seq, 7u);
  if (!want_error.empty()) {
    EXPECT_EQ(whole.error, want_error);
  }

  for (std::size_t cut = 0; cut < data.size(); ++cut) {
    auto c = with_requests(p, kind, 1);
    const auto part = c->parse_reply(std::span(data).first(cut));
    ASSERT_EQ(part.status, reply_status::incomplete) << "cut " << cut << " of " << wire << ": " << part.error;
    ASSERT_EQ(part.consumed, 0u);
    const auto full = c->parse_reply(data);
    ASSERT_EQ(full.status, want) << "cut " << cut;
    ASSERT_EQ(full.consumed, data.size());
  }

  auto two = data;
  const auto second_wire = bytes_of(next.empty() ? wire : next);
  two.insert(two.end(), second_wire.begin(), second_wire.end());
  auto c = with_requests(p, kind, 2);
  const auto first = c->parse_reply(two);
  EXPECT_EQ(first.consumed, data.size());
  EXPECT_EQ(first.seq, 7u);
  const auto second = c->parse_reply(std::span(two).subspan(first.consumed));
  EXPECT_EQ(second.status, want);
  EXPECT_EQ(second.consumed, second_wire.size());
  EXPECT_EQ(second.seq, 8u);
}

reply parse_one(const protocol& p, const request_kind& kind, std::string_view wire) {
  return with_requests(p, kind, 1)->parse_reply(bytes_of(wire));
}

void expect_protocol_error(const protocol& p, const request_kind& kind, std::string_view wire) {
  const auto r = parse_one(p, kind, wire);
  EXPECT_EQ(r.status, reply_status::protocol_error) << "'" << wire << "'";
  EXPECT_EQ(r.consumed, 0u);
  EXPECT_FALSE(r.error.empty());
}

// Random bytes, biased towards each protocol's own alphabet, and mutated valid replies: parsing
// must never crash, never claim bytes it was not given, and never consume on failure.
void fuzz(const protocol& p, const request_kind& kind, const std::vector<std::string>& seeds,
          std::uint32_t rng_seed) {
  std::mt19937 rng(rng_seed);
  const std::string alphabet = "HTTP/1.1 200 OK\r\n:;$*+-_0123456789abcdefxXContent-Length Transfer-Encoding chunked";
  auto codec = with_requests(p, kind, 64);
  int left = 64;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string in;
    const auto mode = rng() % 3;
    if (mode == 0) {
      in.resize(rng() % 200);
      for (auto& ch : in) ch = static_cast<char>(rng());
    } else if (mode == 1) {
      in.resize(rng() % 200);
      for (auto& ch : in) ch = alphabet[rng() % alphabet.size()];
    } else {
      in = seeds[rng() % seeds.size()] + seeds[rng() % seeds.size()];
      for (int flips = static_cast<int>(rng() % 4); flips > 0 && !in.empty(); --flips) {
        in[rng() % in.size()] = static_cast<char>(rng());
      }
      in.resize(rng() % (in.size() + 1));
    }
    const auto data = bytes_of(in);
    std::span<const std::byte> rest(data);
    while (true) {
      const auto r = codec->parse_reply(rest);
      ASSERT_LE(r.consumed, rest.size());
      if (r.status == reply_status::ok || r.status == reply_status::error_reply) {
        ASSERT_GT(r.consumed, 0u);
        rest = rest.subspan(r.consumed);
        if (--left == 0) {
          codec = with_requests(p, kind, 64);
          left = 64;
        }
        continue;
      }
      // A failed parse changes no codec state, so the same codec can take the next input.
      ASSERT_EQ(r.consumed, 0u);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------- targets

TEST(ParseTarget, ValidTargets) {
  // The host is given to the resolver bare: IPv6 literals lose their brackets.
  const struct {
    const char* url;
    const char* host;
    int port;
    const char* path;
  } cases[] = {{"ringrpc://127.0.0.1:7000/echo", "127.0.0.1", 7000, "echo"},
               {"http://example.com", "example.com", 80, "/"},
               {"http://localhost:8080/a/b?x=1", "localhost", 8080, "/a/b?x=1"},
               {"http://[::1]:8080/x", "::1", 8080, "/x"}};
  for (const auto& c : cases) {
    const auto t = parse_target(c.url);
    EXPECT_EQ(t.host, c.host) << c.url;
    EXPECT_EQ(t.port, c.port) << c.url;
    EXPECT_EQ(t.path, c.path) << c.url;
  }
  EXPECT_EQ(parse_target("ringrpc://127.0.0.1:7000/echo").scheme, "ringrpc");

  auto t = parse_target("redis://localhost");
  EXPECT_EQ(t.port, 6379);
  EXPECT_EQ(parse_target("redis://10.0.0.1:6380/").port, 6380);

  t = parse_target("echo://my-host_1.internal:9000");
  EXPECT_EQ(t.scheme, "echo");
  EXPECT_EQ(t.host, "my-host_1.internal");
  EXPECT_EQ(t.port, 9000);

  EXPECT_EQ(parse_target("HTTP://Host:65535").scheme, "http");
  EXPECT_EQ(parse_target("ringrpc://h:1/svc.method").path, "svc.method");

  // IPv6 literals in brackets, as in URLs everywhere.
  t = parse_target("redis://[::ffff:10.0.0.1]");
  EXPECT_EQ(t.port, 6379);
  EXPECT_EQ(parse_target("ringrpc://[2001:db8::7]:7000/echo").host, "2001:db8::7");
}

// -H: each header once in every request; a Host of the user's replaces ours; Connection and
// Content-Length stay ours, since pipelining and the body depend on them.
TEST(HttpHeaders, AddedToEveryRequestAndHostReplaced) {
  codec_options o;
  o.host_header = "[::1]:8080";
  o.headers = {"X-Trace: abc", "Authorization:  Bearer t0k "};
  const auto p = make("http://[::1]:8080/p", o);
  const std::string req = request_bytes(*p, kind_of("GET", "/p"));
  EXPECT_NE(req.find("Host: [::1]:8080\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nX-Trace: abc\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nAuthorization: Bearer t0k\r\n"), std::string::npos) << req;
  EXPECT_TRUE(req.ends_with("\r\n\r\n")) << req;

  o.headers = {"host: example.org"};
  const std::string host_req = request_bytes(*make("http://h:1/", o), kind_of("GET", "/"));
  EXPECT_NE(host_req.find("Host: example.org\r\n"), std::string::npos) << host_req;
  EXPECT_EQ(host_req.find("[::1]"), std::string::npos) << host_req;
  EXPECT_EQ(host_req.find("host:"), std::string::npos) << "two Host headers: " << host_req;

  for (const char* bad : {"NoColon", ": empty name", "Bad Name: x", "X: a\r\nInjected: 1", "Connection: close",
                          "content-length: 5"}) {
    o.headers = {bad};
    EXPECT_THROW(make("http://h:1/", o), std::invalid_argument) << bad;
  }
}

TEST(ParseTarget, InvalidTargetsNameTheUrlAndTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected SCHEME://"},
      {"localhost:80", "expected SCHEME://"},
      {"ftp://h:1", "unknown scheme 'ftp'"},
      {"ringrpc://h:1", "missing method"},
      {"ringrpc://h:1/", "missing method"},
      {"ringrpc://h/echo", "need a port"},
      {"echo://h", "need a port"},
      {"http://:80/", "missing host"},
      {"http://h:0/", "not in 1..65535"},
      {"http://h:65536/", "not in 1..65535"},
      {"http://h:/", "not a number"},
      {"http://h:8x/", "not a number"},
      {"http://256.1.1.1/", "not a valid IPv4"},
      {"http://1.2.3/", "not a valid IPv4"},
      {"http://::1:80/", "brackets"},
      {"http://[::1:80/", "without ']'"},
      {"http://[zz::1]:80/", "not an IPv6 address"},
      {"http://[::1]x/", "':PORT' after ']'"},
      {"http://a..b/", "empty label"},
      {"http://a$b/", "contains '$'"},
      {"http://u@h/", "user info"},
      {"http://h/a b", "spaces"},
      {"http://h/a#frag", "fragment"},
      {"redis://h:1/x", "take no path"},
  };
  for (const auto& [url, why] : cases) {
    try {
      parse_target(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + url + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg;
    }
  }
}

TEST(MakeProtocol, RejectsBadSchemesAndOptions) {
  target t;
  t.scheme = "gopher";
  EXPECT_THROW(make_protocol(t, {}), std::invalid_argument);
  codec_options o;
  o.key_space = 0;
  EXPECT_THROW(make("redis://h", o), std::invalid_argument);
  EXPECT_THROW(make("echo://h:1", {}), std::invalid_argument);  // empty payload
  o = {};
  o.max_reply_bytes = 0;
  EXPECT_THROW(make("http://h", o), std::invalid_argument);
}

TEST(MakeProtocol, DefaultKinds) {
  codec_options o;
  o.payload = bytes_of("x");
  EXPECT_EQ(make("ringrpc://h:1/echo")->default_kinds().at(0).method, "echo");
  EXPECT_EQ(make("redis://h")->default_kinds().at(0).method, "PING");
  EXPECT_EQ(make("http://h/p")->default_kinds().at(0).path, "/p");
  EXPECT_EQ(make("echo://h:1", o)->default_kinds().size(), 1u);
}

// ---------------------------------------------------------------------------------- ringrpc

frame_view decode_copy(std::span<const std::byte> frame, std::vector<std::uint64_t>& storage) {
  storage.assign(frame.size() / 8 + 1, 0);
  std::memcpy(storage.data(), frame.data(), frame.size());
  frame_view v;
  EXPECT_EQ(decode_frame({reinterpret_cast<const std::byte*>(storage.data()), frame.size()}, v),
            decode_outcome::ok);
  return v;
}

std::string ringrpc_frame(std::uint64_t call_id, Kind kind, ringrpc::status code = ringrpc::status::ok,
                          std::string_view message = {}, std::string_view payload = {}) {
  frame_view f;
  f.call_id = call_id;
  f.kind = kind;
  f.code = code;
  f.message = message;
  f.payload = {reinterpret_cast<const std::byte*>(payload.data()), payload.size()};
  frame_encoder enc;
  return str(enc.encode(f));
}

TEST(RingrpcCodec, RequestIsAFrameWithSeqMethodPayloadAndDeadline) {
  codec_options o;
  o.payload = bytes_of("hello");
  o.timeout_us = 2500;
  auto p = make("ringrpc://h:1/echo", o);
  const auto kind = kind_of("sleep");
  std::vector<std::byte> out;
  auto c = p->new_connection();
  c->write_request(out, 0, kind);
  const auto first = out.size();
  c->write_request(out, 41, kind);

  std::vector<std::uint64_t> storage;
  auto v = decode_copy(std::span(out).first(first), storage);
  EXPECT_EQ(v.kind, Kind::Request);
  EXPECT_EQ(v.call_id, 1u);  // seq + 1: call id 0 is reserved for connection-level errors
  EXPECT_EQ(v.method, "sleep");
  EXPECT_EQ(v.timeout_us, 2500u);
  EXPECT_EQ(str(v.payload), "hello");
  v = decode_copy(std::span(out).subspan(first), storage);
  EXPECT_EQ(v.call_id, 42u);
}

// -H and RINGRPC_TOKEN (bearer_token) become the metadata of every call: what a server with
// bearer tokens needs (docs/security.md).
TEST(RingrpcCodec, HeadersAndTokenAreCallMetadata) {
  auto metadata_of = [](const codec_options& o) {
    auto p = make("ringrpc://h:1/echo", o);
    std::vector<std::byte> out;
    auto c = p->new_connection();
    c->write_request(out, 0, kind_of("echo"));
    c->write_request(out, 1, kind_of("echo"));  // every call, not the first only
    std::vector<std::uint64_t> storage;
    const auto first = decode_copy(std::span(out).first(out.size() / 2), storage);
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto item : ringrpc::metadata_view(first.metadata)) {
      pairs.emplace_back(std::string(item.key), std::string(item.value));
    }
    const auto second = decode_copy(std::span(out).subspan(out.size() / 2), storage);
    EXPECT_EQ(ringrpc::metadata_view(second.metadata).size(), pairs.size());
    return pairs;
  };
  using pairs = std::vector<std::pair<std::string, std::string>>;
  codec_options o;
  EXPECT_EQ(metadata_of(o), pairs{});
  o.headers = {"Authorization: Bearer abc.def", "x-tenant=blue: green"};
  o.bearer_token = "from-the-environment";  // -H's authorization wins
  EXPECT_EQ(metadata_of(o), (pairs{{"authorization", "Bearer abc.def"}, {"x-tenant", "blue: green"}}));
  o.headers.clear();
  EXPECT_EQ(metadata_of(o), (pairs{{"authorization", "Bearer from-the-environment"}}));

  o.bearer_token = "no spaces";
  EXPECT_THROW(make("ringrpc://h:1/echo", o), std::invalid_argument);
  o.bearer_token.clear();
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"no separator"}, {": empty key"}, {"bad key: 1"}, {"a: 1", "A: 2"}}) {
    o.headers = bad;
    EXPECT_THROW(make("ringrpc://h:1/echo", o), std::invalid_argument) << bad.front();
  }
  o.headers = {"big: " + std::string(9000, 'v')};  // past the 8 KiB a server takes by default
  EXPECT_THROW(make("ringrpc://h:1/echo", o), std::invalid_argument);
}

TEST(RingrpcCodec, RepliesAndErrorsMatchedByCallIdOutOfOrder) {
  auto p = make("ringrpc://h:1/echo");
  const auto kind = kind_of("echo");
  // expect_reply assumes seq 7 then 8 in order; ringrpc ids are seq + 1.
  expect_reply(*p, kind, ringrpc_frame(8, Kind::Reply, ringrpc::status::ok, {}, "pong"), reply_status::ok, {},
               ringrpc_frame(9, Kind::Reply, ringrpc::status::ok, {}, "pong"));

  const auto busy = ringrpc_frame(8, Kind::Error, ringrpc::status::server_busy, "queue full");
  const auto r = parse_one(*p, kind, busy);
  EXPECT_EQ(r.status, reply_status::error_reply);
  EXPECT_EQ(r.error, "server_busy");
  EXPECT_EQ(r.consumed, busy.size());
  EXPECT_EQ(parse_one(*p, kind, ringrpc_frame(8, Kind::Error, ringrpc::status::deadline_exceeded)).error,
            "deadline_exceeded");

  const auto wire = bytes_of(ringrpc_frame(10, Kind::Reply) + ringrpc_frame(3, Kind::Reply));
  auto c = with_requests(*p, kind, 10, 0);
  const auto a = c->parse_reply(wire);
  EXPECT_EQ(a.status, reply_status::ok);
  EXPECT_EQ(a.seq, 9u);
  const auto b = c->parse_reply(std::span(wire).subspan(a.consumed));
  EXPECT_EQ(b.seq, 2u);
  EXPECT_EQ(a.consumed + b.consumed, wire.size());
}

TEST(RingrpcCodec, VerifyEchoCountsAReplyThatIsNotTheRequestsBytes) {
  codec_options o;
  o.payload = bytes_of("hello");
  o.verify_echo = true;
  auto p = make("ringrpc://h:1/echo", o);
  const auto kind = kind_of("echo");
  EXPECT_EQ(parse_one(*p, kind, ringrpc_frame(8, Kind::Reply, ringrpc::status::ok, {}, "hello")).status,
            reply_status::ok);
  for (const char* wrong : {"hellO", "hell", "hello!", ""}) {
    const auto r = parse_one(*p, kind, ringrpc_frame(8, Kind::Reply, ringrpc::status::ok, {}, wrong));
    EXPECT_EQ(r.status, reply_status::error_reply) << wrong;
    EXPECT_EQ(r.error, "payload_mismatch") << wrong;
  }
  o.verify_echo = false;  // without --verify the bytes are not looked at
  EXPECT_EQ(parse_one(*make("ringrpc://h:1/echo", o), kind, ringrpc_frame(8, Kind::Reply, ringrpc::status::ok, {}, "x")).status,
            reply_status::ok);
}

TEST(RingrpcCodec, ConnectionLevelErrorsOversizeAndGarbage) {
  codec_options o;
  o.max_reply_bytes = 1024;
  auto p = make("ringrpc://h:1/echo", o);
  const auto kind = kind_of("echo");
  const auto r = parse_one(*p, kind, ringrpc_frame(0, Kind::Error, ringrpc::status::frame_too_large, "too big"));
  EXPECT_EQ(r.status, reply_status::protocol_error);
  EXPECT_NE(r.error.find("too big"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("frame_too_large"), std::string::npos) << r.error;

  expect_protocol_error(*p, kind, std::string("\xff\xff\xff\x7f", 4));  // only the prefix
  expect_protocol_error(*p, kind, std::string("\xfd\x03\x00\x00", 4));  // 1021 + 4 > 1024
  expect_protocol_error(*p, kind, std::string("\x08\x00\x00\x00garbage!", 12));
  // Over --max-body: a frame that looks like ringrpc's is counted as reply_too_large; another
  // protocol's bytes read as a huge length are left to the diagnosis of what the server speaks.
  EXPECT_EQ(parse_one(*p, kind, std::string("\x00\x10\x00\x00\x10\x00\x00\x00", 8)).lost_as, "reply_too_large");
  EXPECT_EQ(parse_one(*p, kind, "HTTP/1.1 400 Bad Request\r\n").lost_as, "");
  expect_protocol_error(*p, kind, ringrpc_frame(8, Kind::Pong));
  EXPECT_EQ(parse_one(*p, kind, std::string("\x08\x00", 2)).status, reply_status::incomplete);

  fuzz(*p, kind, {ringrpc_frame(8, Kind::Reply, ringrpc::status::ok, {}, "abc"),
                  ringrpc_frame(9, Kind::Error, ringrpc::status::internal, "boom")}, 1);
}

// ---------------------------------------------------------------------------------- echo

TEST(EchoCodec, SendsThePayloadAndExpectsItBack) {
  codec_options o;
  o.payload = bytes_of("0123456789");
  auto p = make("echo://h:7", o);
  const auto kind = kind_of("");
  EXPECT_EQ(request_bytes(*p, kind), "0123456789");
  expect_reply(*p, kind, "0123456789", reply_status::ok);

  auto r = parse_one(*p, kind, "0123X");  // wrong before the reply is even complete
  EXPECT_EQ(r.status, reply_status::protocol_error);
  EXPECT_EQ(r.error, "echo mismatch");
  expect_protocol_error(*p, kind, "012345678Z");
  EXPECT_EQ(p->new_connection()->parse_reply(bytes_of("0")).status, reply_status::protocol_error);
  fuzz(*p, kind, {"0123456789"}, 2);
}

// ---------------------------------------------------------------------------------- redis

TEST(RedisCodec, RequestBytes) {
  codec_options o;
  o.payload = bytes_of("abc");
  auto p = make("redis://h", o);
  EXPECT_EQ(request_bytes(*p, kind_of("PING")), "*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(request_bytes(*p, kind_of("SET"), 123457), "*3\r\n$3\r\nSET\r\n$9\r\nkey:23457\r\n$3\r\nabc\r\n");
  EXPECT_EQ(request_bytes(*p, kind_of("get"), 5), "*2\r\n$3\r\nGET\r\n$5\r\nkey:5\r\n");
  EXPECT_EQ(request_bytes(*p, kind_of("DBSIZE")), "*1\r\n$6\r\nDBSIZE\r\n");
}

TEST(RedisCodec, ParsesEveryReplyType) {
  auto p = make("redis://h");
  expect_reply(*p, kind_of("PING"), "+PONG\r\n", reply_status::ok);
  const auto get = kind_of("GET");
  expect_reply(*p, kind_of("SET"), "+OK\r\n", reply_status::ok);
  expect_reply(*p, get, "$5\r\nhel\ro\r\n", reply_status::ok);
  expect_reply(*p, get, "$0\r\n\r\n", reply_status::ok);
  expect_reply(*p, get, "$-1\r\n", reply_status::ok);
  expect_reply(*p, get, ":-42\r\n", reply_status::ok);
  expect_reply(*p, get, "*3\r\n$1\r\na\r\n*2\r\n:1\r\n-ERR in\r\n*-1\r\n", reply_status::ok);
  expect_reply(*p, get, "*0\r\n", reply_status::ok);
  expect_reply(*p, get, "-ERR wrong type\r\n", reply_status::error_reply, "resp_err");
  expect_reply(*p, kind_of("PING"), "-NOAUTH auth\r\n", reply_status::error_reply, "resp_err");

  std::string deep;
  for (int i = 0; i < 16; ++i) deep += "*1\r\n";
  expect_reply(*p, get, deep + ":1\r\n", reply_status::ok);
  expect_protocol_error(*p, get, "*1\r\n" + deep + ":1\r\n");
}

TEST(RedisCodec, MalformedAndOversizedReplies) {
  codec_options o;
  o.max_reply_bytes = 4096;
  auto p = make("redis://h", o);
  const auto get = kind_of("GET");
  for (const std::string_view bad : {"?x\r\n", "$abc\r\n", "$-2\r\n", "+OK\rX", "+OK\n", "$3\r\nabcXY",
                                     ":12a\r\n", ":\r\n", "*x\r\n", "*-3\r\n", "_\r\n", "$99999999999999999999\r\n"}) {
    expect_protocol_error(*p, get, bad);
  }
  expect_protocol_error(*p, get, "$5000\r\n");       // no data needed to refuse it
  expect_protocol_error(*p, get, "*99999999\r\n");  // element count bound
  expect_protocol_error(*p, get, "+" + std::string(5000, 'a'));
  expect_protocol_error(*p, kind_of("PING"), "+OK\r\n");
  EXPECT_EQ(p->new_connection()->parse_reply(bytes_of("+OK\r\n")).status, reply_status::protocol_error);
  fuzz(*p, get, {"+OK\r\n", "$3\r\nabc\r\n", "*2\r\n:1\r\n$-1\r\n", "-ERR x\r\n"}, 3);
}

// ---------------------------------------------------------------------------------- http

TEST(HttpCodec, RequestBytes) {
  codec_options o;
  o.payload = bytes_of("hi");
  auto p = make("http://example.com:8080/base", o);
  EXPECT_EQ(request_bytes(*p, kind_of("")),
            "GET /base HTTP/1.1\r\nHost: example.com:8080\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(request_bytes(*p, kind_of("POST", "/submit")),
            "POST /submit HTTP/1.1\r\nHost: example.com:8080\r\nConnection: keep-alive\r\n"
            "Content-Length: 2\r\n\r\nhi");
  o.host_header = "virtual.test";
  EXPECT_EQ(request_bytes(*make("http://10.1.2.3", o), kind_of("GET", "x")),
            "GET /x HTTP/1.1\r\nHost: virtual.test\r\nConnection: keep-alive\r\n\r\n");
}

TEST(HttpCodec, ParsesResponses) {
  auto p = make("http://h");
  const auto get = kind_of("GET");
  expect_reply(*p, get, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", reply_status::ok);
  expect_reply(*p, get, "HTTP/1.1 200\r\nserver: x\r\ncontent-LENGTH:0\r\n\r\n", reply_status::ok);
  expect_reply(*p, get, "HTTP/1.0 301 Moved Permanently\nContent-Length: 0\n\n", reply_status::ok);
  expect_reply(*p, get,
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n5\r\nhello\r\n"
               "1A;name=val\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: y\r\n\r\n",
               reply_status::ok);
  expect_reply(*p, get, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", reply_status::ok);
  expect_reply(*p, get, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
               reply_status::ok);
  expect_reply(*p, get, "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy", reply_status::error_reply, "http_503");
  expect_reply(*p, get, "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               reply_status::error_reply, "http_404");
  expect_reply(*p, kind_of("HEAD"), "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", reply_status::ok);
}

// A connection remembers its last header section (the next reply usually repeats it); a reply
// that repeats only part of it, or differs in a byte, must still be parsed for itself.
TEST(HttpCodec, RepeatedHeaderSectionsAreReadAsTheyAre) {
  auto p = make("http://h");
  const auto get = kind_of("GET");
  auto c = with_requests(*p, get, 6);
  const std::string head = "HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 5\r\n\r\n";
  auto next = [&](const std::string& wire) { return c->parse_reply(bytes_of(wire)); };
  EXPECT_EQ(next(head + "hello").consumed, head.size() + 5);
  EXPECT_EQ(next(head + "world").consumed, head.size() + 5);
  // One digit of the length differs: the length read is the new one.
  const std::string three = "HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 3\r\n\r\n";
  EXPECT_EQ(next(three + "abc").consumed, three.size() + 3);
  // The same lines and one more: the section is longer, and Connection: close is seen.
  const std::string closing = "HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\n";
  const auto r = next(closing + "abc");
  EXPECT_EQ(r.consumed, closing.size() + 3);
  EXPECT_TRUE(r.close_after);
  // Back to the first section: remembered or not, it says keep-alive and 5 bytes.
  const auto again = next(head + "hello");
  EXPECT_EQ(again.consumed, head.size() + 5);
  EXPECT_FALSE(again.close_after);
  // A status that differs after a repeated prefix is an error reply, not a copy of the last.
  const auto busy = next("HTTP/1.1 503 OK\r\nServer: t\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(busy.status, reply_status::error_reply);
  EXPECT_EQ(busy.error, "http_503");
}

TEST(HttpCodec, PlainRequestAtATlsPortIsRecognised) {
  auto p = make("http://h:1/");
  const auto kind = kind_of("GET", "/");
  const std::string body = "<html><center>The plain HTTP request was sent to HTTPS port</center></html>";
  const auto r = parse_one(*p, kind, "HTTP/1.1 400 Bad Request\r\nContent-Length: " + std::to_string(body.size()) +
                                         "\r\n\r\n" + body);
  EXPECT_EQ(r.status, reply_status::error_reply);
  EXPECT_EQ(r.error, "http_400");
  EXPECT_TRUE(r.tls_port);
  EXPECT_FALSE(parse_one(*p, kind, "HTTP/1.1 400 Bad Request\r\nContent-Length: 3\r\n\r\nbad").tls_port);
}

TEST(HttpCodec, MalformedAndOversizedResponses) {
  codec_options o;
  o.max_reply_bytes = 4096;
  auto p = make("http://h", o);
  const auto get = kind_of("GET");
  for (const std::string_view bad : {
           "GARBAGE", "HTTP/2 200 OK\r\n", "HTTP/1.1 2x0 OK\r\n", "HTTP/1.1 200OK\r\n", "HTTP/1.1 099 x\r\n",
           "HTTP/1.1 200 OK\r\n\r\n",  // no length: would need read-until-close
           "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
           "HTTP/1.1 200 OK\r\n folded\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
           "HTTP/1.1 200 OK\r\nbad\rheader: 1\r\n\r\n", "HTTP/1.1 101 Switching\r\n\r\n"}) {
    expect_protocol_error(*p, get, bad);
  }
  // Refused from the claim alone, without the bytes.
  expect_protocol_error(*p, get, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n");
  expect_protocol_error(*p, get, "HTTP/1.1 200 OK\r\nContent-Length: 4097\r\n\r\n");
  expect_protocol_error(*p, get, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n");
  expect_protocol_error(*p, get, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n");
  expect_protocol_error(*p, get, "HTTP/1.1 200 OK\r\nX-Big: " + std::string(70 * 1024, 'a'));
  // The limit's failures are named, so that the calls count as reply_too_large; bad bytes are not.
  EXPECT_EQ(parse_one(*p, get, "HTTP/1.1 200 OK\r\nContent-Length: 4097\r\n\r\n").lost_as, "reply_too_large");
  EXPECT_EQ(parse_one(*p, get, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n").lost_as,
            "reply_too_large");
  EXPECT_EQ(parse_one(*p, get, "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n").lost_as, "");
  std::string many_chunks = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4096; ++i) many_chunks += "1\r\nx\r\n";
  expect_protocol_error(*p, get, many_chunks);
  EXPECT_EQ(p->new_connection()->parse_reply(bytes_of("HTTP/1.1")).status, reply_status::protocol_error);
  fuzz(*p, get, {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
                 "HTTP/1.1 500 E\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"}, 4);
}

}  // namespace

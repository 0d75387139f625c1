// gRPC C++ (libgrpc++'s generic stub over grpc::ByteBuffer: no protoc step) against an
// in-process ringrpc server on its one plaintext port (docs/grpc.md): raw methods by "/name",
// typed methods (ringrpc-gen's code for gen_test.fbs) by "/Service/Method", metadata both ways,
// deadlines, cancellation, error statuses and messages, bearer tokens, the built-in health
// check, server_options::grpc off, and ringrpc::client on the same port. Every wait is bounded;
// nothing here asserts speed.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/service.hpp"
#include "../test_support.hpp"

#if defined(RINGRPC_TEST_TSAN)
// Debian's libgrpc, libgpr and abseil are not built with ThreadSanitizer: their own locks and
// atomics are invisible to it, while the interceptors they call (epoll, memcpy, free, ...) are
// not, so TSan reports races between gRPC's threads that its own synchronization orders (as
// tests/tsan.supp explains for libcrypto). These match only stacks through those libraries;
// ringrpc's threads (the server's, the ringrpc client's) never run in them.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n"
         "race:libupb.so\n"
         "race:libcares.so\n";
}
#endif

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

// --- the gRPC side -----------------------------------------------------------------------------

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// One finished gRPC call: its status, and the response message's bytes.
struct grpc_result {
  ::grpc::Status status;
  std::string body;
  ::grpc::StatusCode code() const { return status.error_code(); }
  bool ok() const { return status.ok(); }
  std::string describe() const {
    return "grpc code " + std::to_string(static_cast<int>(status.error_code())) + " '" + status.error_message() + "'";
  }
};

/// A channel of its own (no subchannel shared with other tests) to 127.0.0.1:port, without
/// gRPC's transparent retries, so each status seen is the one the server gave.
std::shared_ptr<::grpc::Channel> channel_to(std::uint16_t port) {
  ::grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(16 << 20);
  return ::grpc::CreateCustomChannel("ipv4:127.0.0.1:" + std::to_string(port), ::grpc::InsecureChannelCredentials(),
                                     args);
}

/// Calls `path` with `request` as the one message, on `ctx` (whose deadline the caller may have
/// set; 20 s from now when it has none, so every call ends). Blocks this thread until gRPC
/// reports the end of the call.
grpc_result unary(::grpc::GenericStub& stub, ::grpc::ClientContext& ctx, const std::string& path,
                  std::string_view request) {
  if (ctx.deadline() == std::chrono::system_clock::time_point::max()) {
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  }
  ::grpc::Slice slice(request.data(), request.size());
  ::grpc::ByteBuffer req(&slice, 1);
  ::grpc::ByteBuffer resp;
  // Shared with gRPC's thread, which may still be inside set_value when get() returns here.
  auto done = std::make_shared<std::promise<::grpc::Status>>();
  auto finished = done->get_future();
  stub.UnaryCall(&ctx, path, ::grpc::StubOptions(), &req, &resp,
                 [done](::grpc::Status s) { done->set_value(std::move(s)); });
  // The deadline ends the call on gRPC's side; this only keeps a broken client from hanging
  // the test past it.
  if (finished.wait_for(60s) != std::future_status::ready) {
    ctx.TryCancel();
    finished.wait();
  }
  grpc_result out{finished.get(), {}};
  if (out.status.ok()) {
    std::vector<::grpc::Slice> slices;
    if (resp.Valid() && resp.Dump(&slices).ok()) {
      for (const auto& s : slices) out.body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return out;
}

grpc_result unary(::grpc::GenericStub& stub, const std::string& path, std::string_view request) {
  ::grpc::ClientContext ctx;
  return unary(stub, ctx, path, request);
}

/// The value of `key` in gRPC metadata (the first one), nullopt when absent.
std::optional<std::string> find_md(const std::multimap<::grpc::string_ref, ::grpc::string_ref>& md,
                                   std::string_view key) {
  const auto it = md.find(::grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

/// n bytes of a fixed pseudo-random pattern (every byte value occurs).
std::string pattern_bytes(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& ch : s) {
    x = x * 1664525u + 1013904223u;
    ch = static_cast<char>(x >> 24);
  }
  return s;
}

// --- the ringrpc side --------------------------------------------------------------------------

/// How a running handler's wait ended (patient below).
enum cut : int { not_yet = 0, by_cancel = 1, by_deadline = 2, never_cut = 3 };

/// What the handlers saw, for the test to check (atomics, or under the mutex).
struct observed {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> metadata;  // the last probe's
  std::string method_seen;                                   // the last shop call's method()
  std::atomic<int> probe_calls{0};
  std::atomic<int> who_calls{0};
  std::atomic<int> echo_calls{0};
  std::atomic<int> patient_started{0};
  std::atomic<int> patient_cut{not_yet};
  std::atomic<bool> patient_had_deadline{false};
  std::atomic<std::int64_t> patient_first_remaining_ms{-1};
};

/// The typed service of gen_test.fbs: Echo returns its fields and a call count, Fail fails with
/// the status it is asked for.
class typed_impl final : public TestService::service {
 public:
  std::atomic<std::uint64_t> calls{0};
  result<EchoReply> Echo(call_context&, const EchoRequest& req) override {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<double> values;
    if (req.values()) values.assign(req.values()->begin(), req.values()->end());
    return {fbb, CreateEchoReplyDirect(fbb, req.text() ? req.text()->c_str() : nullptr, req.number(), req.point(),
                                       req.color(), req.values() ? &values : nullptr, ++calls)};
  }
  result<EchoReply> Fail(call_context&, const FailRequest& req) override {
    ++calls;
    return rpc_error(static_cast<status>(req.code()), req.message() ? req.message()->str() : std::string());
  }
};

/// An endpoint of its own: calls to "shop" and "shop.<anything>" reach it (the dispatcher's
/// "name" / "name.method" rule); it answers with the method it was called as.
class shop_endpoint final : public endpoint {
 public:
  explicit shop_endpoint(observed& seen) : _seen(seen) {}
  void receive_and_reply(call_context& c) override {
    {
      std::lock_guard lock(_seen.mu);
      _seen.method_seen = std::string(c.method());
    }
    c.reply("shop saw " + std::string(c.method()) + ": " + text_of(c.payload()));
  }

 private:
  observed& _seen;
};

/// A started server with the test's methods, and a gRPC channel and generic stub to it.
struct served {
  explicit served(server_options o = {}) {
    o.readers = 1;
    o.handlers = 4;  // patient calls hold one each while other calls go on
    srv = std::make_unique<server>(o);
    srv->add_method("echo", [this](call_context& c) {
      ++seen.echo_calls;
      c.reply(c.payload());
    });
    // Echo after a short pause that depends on the payload, so replies overtake each other.
    srv->add_method("jitter", [](call_context& c) {
      const auto p = c.payload();
      std::this_thread::sleep_for(std::chrono::microseconds(p.empty() ? 0 : 300 * (static_cast<unsigned>(p[0]) % 4)));
      c.reply(p);
    });
    // Records the request metadata; answers with headers (one binary) and trailers (one binary).
    srv->add_method("probe", [this](call_context& c) {
      {
        std::lock_guard lock(seen.mu);
        seen.metadata.clear();
        for (const metadata_item m : c.metadata()) seen.metadata.emplace_back(std::string(m.key), std::string(m.value));
      }
      const bool added = c.add_header("srv-note", "from the handler") &&
                         c.add_header("srv-blob-bin", std::string("\x00\x01\xfe\xff", 4)) &&
                         c.add_trailer("srv-cost", "7") &&
                         c.add_trailer("srv-digest-bin", std::string("\xde\xad\x00\xbe\xef", 5));
      ++seen.probe_calls;
      if (!added) return c.fail(status::internal, "add_header/add_trailer refused a pair");
      c.reply("probed");
    });
    // Waits in 1 ms slices until the call is cancelled or its deadline passes (30 s at most,
    // so a broken cut cannot hold a handler thread past the test), and says which came first.
    srv->add_method("patient", [this](call_context& c) {
      seen.patient_had_deadline = c.has_deadline();
      seen.patient_first_remaining_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(c.remaining()).count();
      ++seen.patient_started;
      const auto give_up = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < give_up) {
        if (c.cancelled()) {
          seen.patient_cut = by_cancel;
          return c.fail(status::cancelled, "patient: cancelled");
        }
        if (c.remaining() <= std::chrono::nanoseconds::zero()) {
          seen.patient_cut = by_deadline;
          return c.fail(status::deadline_exceeded, "patient: deadline passed");
        }
        std::this_thread::sleep_for(1ms);
      }
      seen.patient_cut = never_cut;
      c.reply("waited it all out");
    });
    srv->add_method("missing", [](call_context& c) { c.fail(status::not_found, "no such thing"); });
    // An error whose message needs percent-encoding, with a header and a trailer.
    srv->add_method("refuse", [](call_context& c) {
      c.add_header("srv-hint", "later");
      c.add_trailer("srv-why", "quota");
      c.fail(status::resource_exhausted, "100% used: caf\xc3\xa9 \"closed\"\nsee you");
    });
    // A reply of the decimal byte count the payload asks for, with a header and a trailer: the
    // trailers must follow a body that spans many DATA frames and flow-control windows.
    srv->add_method("bulk", [](call_context& c) {
      const std::size_t n = std::stoul(text_of(c.payload()));
      c.add_header("srv-size", std::to_string(n));
      c.add_trailer("srv-last", "done");
      c.reply(pattern_bytes(n, 3));
    });
    // The bearer token's subject, or "(none)".
    srv->add_method("who", [this](call_context& c) {
      ++seen.who_calls;
      const peer_identity* p = c.peer();
      c.reply(p != nullptr && !p->token_subject.empty() ? p->token_subject : std::string("(none)"));
    });
    srv->register_endpoint("shop", std::make_shared<shop_endpoint>(seen));
    register_service(*srv, typed);
    srv->start();
    channel = channel_to(srv->port());
    stub = std::make_unique<::grpc::GenericStub>(channel);
  }

  ~served() {
    // The channel and its calls go before the server: nothing of gRPC's waits on a stopped port.
    stub.reset();
    channel.reset();
    srv.reset();
  }

  grpc_result call(const std::string& path, std::string_view request) { return unary(*stub, path, request); }
  grpc_result call(::grpc::ClientContext& ctx, const std::string& path, std::string_view request) {
    return unary(*stub, ctx, path, request);
  }
  client ringrpc_client() {
    client_options co;
    co.default_timeout = 20s;
    return client::connect("127.0.0.1", srv->port(), co);
  }
  std::uint64_t counter(server_counter which) const { return srv->stats()[which]; }

  observed seen;
  std::shared_ptr<typed_impl> typed = std::make_shared<typed_impl>();
  std::unique_ptr<server> srv;
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<::grpc::GenericStub> stub;
};

// --- 1. raw methods ----------------------------------------------------------------------------

TEST(grpc_client, raw_method_echoes_small_empty_binary_and_300_kib_payloads) {
  served s;
  auto r = s.call("/echo", "hello over gRPC");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "hello over gRPC");

  r = s.call("/echo", "");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "");

  const std::string binary("\x00\x01\x02\xff\x00\x80 tail", 12);
  r = s.call("/echo", binary);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, binary);

  // Larger than HTTP/2's default 64 KiB windows and 16 KiB frames: many DATA frames both ways.
  const std::string big = pattern_bytes(300 * 1024, 7);
  r = s.call("/echo", big);
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(r.body.size(), big.size());
  EXPECT_TRUE(r.body == big) << "the 300 KiB payload came back altered";

  // The connection serves on after the large call.
  r = s.call("/echo", "after");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "after");
  EXPECT_EQ(s.seen.echo_calls.load(), 5);
  EXPECT_GE(s.counter(server_counter::grpc_connections), 1u);
}

TEST(grpc_client, concurrent_calls_on_one_channel_each_get_their_own_reply) {
  served s;
  constexpr int threads = 4;
  constexpr int per_thread = ringrpc::test::sanitized ? 10 : 25;
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto size = 1 + static_cast<std::size_t>((t * 131 + i * 17) % 3000);
        const std::string payload = pattern_bytes(size, static_cast<unsigned>(t * 1000 + i));
        const auto r = s.call("/jitter", payload);
        if (!r.ok()) ++failed;
        else if (r.body != payload) ++wrong;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

// --- 2. typed methods by /Service/Method -------------------------------------------------------

TEST(grpc_client, typed_method_by_service_and_method_path_takes_and_returns_flatbuffers) {
  served s;
  flatbuffers::FlatBufferBuilder fbb;
  const Point point(1.5, -2.25);
  const std::vector<double> values{0.5, 1e300, -3.0};
  fbb.Finish(CreateEchoRequestDirect(fbb, "typed over gRPC", -1234567890123LL, &point, Color_Blue, &values));
  const std::string request(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());

  auto r = s.call("/TestService/Echo", request);
  ASSERT_TRUE(r.ok()) << r.describe();
  // Copied to 8-byte-aligned storage: Point holds doubles.
  std::vector<std::uint64_t> aligned((r.body.size() + 7) / 8);
  std::memcpy(aligned.data(), r.body.data(), r.body.size());
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(aligned.data());
  flatbuffers::Verifier verifier(bytes, r.body.size());
  ASSERT_TRUE(verifier.VerifyBuffer<EchoReply>(nullptr)) << "the reply is not an EchoReply FlatBuffer";
  const EchoReply* reply = flatbuffers::GetRoot<EchoReply>(bytes);
  ASSERT_NE(reply->text(), nullptr);
  EXPECT_EQ(reply->text()->str(), "typed over gRPC");
  EXPECT_EQ(reply->number(), -1234567890123LL);
  ASSERT_NE(reply->point(), nullptr);
  EXPECT_EQ(reply->point()->x(), 1.5);
  EXPECT_EQ(reply->point()->y(), -2.25);
  EXPECT_EQ(reply->color(), Color_Blue);
  ASSERT_NE(reply->values(), nullptr);
  EXPECT_EQ(std::vector<double>(reply->values()->begin(), reply->values()->end()), values);
  EXPECT_EQ(reply->calls(), 1u);
  EXPECT_EQ(s.typed->calls.load(), 1u);

  // A typed error: the status and message the method returned.
  flatbuffers::FlatBufferBuilder fail;
  const auto code = static_cast<std::uint16_t>(status::already_exists);
  fail.Finish(CreateFailRequestDirect(fail, code, "typed: it is there", 0));
  r = s.call("/TestService/Fail",
             std::string_view(reinterpret_cast<const char*>(fail.GetBufferPointer()), fail.GetSize()));
  EXPECT_EQ(r.code(), ::grpc::StatusCode::ALREADY_EXISTS) << r.describe();
  EXPECT_EQ(r.status.error_message(), "typed: it is there");

  // Bytes that are no EchoRequest are refused before the method runs: INVALID_ARGUMENT.
  r = s.call("/TestService/Echo", "this is not a flatbuffer");
  EXPECT_EQ(r.code(), ::grpc::StatusCode::INVALID_ARGUMENT) << r.describe();
  // A method the implementation does not override, and one the service does not have.
  flatbuffers::FlatBufferBuilder empty;
  empty.Finish(CreateEmpty(empty));
  r = s.call("/TestService/Unimplemented",
             std::string_view(reinterpret_cast<const char*>(empty.GetBufferPointer()), empty.GetSize()));
  EXPECT_EQ(r.code(), ::grpc::StatusCode::UNIMPLEMENTED) << r.describe();
  r = s.call("/TestService/NoSuchMethod", request);
  EXPECT_EQ(r.code(), ::grpc::StatusCode::UNIMPLEMENTED) << r.describe();
  EXPECT_EQ(s.typed->calls.load(), 2u) << "only Echo and Fail ran";
}

TEST(grpc_client, a_two_segment_path_reaches_an_endpoint_by_its_name_dot_method_rule) {
  served s;
  auto r = s.call("/shop/Buy", "two apples");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "shop saw shop.Buy: two apples");
  {
    std::lock_guard lock(s.seen.mu);
    EXPECT_EQ(s.seen.method_seen, "shop.Buy");
  }
  r = s.call("/shop", "one pear");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "shop saw shop: one pear");
}

// --- 3. metadata both ways ---------------------------------------------------------------------

TEST(grpc_client, metadata_reaches_the_handler_and_its_headers_and_trailers_reach_the_client) {
  served s;
  ::grpc::ClientContext ctx;
  const std::string binary("\x00\xff\x80\x01 not utf-8 \xc3\x28", 15);
  ctx.AddMetadata("tenant", "blue");
  ctx.AddMetadata("trace-bin", binary);
  ctx.AddMetadata("request-id", "r-42");
  const auto r = s.call(ctx, "/probe", "x");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "probed");

  // What the handler saw: the caller's pairs, the binary one decoded; none of gRPC's transport
  // headers. (Their order is gRPC C++'s: its ClientContext keeps metadata sorted by key.)
  std::vector<std::pair<std::string, std::string>> md;
  {
    std::lock_guard lock(s.seen.mu);
    md = s.seen.metadata;
  }
  std::vector<std::pair<std::string, std::string>> ours;
  for (const auto& [k, v] : md) {
    EXPECT_FALSE(k.starts_with(":")) << k;
    EXPECT_FALSE(k.starts_with("grpc-")) << k;
    EXPECT_NE(k, "te");
    EXPECT_NE(k, "content-type");
    EXPECT_NE(k, "user-agent");
    if (k == "tenant" || k == "trace-bin" || k == "request-id") ours.emplace_back(k, v);
  }
  std::sort(ours.begin(), ours.end());
  const std::vector<std::pair<std::string, std::string>> expected{
      {"request-id", "r-42"}, {"tenant", "blue"}, {"trace-bin", binary}};
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(ours.size(), md.size()) << "the handler saw pairs the caller did not send";

  // What the client got: the handler's headers as initial metadata, its trailers as trailing
  // metadata, "-bin" values byte for byte.
  const auto& initial = ctx.GetServerInitialMetadata();
  const auto& trailing = ctx.GetServerTrailingMetadata();
  EXPECT_EQ(find_md(initial, "srv-note"), std::optional<std::string>("from the handler"));
  EXPECT_EQ(find_md(initial, "srv-blob-bin"), std::optional<std::string>(std::string("\x00\x01\xfe\xff", 4)));
  EXPECT_EQ(find_md(initial, "srv-cost"), std::nullopt) << "a trailer arrived as a header";
  EXPECT_EQ(find_md(trailing, "srv-cost"), std::optional<std::string>("7"));
  EXPECT_EQ(find_md(trailing, "srv-digest-bin"), std::optional<std::string>(std::string("\xde\xad\x00\xbe\xef", 5)));
  EXPECT_EQ(find_md(trailing, "srv-note"), std::nullopt) << "a header arrived as a trailer";

  // A reply of 600 KiB keeps its header and its trailer.
  {
    ::grpc::ClientContext big;
    const auto b = s.call(big, "/bulk", "614400");
    ASSERT_TRUE(b.ok()) << b.describe();
    EXPECT_TRUE(b.body == pattern_bytes(614400, 3))
        << "the 600 KiB reply came back altered (" << b.body.size() << " bytes)";
    EXPECT_EQ(find_md(big.GetServerInitialMetadata(), "srv-size"), std::optional<std::string>("614400"));
    EXPECT_EQ(find_md(big.GetServerTrailingMetadata(), "srv-last"), std::optional<std::string>("done"));
  }

  // A call without metadata: the handler sees none of the caller's.
  ::grpc::ClientContext plain;
  ASSERT_TRUE(s.call(plain, "/probe", "y").ok());
  EXPECT_EQ(s.seen.probe_calls.load(), 2);
  std::lock_guard lock(s.seen.mu);
  for (const auto& [k, v] : s.seen.metadata) {
    EXPECT_TRUE(k != "tenant" && k != "trace-bin" && k != "request-id") << "stale pair " << k;
  }
}

TEST(grpc_client, calls_repeating_the_same_header_block_each_see_their_own_metadata) {
  // gRPC C++'s encoder indexes each field the first time, so a method called again with the
  // same metadata sends the same header block byte for byte: the server takes such a block in
  // one step after the second time (h2_handler::on_known_block). Every call must still see
  // its metadata, and a call with other metadata (another block) its own.
  served s;
  const auto probe = [&](std::string_view tenant) {
    ::grpc::ClientContext ctx;
    ctx.AddMetadata("tenant", std::string(tenant));
    ctx.AddMetadata("trace-bin", std::string("\x00\x01\x02", 3));
    const auto r = s.call(ctx, "/probe", "x");
    EXPECT_TRUE(r.ok()) << r.describe();
    std::lock_guard lock(s.seen.mu);
    std::vector<std::pair<std::string, std::string>> ours;
    for (const auto& [k, v] : s.seen.metadata) {
      if (k == "tenant" || k == "trace-bin") ours.emplace_back(k, v);
    }
    return ours;
  };
  const auto expect = [](std::string tenant) {
    return std::vector<std::pair<std::string, std::string>>{{"tenant", std::move(tenant)},
                                                            {"trace-bin", std::string("\x00\x01\x02", 3)}};
  };
  for (int i = 0; i < 6; ++i) EXPECT_EQ(probe("blue"), expect("blue")) << "call " << i;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(probe("green"), expect("green")) << "call " << i;
    EXPECT_EQ(s.call("/echo", "e").body, "e");  // a third block between
    EXPECT_EQ(probe("blue"), expect("blue")) << "call " << i;
  }
  EXPECT_EQ(s.seen.probe_calls.load(), 14);
  // The typed method's path: its method name comes from the kept block too.
  for (int i = 0; i < 4; ++i) {
    const auto r = s.call("/shop/basket", "b");
    ASSERT_TRUE(r.ok()) << r.describe();
    EXPECT_EQ(r.body, "shop saw shop.basket: b");
  }
}

// --- 4. deadline -------------------------------------------------------------------------------

TEST(grpc_client, a_client_deadline_becomes_the_calls_deadline_and_cuts_the_handler_short) {
  served s;
  // On a machine busy enough that the call waits out its 200 ms before a handler thread takes
  // it, the server refuses it unrun (its deadline passed): then it is tried again, a few times.
  bool ran = false;
  for (int attempt = 1; attempt <= 5 && !ran; ++attempt) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 200ms);
    const auto r = s.call(ctx, "/patient", "");
    EXPECT_EQ(r.code(), ::grpc::StatusCode::DEADLINE_EXCEEDED) << r.describe();
    ran = eventually([&] { return s.seen.patient_started.load() >= 1; }, 2s);
  }
  ASSERT_TRUE(ran) << "the handler never ran in 5 attempts";

  // The handler ran with grpc-timeout as its deadline, and its wait was cut: by the deadline
  // itself or by the RST_STREAM gRPC sends when it gives up, whichever it noticed first.
  EXPECT_TRUE(s.seen.patient_had_deadline.load()) << "grpc-timeout did not become the call's deadline";
  EXPECT_LE(s.seen.patient_first_remaining_ms.load(), 200);
  ASSERT_TRUE(eventually([&] { return s.seen.patient_cut.load() != not_yet; }, 10s))
      << "the handler never saw its deadline or a cancel";
  const int how = s.seen.patient_cut.load();
  EXPECT_TRUE(how == by_deadline || how == by_cancel) << how;

  // The channel serves on.
  const auto after = s.call("/echo", "still here");
  ASSERT_TRUE(after.ok()) << after.describe();
  EXPECT_EQ(after.body, "still here");
}

// --- 5. cancellation ---------------------------------------------------------------------------

TEST(grpc_client, try_cancel_from_another_thread_cancels_the_running_call) {
  served s;
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);  // the cancel, not this, ends it
  std::promise<grpc_result> result;
  auto finished = result.get_future();
  std::thread caller([&] { result.set_value(s.call(ctx, "/patient", "")); });
  struct join_on_exit {
    std::thread& t;
    ~join_on_exit() {
      if (t.joinable()) t.join();
    }
  } joiner{caller};

  const bool started = eventually([&] { return s.seen.patient_started.load() == 1; }, 20s);
  ctx.TryCancel();  // also unblocks the caller when the handler never started
  ASSERT_TRUE(started) << "the handler never ran";
  ASSERT_EQ(finished.wait_for(30s), std::future_status::ready);
  const grpc_result r = finished.get();
  EXPECT_EQ(r.code(), ::grpc::StatusCode::CANCELLED) << r.describe();

  ASSERT_TRUE(eventually([&] { return s.seen.patient_cut.load() != not_yet; }, 10s))
      << "the handler never saw cancelled()";
  EXPECT_EQ(s.seen.patient_cut.load(), by_cancel);
  EXPECT_TRUE(eventually([&] { return s.counter(server_counter::grpc_cancels) >= 1; }, 10s))
      << "grpc_cancels: " << s.counter(server_counter::grpc_cancels);

  const auto after = s.call("/echo", "next");
  ASSERT_TRUE(after.ok()) << after.describe();
  EXPECT_EQ(after.body, "next");
}

// --- 6. unknown paths and error statuses -------------------------------------------------------

TEST(grpc_client, unknown_paths_are_unimplemented_and_a_handlers_error_keeps_its_status_and_message) {
  served s;
  for (const char* path : {"/no_such_method", "/NoSuchService/Method", "/a/b/c"}) {
    const auto r = s.call(path, "x");
    EXPECT_EQ(r.code(), ::grpc::StatusCode::UNIMPLEMENTED) << path << ": " << r.describe();
  }
  const auto r = s.call("/missing", "x");
  EXPECT_EQ(r.code(), ::grpc::StatusCode::NOT_FOUND) << r.describe();
  EXPECT_EQ(r.status.error_message(), "no such thing");
  EXPECT_EQ(s.seen.echo_calls.load(), 0);

  // A message with '%', UTF-8, quotes and a newline arrives as the handler wrote it
  // (percent-encoded in grpc-message); the error's header and trailer arrive with it (in a
  // trailers-only response gRPC C++ hands both over as trailing metadata).
  ::grpc::ClientContext ctx;
  const auto e = s.call(ctx, "/refuse", "");
  EXPECT_EQ(e.code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << e.describe();
  EXPECT_EQ(e.status.error_message(), "100% used: caf\xc3\xa9 \"closed\"\nsee you");
  auto all = ctx.GetServerTrailingMetadata();
  all.insert(ctx.GetServerInitialMetadata().begin(), ctx.GetServerInitialMetadata().end());
  EXPECT_EQ(find_md(all, "srv-hint"), std::optional<std::string>("later"));
  EXPECT_EQ(find_md(all, "srv-why"), std::optional<std::string>("quota"));

  const auto ok = s.call("/echo", "fine");
  ASSERT_TRUE(ok.ok()) << ok.describe();
  EXPECT_EQ(ok.body, "fine");
}

TEST(grpc_client, a_message_over_max_frame_bytes_is_resource_exhausted_and_the_connection_serves_on) {
  server_options o;
  o.max_frame_bytes = 64 * 1024;
  served s(o);
  const auto r = s.call("/echo", std::string(100 * 1024, 'y'));
  EXPECT_EQ(r.code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << r.describe();
  EXPECT_EQ(s.seen.echo_calls.load(), 0);
  const auto after = s.call("/echo", "small");
  ASSERT_TRUE(after.ok()) << after.describe();
  EXPECT_EQ(after.body, "small");
  EXPECT_EQ(s.counter(server_counter::grpc_connections), 1u) << "the connection was replaced";
}

// --- 7. bearer tokens --------------------------------------------------------------------------

TEST(grpc_client, bearer_tokens_refuse_calls_without_one_and_accept_a_good_one) {
  server_options o;
  o.bearer_tokens = {{"tok-grpc-0123456789", "grpc-user"}};
  served s(o);

  auto r = s.call("/who", "");
  EXPECT_EQ(r.code(), ::grpc::StatusCode::UNAUTHENTICATED) << r.describe();
  EXPECT_NE(r.status.error_message().find("bearer token"), std::string::npos) << r.describe();

  {
    ::grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer not-the-token-0000");
    r = s.call(ctx, "/who", "");
    EXPECT_EQ(r.code(), ::grpc::StatusCode::UNAUTHENTICATED) << r.describe();
  }
  EXPECT_EQ(s.seen.who_calls.load(), 0) << "a refused call ran";

  ::grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer tok-grpc-0123456789");
  r = s.call(ctx, "/who", "");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "grpc-user");
  EXPECT_EQ(s.seen.who_calls.load(), 1);
  EXPECT_GE(s.counter(server_counter::calls_unauthenticated), 2u);
}

// --- 8. health check ---------------------------------------------------------------------------

TEST(grpc_client, the_builtin_health_check_answers_serving_and_not_found_for_an_unknown_service) {
  served s;
  const std::string path = "/grpc.health.v1.Health/Check";
  auto r = s.call(path, "");  // HealthCheckRequest{}: the server as a whole
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, std::string("\x08\x01", 2));  // HealthCheckResponse{status: SERVING}

  r = s.call(path, std::string("\x0a\x04" "echo", 6));  // service "echo", a registered method
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, std::string("\x08\x01", 2));

  r = s.call(path, std::string("\x0a\x05" "nosvc", 7));
  EXPECT_EQ(r.code(), ::grpc::StatusCode::NOT_FOUND) << r.describe();
  EXPECT_GE(s.counter(server_counter::grpc_health_checks), 3u);
}

// --- 9. gRPC turned off ------------------------------------------------------------------------

TEST(grpc_client, with_grpc_off_a_grpc_call_fails_and_ringrpc_frames_still_work) {
  server_options o;
  o.grpc = false;
  served s(o);
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 3s);
  const auto r = s.call(ctx, "/echo", "should not arrive");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.code() == ::grpc::StatusCode::UNAVAILABLE || r.code() == ::grpc::StatusCode::DEADLINE_EXCEEDED)
      << r.describe();
  EXPECT_EQ(s.seen.echo_calls.load(), 0);
  EXPECT_EQ(s.counter(server_counter::grpc_connections), 0u);

  client c = s.ringrpc_client();
  const call_result cr = c.call("echo", "frames still work");
  ASSERT_TRUE(cr.ok()) << cr.message;
  EXPECT_EQ(cr.payload_string(), "frames still work");
  EXPECT_EQ(s.seen.echo_calls.load(), 1);
}

// --- 10. both protocols on one port ------------------------------------------------------------

TEST(grpc_client, ringrpc_client_and_grpc_client_share_the_port_at_once) {
  served s;
  client c = s.ringrpc_client();
  call_result cr = c.call("echo", "frames first");
  ASSERT_TRUE(cr.ok()) << cr.message;
  EXPECT_EQ(cr.payload_string(), "frames first");
  auto r = s.call("/echo", "then gRPC");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body, "then gRPC");

  // Both at the same time, each checking its own payloads.
  constexpr int rounds = ringrpc::test::sanitized ? 10 : 40;
  std::atomic<int> grpc_bad{0};
  std::atomic<int> frames_bad{0};
  std::thread grpc_side([&] {
    for (int i = 0; i < rounds; ++i) {
      const auto n = static_cast<unsigned>(i);
      const std::string p = "g" + std::to_string(i) + pattern_bytes(n * 97, n);
      const auto g = s.call("/jitter", p);
      if (!g.ok() || g.body != p) ++grpc_bad;
    }
  });
  for (int i = 0; i < rounds; ++i) {
    const auto n = static_cast<unsigned>(i);
    const std::string p = "f" + std::to_string(i) + pattern_bytes(n * 89, n + 500);
    const call_result f = c.call("jitter", p);
    if (!f.ok() || f.payload_string() != p) ++frames_bad;
  }
  grpc_side.join();
  EXPECT_EQ(grpc_bad.load(), 0);
  EXPECT_EQ(frames_bad.load(), 0);

  // The typed service answers both kinds of caller on the same port too.
  TestService::stub stub(c);
  flatbuffers::FlatBufferBuilder fbb;
  const auto typed = stub.Echo(fbb, CreateEchoRequestDirect(fbb, "typed frames"));
  ASSERT_TRUE(typed.ok()) << typed.error().describe();
  EXPECT_EQ(typed->text()->str(), "typed frames");
  EXPECT_GE(s.counter(server_counter::grpc_connections), 1u);
  EXPECT_TRUE(c.connected());
}

}  // namespace
}  // namespace ringrpc::test

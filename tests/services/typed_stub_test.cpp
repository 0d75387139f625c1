// Typed stubs beyond one client: over a channel, typed one-way messages, stubs that follow
// their client or channel through moves (and fail cleanly once it is gone), and server
// interceptors around a typed service. Over loopback with the code ringrpc-gen writes for
// gen_test.fbs.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/interceptor.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/service.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

/// Echo answers with the request's text and the server's call count; the text may also carry
/// what a server interceptor attached ("note:" prefix asks for it).
class echo_service final : public TestService::service {
 public:
  std::atomic<std::uint64_t> calls{0};
  result<EchoReply> Echo(call_context& call, const EchoRequest& req) override {
    std::string text = req.text() ? req.text()->str() : std::string();
    if (text == "note:") text += std::string(call.annotation("who").value_or("none"));
    flatbuffers::FlatBufferBuilder fbb;
    return {fbb, CreateEchoReplyDirect(fbb, text.c_str(), req.number(), nullptr, Color_Green, nullptr, ++calls)};
  }
};

struct typed_target : ::testing::Test {
  void start(server_options o = {}) {
    o.readers = 1;
    o.handlers = 2;
    srv = std::make_unique<server>(o);
    register_service(*srv, impl);
    srv->start();
  }
  client connect() {
    client_options co;
    co.default_timeout = 5s;
    return client::connect("127.0.0.1", srv->port(), co);
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(srv->port()); }

  static std::string echo(const TestService::stub& stub, const char* text) {
    flatbuffers::FlatBufferBuilder fbb;
    const auto r = stub.Echo(fbb, CreateEchoRequestDirect(fbb, text));
    if (!r.ok()) return "error: " + r.error().describe();
    return r->text() ? r->text()->str() : "";
  }

  bool wait_for_calls(std::uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (impl->calls.load() < n) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

  std::shared_ptr<echo_service> impl = std::make_shared<echo_service>();
  std::unique_ptr<server> srv;
};

TEST_F(typed_target, stub_over_a_channel_sync_async_future) {
  start();
  auto ch = channel::create(target());
  ASSERT_TRUE(ch.wait_for_members(1, 5s));
  TestService::stub stub(ch, /*idempotent=*/true);
  EXPECT_EQ(echo(stub, "via channel"), "via channel");

  flatbuffers::FlatBufferBuilder fbb;
  std::promise<std::string> got;
  stub.Echo_async(fbb, CreateEchoRequestDirect(fbb, "async"), [&](result<EchoReply> r) {
    got.set_value(r.ok() && r->text() ? r->text()->str() : "error");
  });
  ASSERT_EQ(got.get_future().wait_for(5s), std::future_status::ready);

  auto f = stub.Echo_future(fbb, CreateEchoRequestDirect(fbb, "future"));
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  const auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_EQ(r->text()->str(), "future");
  EXPECT_EQ(ch.stats().calls, 3u);  // all three went through the channel
}

TEST_F(typed_target, typed_one_way_runs_the_method_on_client_and_channel) {
  start();
  auto c = connect();
  TestService::stub stub(c);
  flatbuffers::FlatBufferBuilder fbb;
  ASSERT_TRUE(stub.Echo_one_way(fbb, CreateEchoRequestDirect(fbb, "fire")));
  EXPECT_EQ(fbb.GetSize(), 0u);  // cleared for the next request
  ASSERT_TRUE(wait_for_calls(1));

  channel_options quiet;
  quiet.health_interval = 60s;  // no health check among the calls counted below
  auto ch = channel::create(target(), quiet);
  ASSERT_TRUE(ch.wait_for_members(1, 5s));
  TestService::stub over_channel(ch);
  ASSERT_TRUE(over_channel.Echo_one_way(fbb, CreateEchoRequestDirect(fbb, "and forget")));
  ASSERT_TRUE(wait_for_calls(2));
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::calls_received], 2u);
}

TEST_F(typed_target, stub_follows_its_client_through_moves) {
  start();
  std::optional<client> first(connect());
  TestService::stub stub(*first);
  EXPECT_EQ(echo(stub, "one"), "one");

  client moved(std::move(*first));  // move construction
  first.reset();                    // the moved-from object is gone
  EXPECT_EQ(echo(stub, "two"), "two");

  client other = connect();
  TestService::stub other_stub(other);
  other = std::move(moved);  // move assignment: `other` now owns the first connection
  EXPECT_EQ(echo(stub, "three"), "three");
  // The connection `other` had is closed: its stub says so instead of reaching the new one.
  EXPECT_EQ(echo(other_stub, "x"), "error: client_closed: the stub's client is closed (destroyed)");
}

TEST_F(typed_target, stub_fails_cleanly_once_its_client_is_gone) {
  start();
  std::optional<client> c(connect());
  TestService::stub stub(*c);
  c.reset();
  EXPECT_EQ(echo(stub, "late"), "error: client_closed: the stub's client is closed (destroyed)");
  flatbuffers::FlatBufferBuilder fbb;
  EXPECT_FALSE(stub.Echo_one_way(fbb, CreateEchoRequestDirect(fbb, "late")));
  auto f = stub.Echo_future(fbb, CreateEchoRequestDirect(fbb, "late"));
  ASSERT_EQ(f.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(f.get().error().kind, call_error::client_closed);
}

TEST_F(typed_target, stub_follows_its_channel_through_moves) {
  start();
  std::optional<channel> ch(channel::create(target()));
  ASSERT_TRUE(ch->wait_for_members(1, 5s));
  TestService::stub stub(*ch);
  EXPECT_EQ(echo(stub, "before"), "before");
  channel moved(std::move(*ch));
  ch.reset();
  EXPECT_EQ(echo(stub, "after"), "after");
}

TEST_F(typed_target, server_interceptors_wrap_typed_methods) {
  struct noting : server_interceptor {
    std::atomic<int> seen{0};
    std::string method;
    call_verdict before_call(call_context& call) override {
      if (seen++ == 0) method = std::string(call.method());
      call.annotate("who", "interceptor");
      return call_verdict::proceed();
    }
  };
  auto in = std::make_shared<noting>();
  server_options o;
  o.interceptors = {in};
  start(o);
  auto c = connect();
  TestService::stub stub(c);
  EXPECT_EQ(echo(stub, "note:"), "note:interceptor");
  EXPECT_EQ(in->seen.load(), 1);
  EXPECT_EQ(in->method, "TestService.Echo");
}

}  // namespace
}  // namespace ringrpc::test

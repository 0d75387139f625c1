// Typed stubs and the call API's rules (docs/execution.md, "Deadlines and cancellation"): a
// typed _future().get() on the runtime thread throws instead of hanging, and a typed call made
// from a handler inherits its deadline and its cancellation like any client call.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/service.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

// Echo answers at once; Sleep waits until cancelled (at most 10 s) and notes what it saw.
class watching_service final : public TestService::service {
 public:
  std::atomic<bool> sleeping{false};
  std::atomic<bool> had_deadline{false};
  std::atomic<bool> saw_cancel{false};

  result<EchoReply> Echo(call_context&, const EchoRequest& req) override {
    flatbuffers::FlatBufferBuilder fbb;
    return {fbb, CreateEchoReplyDirect(fbb, req.text() ? req.text()->c_str() : "")};
  }
  result<EchoReply> Sleep(call_context& call, const SleepRequest&) override {
    had_deadline = call.has_deadline();
    sleeping = true;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!call.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    saw_cancel = call.cancelled();
    return rpc_error(status::cancelled, "stopped");
  }
};

std::unique_ptr<server> serve(std::shared_ptr<endpoint> impl, const char* name) {
  auto s = std::make_unique<server>(test::threads(1, 2));
  s->register_endpoint(name, std::move(impl));
  s->start();
  return s;
}

TEST(typed_calls_cancel, typed_future_get_on_the_runtime_thread_throws) {
  auto impl = std::make_shared<watching_service>();
  auto s = serve(impl, TestService::service_name);
  auto c = client::connect("127.0.0.1", s->port());
  TestService::stub stub(c);
  std::promise<std::string> what;
  c.call_async("ringrpc.ping", {}, [&](const call_outcome&) {
    flatbuffers::FlatBufferBuilder fbb;
    auto f = stub.Echo_future(fbb, CreateEchoRequestDirect(fbb, "inner"));
    what.set_value(test::outcome_of_get(f));
  });
  auto f = what.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "a typed future's get() hung on the runtime thread";
  EXPECT_NE(f.get().find("client runtime's thread"), std::string::npos);
}

// A plain endpoint in front that calls the typed service from its handler, no options given.
TEST(typed_calls_cancel, a_typed_call_from_a_handler_follows_the_handlers_call) {
  auto impl = std::make_shared<watching_service>();
  auto back = serve(impl, TestService::service_name);
  auto to_back = client::connect("127.0.0.1", back->port());
  std::atomic<int> child_error{-1};
  server front(test::threads(1, 2));
  front.add_method("front", [&](call_context& ctx) {
    TestService::stub stub(to_back);
    flatbuffers::FlatBufferBuilder fbb;
    const auto r = stub.Sleep(fbb, CreateSleepRequest(fbb, 10000));
    child_error = r.ok() ? static_cast<int>(call_error::none) : static_cast<int>(r.error().kind);
    ctx.reply(std::string_view("done"));
  });
  front.start();
  auto c = client::connect("127.0.0.1", front.port());
  std::stop_source stop;
  call_options co;
  co.timeout = 5s;
  co.cancel = stop.get_token();
  auto f = c.call_future("front", {}, co);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!impl->sleeping && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(impl->sleeping.load());
  EXPECT_TRUE(impl->had_deadline.load());
  stop.request_stop();
  EXPECT_EQ(f.get().error, call_error::cancelled);
  const auto until2 = std::chrono::steady_clock::now() + 10s;
  while ((!impl->saw_cancel || child_error.load() < 0) && std::chrono::steady_clock::now() < until2) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_TRUE(impl->saw_cancel.load());
  EXPECT_EQ(child_error.load(), static_cast<int>(call_error::cancelled));
  EXPECT_GE(back->stats()[ringrpc::server_counter::cancel_requests], 1u);
}

}  // namespace
}  // namespace ringrpc::test

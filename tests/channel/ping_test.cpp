// The built-in ringrpc.ping (answered by the reader, docs/protocol.md) and what a channel does
// with it: real servers and clients over loopback sockets.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using test::within;
using namespace std::chrono_literals;

std::unique_ptr<server> builtin_server(unsigned handlers) {
  return test::builtin_server(test::threads(1, handlers));
}

TEST(ping, answers_ok_with_an_empty_payload) {
  auto s = builtin_server(1);
  auto c = client::connect("127.0.0.1", s->port());
  const auto r = c.call("ringrpc.ping", std::string_view("ignored"), within(5s));
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.payload.empty());
}

TEST(ping, is_answered_while_every_handler_thread_is_stuck) {
  auto s = builtin_server(2);
  auto c = client::connect("127.0.0.1", s->port());
  std::vector<std::future<call_result>> stuck;
  for (int i = 0; i < 2; ++i) stuck.push_back(c.call_future("sleep", bytes_of("1500000"), within(10s)));
  // Both handler threads are asleep once a third sleep cannot start: the pool's queue holds it.
  std::this_thread::sleep_for(100ms);
  const auto r = c.call("ringrpc.ping", std::string_view(), within(5s));
  ASSERT_TRUE(r.ok()) << r.message;
  // The sleeps were still running when the ping came back: it did not wait for a thread.
  for (auto& f : stuck) EXPECT_EQ(f.wait_for(0s), std::future_status::timeout);
  for (auto& f : stuck) EXPECT_TRUE(f.get().ok());
}

TEST(ping, names_under_ringrpc_are_reserved) {
  server_options o;
  server s(o);
  EXPECT_THROW(s.add_method("ringrpc.ping", [](call_context& ctx) { ctx.reply(ctx.payload()); }), std::invalid_argument);
  EXPECT_THROW(s.add_method("ringrpc.anything", [](call_context& ctx) { ctx.reply(ctx.payload()); }), std::invalid_argument);
  EXPECT_NO_THROW(s.add_method("ringrpcish", [](call_context& ctx) { ctx.reply(ctx.payload()); }));
}

TEST(ping, a_stopping_server_answers_shutting_down_while_its_calls_finish) {
  auto s = builtin_server(1);
  auto c = client::connect("127.0.0.1", s->port());
  auto running = c.call_future("sleep", bytes_of("800000"), within(10s));
  std::this_thread::sleep_for(50ms);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    s->stop();
    stopped = true;
  });
  call_result r;
  for (int i = 0; i < 200; ++i) {
    r = c.call("ringrpc.ping", std::string_view(), within(5s));
    if (!r.ok()) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::shutting_down) << r.message;
  EXPECT_FALSE(stopped.load()) << "the ping should say so while the server still drains";
  EXPECT_TRUE(running.get().ok());
  stopper.join();
}

TEST(ping, a_channel_ejects_a_stopping_member_before_it_has_stopped) {
  auto leaving = builtin_server(1);
  auto staying = builtin_server(1);
  channel_options o;
  o.health_interval = 20ms;
  o.health_timeout = 2s;
  auto ch = channel::create(std::string("127.0.0.1:")
                                .append(std::to_string(leaving->port()))
                                .append(",127.0.0.1:")
                                .append(std::to_string(staying->port())),
                            o);
  ASSERT_TRUE(ch.wait_for_members(2, 5s));
  // A call in flight keeps the leaving server draining for a while.
  auto direct = client::connect("127.0.0.1", leaving->port());
  auto running = direct.call_future("sleep", bytes_of("1000000"), within(10s));
  std::this_thread::sleep_for(50ms);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    leaving->stop();
    stopped = true;
  });
  bool ejected_while_draining = false;
  for (int i = 0; i < 400 && !stopped.load(); ++i) {
    if (ch.stats().ejections > 0) {
      ejected_while_draining = !stopped.load();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(ejected_while_draining);
  // Calls now go to the member that stays, and none of them fails.
  for (int i = 0; i < 20; ++i) {
    const auto r = ch.call("echo", std::string_view("x"));
    EXPECT_TRUE(r.ok()) << r.message;
  }
  EXPECT_TRUE(running.get().ok());
  stopper.join();
  ch.close();
}

// A deregister grace as a registry gives it: the server keeps serving (and accepting) a while.
class grace_only final : public registration {
 public:
  void on_started(std::uint16_t) override {}
  void before_stop() noexcept override { std::this_thread::sleep_for(800ms); }
};

TEST(ping, a_leaving_member_is_not_redialled_during_its_grace) {
  auto leaving = std::make_unique<server>(test::threads(1, 1));
  add_builtin_methods(*leaving);
  leaving->add_registration(std::make_shared<grace_only>());
  leaving->start();
  const std::uint16_t leaving_port = leaving->port();
  auto staying = builtin_server(1);
  channel_options o;
  o.health_interval = 20ms;
  o.reconnect_backoff_min = 10ms;  // a failed member would be dialled again at once...
  o.reconnect_backoff_max = 5s;    // ...one that said it is leaving stays out this long
  auto ch = channel::create(std::string("127.0.0.1:")
                                .append(std::to_string(leaving_port))
                                .append(",127.0.0.1:")
                                .append(std::to_string(staying->port())),
                            o);
  ASSERT_TRUE(ch.wait_for_members(2, 5s));
  std::thread stopper([&] { leaving->stop(); });
  for (int i = 0; i < 200 && ch.stats().ejections == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_GT(ch.stats().ejections, 0u);
  // Inside the grace (800 ms): the member still accepts, yet the channel keeps away from it.
  for (int i = 0; i < 30; ++i) {
    const auto r = ch.call("echo", std::string_view("x"));
    EXPECT_TRUE(r.ok()) << r.message;
    std::this_thread::sleep_for(10ms);
  }
  for (const auto& m : ch.members()) {
    if (m.address.port == leaving_port) {
      EXPECT_FALSE(m.up) << "a leaving member was dialled again";
    }
  }
  stopper.join();
  ch.close();
}

}  // namespace
}  // namespace ringrpc

// Downstreams (ringrpc/downstream.hpp), over loopback with real servers: an on-shard handler's
// call to a downstream is written, read and completed on the shard that decoded the incoming
// call; a target that is down fails calls with its reason, backs off and recovers; deadlines,
// the caller's cancellation and the server's stop end a call and send the downstream a
// Cancel; the bounds refuse at once; off a shard the call is refused; counts go back to zero.

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "coro_test_support.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/coro_handler.hpp"
#include "ringrpc/downstream.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/task.hpp"
#include "seam/server_seam.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::alive_marker;

long tid() { return static_cast<long>(::syscall(SYS_gettid)); }


// A front server whose on-shard handler "proxy" awaits `method` of the downstream "backend"
// with the incoming payload and answers with what it got; it records where it ran.
struct proxy_front {
  std::unique_ptr<server> front;
  downstream backend;
  std::mutex mu;
  std::vector<std::pair<long, long>> where;  // (thread at the start, thread after the call)
  std::vector<call_result> results;

  proxy_front(std::uint16_t port, std::string method, server_options o = test::threads(2, 1),
              downstream_options d = {})
      : front(std::make_unique<server>(o)) {
    backend = add_downstream(*front, "backend", "127.0.0.1", port, d);
    add_coroutine_method(*front, "proxy", [this, method](deferred_reply& call) -> task<void> {
      alive_marker alive;
      const long start = tid();
      call_result r = co_await co_call(backend, method, call.payload());
      const long after = tid();
      {
        std::lock_guard lock(mu);
        where.emplace_back(start, after);
        results.push_back(r);
      }
      if (r.ok()) {
        call.reply(r.payload);
      } else {
        call.fail(status::unavailable, std::string(to_string(r.error)) + ": " + r.message);
      }
    }, on_shard);
    front->start();
  }
  ~proxy_front() { front->stop(); }
  call_result last() {
    std::lock_guard lock(mu);
    return results.empty() ? call_result{} : results.back();
  }
};

TEST(Downstream, ACallCompletesOnTheShardThatDecodedTheIncomingCall) {
  auto backend = test::builtin_server(test::threads(1, 2));
  {
    proxy_front f(backend->port(), "echo");
    std::vector<client> callers;
    for (int i = 0; i < 4; ++i) callers.push_back(client::connect("127.0.0.1", f.front->port()));
    for (int round = 0; round < 10; ++round) {
      for (std::size_t i = 0; i < callers.size(); ++i) {
        const std::string text = "m" + std::to_string(round) + "." + std::to_string(i);
        call_result r = callers[i].call("proxy", text);
        ASSERT_TRUE(r.ok()) << r.message;
        EXPECT_EQ(r.payload_string(), text);
      }
    }
    // Pipelined: many calls at once on each shard's one connection.
    std::vector<reply_future<call_result>> pending;
    for (int i = 0; i < 200; ++i) pending.push_back(callers[i % 4].call_future("proxy", test::bytes_of("p" + std::to_string(i))));
    for (int i = 0; i < 200; ++i) {
      call_result r = pending[i].get();
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_EQ(r.payload_string(), "p" + std::to_string(i));
    }
    std::lock_guard lock(f.mu);
    ASSERT_EQ(f.where.size(), 240u);
    std::vector<long> shards;
    for (const auto& [start, after] : f.where) {
      EXPECT_EQ(after, start) << "resumed on another thread than the one that decoded the call";
      if (std::find(shards.begin(), shards.end(), start) == shards.end()) shards.push_back(start);
    }
    EXPECT_EQ(shards.size(), 2u) << "the four connections all landed on one shard";
    EXPECT_EQ(f.front->stats()[server_counter::downstream_calls_ok], 240u);
    EXPECT_EQ(f.front->stats()[server_counter::downstream_connects_ok], 2u);
    // One connection per shard to the backend, however many calls.
    EXPECT_LE(backend->stats()[server_counter::connections_accepted], 2u);
  }
  EXPECT_TRUE(test::eventually([] { return test::frames_alive.load() == 0; }));
  backend->stop();
}

TEST(Downstream, ATargetThatIsDownFailsFastThenRecovers) {
  // A port with nothing behind it: a server's, stopped.
  std::uint16_t port = 0;
  {
    auto gone = test::builtin_server(test::threads(1, 1));
    port = gone->port();
    gone->stop();
  }
  proxy_front f(port, "echo", test::threads(1, 1));
  auto c = client::connect("127.0.0.1", f.front->port());
  call_result first = c.call("proxy", "a");
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.message.find("connection_closed"), std::string::npos) << first.message;
  EXPECT_NE(first.message.find("downstream backend (127.0.0.1:" + std::to_string(port) + ")"), std::string::npos)
      << first.message;
  EXPECT_NE(first.message.find("connect failed: Connection refused"), std::string::npos) << first.message;
  // Within the backoff: refused at once, unsent, naming the reason and the next attempt.
  call_result second = c.call("proxy", "b");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.message.find("is down: connect failed: Connection refused; next attempt in"), std::string::npos)
      << second.message;
  // The target comes up on that port: after the backoff the next call connects.
  server_options o = test::threads(1, 1);
  o.port = port;
  auto back = std::make_unique<server>(o);
  test::start_with_builtins(*back);
  EXPECT_TRUE(test::eventually([&] { return c.call("proxy", "c").ok(); }, 10s));
  call_result later = c.call("proxy", "d");
  ASSERT_TRUE(later.ok()) << later.message;
  EXPECT_EQ(later.payload_string(), "d");
  // The target goes away: calls in flight and the next ones fail, and it reconnects after.
  back->stop();
  call_result lost = c.call("proxy", "e");
  EXPECT_FALSE(lost.ok());
  back = std::make_unique<server>(o);
  test::start_with_builtins(*back);
  EXPECT_TRUE(test::eventually([&] { return c.call("proxy", "f").ok(); }, 10s));
  EXPECT_TRUE(test::eventually([&] { return detail::server_seam::downstream_calls(*f.front) == 0; }));
  const server_stats st = f.front->stats();
  EXPECT_GE(st[server_counter::downstream_connects_failed], 1u);
  EXPECT_GE(st[server_counter::downstream_connects_ok], 2u);  // up, then again after the restart
  EXPECT_GE(st[server_counter::downstream_calls_refused], 1u);  // within the backoff
  EXPECT_GE(st[server_counter::downstream_calls_ok], 3u);
  back->stop();
}

TEST(Downstream, ADeadlineEndsTheCallAndTellsTheDownstream) {
  auto backend = test::builtin_server(test::threads(1, 2));
  downstream_options d;
  d.default_timeout = 100ms;
  {
    proxy_front f(backend->port(), "sleep", test::threads(1, 1), d);
    auto c = client::connect("127.0.0.1", f.front->port());
    call_result r = c.call("proxy", "10000000", test::within(20s));  // a 10 s sleep downstream
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(f.last().error, call_error::timeout) << f.last().message;
    EXPECT_TRUE(test::eventually([&] { return backend->stats()[server_counter::cancel_requests] >= 1; }))
        << "the downstream saw no Cancel";
    EXPECT_TRUE(test::eventually([&] { return detail::server_seam::downstream_calls(*f.front) == 0; }));
  }
  backend->stop();
}

TEST(Downstream, TheIncomingCallsDeadlineAndCancellationReachTheDownstreamCall) {
  auto backend = test::builtin_server(test::threads(1, 4));
  {
    proxy_front f(backend->port(), "sleep", test::threads(1, 1));
    auto c = client::connect("127.0.0.1", f.front->port());
    // The incoming call's deadline is the downstream call's: it ends there (by its own timer,
    // or by the shard's expiry of the incoming call, which cancels its children: either comes
    // first).
    call_result r = c.call("proxy", "10000000", test::within(200ms));
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(test::eventually([&] {
      std::lock_guard lock(f.mu);
      return f.results.size() == 1 &&
             (f.results[0].error == call_error::timeout || f.results[0].error == call_error::cancelled);
    })) << f.last().message;
    // The caller cancels: the handler's downstream call is cancelled on the shard.
    std::stop_source stop;
    call_options o;
    o.cancel = stop.get_token();
    auto future = c.call_future("proxy", test::bytes_of("10000000"), o);
    ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
    std::this_thread::sleep_for(50ms);  // the downstream call is on its way
    stop.request_stop();
    EXPECT_EQ(future.get().error, call_error::cancelled);
    EXPECT_TRUE(test::eventually([&] {
      std::lock_guard lock(f.mu);
      return f.results.size() == 2 && f.results[1].error == call_error::cancelled;
    })) << f.last().message;
    EXPECT_NE(f.last().message.find("parent"), std::string::npos) << f.last().message;
    EXPECT_TRUE(test::eventually([&] { return backend->stats()[server_counter::cancel_requests] >= 2; }));
    EXPECT_TRUE(test::eventually([] { return test::frames_alive.load() == 0; }));
    EXPECT_TRUE(test::eventually([&] { return detail::server_seam::downstream_calls(*f.front) == 0; }));
  }
  backend->stop();
}

TEST(Downstream, TheBoundsRefuseAtOnce) {
  auto backend = test::builtin_server(test::threads(1, 4));
  downstream_options d;
  d.max_pending_calls = 1;
  {
    proxy_front f(backend->port(), "sleep", test::threads(1, 1), d);
    auto c = client::connect("127.0.0.1", f.front->port());
    auto slow = c.call_future("proxy", test::bytes_of("300000"));
    ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
    call_result refused = c.call("proxy", "1000");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message.find("client_busy"), std::string::npos) << refused.message;
    EXPECT_NE(refused.message.find("max_pending_calls"), std::string::npos) << refused.message;
    EXPECT_TRUE(slow.get().ok());
    // The room came back.
    EXPECT_TRUE(c.call("proxy", "1000").ok());
  }
  backend->stop();
}

TEST(Downstream, StopFailsTheCallsInFlightAndEveryFrameEnds) {
  auto backend = test::builtin_server(test::threads(1, 4));
  server_options o = test::threads(2, 1);
  o.drain_timeout = 200ms;
  auto f = std::make_unique<proxy_front>(backend->port(), "sleep", o);
  std::vector<client> callers;
  std::vector<reply_future<call_result>> stuck;
  for (int i = 0; i < 4; ++i) {
    callers.push_back(client::connect("127.0.0.1", f->front->port()));
    stuck.push_back(callers.back().call_future("proxy", test::bytes_of("10000000")));
  }
  ASSERT_TRUE(test::eventually([] { return test::frames_alive.load() == 4; }));
  f->front->stop();
  EXPECT_EQ(test::frames_alive.load(), 0);
  EXPECT_EQ(detail::server_seam::coroutine_frames(*f->front), 0u);
  EXPECT_EQ(detail::server_seam::downstream_calls(*f->front), 0u);
  for (auto& s : stuck) EXPECT_FALSE(s.get().ok());
  f.reset();
  backend->stop();
}

TEST(Downstream, OffItsShardTheCallIsRefused) {
  auto backend = test::builtin_server(test::threads(1, 1));
  server front(test::threads(1, 1));
  downstream ds = add_downstream(front, "backend", "127.0.0.1", backend->port());
  // A coroutine handler on the default pool: its thread is not a shard's.
  add_coroutine_method(front, "pooled", [&ds](deferred_reply& call) -> task<void> {
    call_result r = co_await co_call(ds, "echo", "x");
    call.reply(r.payload);
  });
  front.start();
  auto c = client::connect("127.0.0.1", front.port());
  call_result r = c.call("pooled", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message.find("used off a shard of its server"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("use a client"), std::string::npos) << r.message;
  front.stop();
  backend->stop();
}

TEST(Downstream, AddingChecksTheNameTheHostAndTheTime) {
  server s(test::threads(1, 1));
  EXPECT_THROW(add_downstream(s, "", "127.0.0.1", 1), std::invalid_argument);
  EXPECT_THROW(add_downstream(s, "bad name", "127.0.0.1", 1), std::invalid_argument);
  EXPECT_THROW(add_downstream(s, "zero", "127.0.0.1", 0), std::invalid_argument);
  EXPECT_THROW(add_downstream(s, "nowhere", "no-such-host.invalid", 1), std::invalid_argument);
  downstream d = add_downstream(s, "inventory", "127.0.0.1", 7000);
  EXPECT_EQ(d.name(), "inventory");
  EXPECT_THROW(add_downstream(s, "inventory", "127.0.0.1", 7001), std::invalid_argument);
  EXPECT_EQ(downstream{}.name(), "");
  s.start();
  EXPECT_THROW(add_downstream(s, "late", "127.0.0.1", 7000), std::logic_error);
  s.stop();
}

}  // namespace
}  // namespace ringrpc

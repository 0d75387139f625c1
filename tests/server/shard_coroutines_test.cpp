// Coroutine handlers that stay on their shard (add_coroutine_method(..., on_shard)), over
// loopback with real servers: the handler starts on the shard's thread that decoded its call
// and every resumption runs on that same thread, whichever thread completed what it awaited;
// to_pool still moves it; its lifecycles (caller gone, deadline, stop) end every frame; and the
// stall detector names a method whose user code holds a shard's thread (a direct handler, a
// coroutine's step after a resumption) in the metric and in a rate-limited log line.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coro_test_support.hpp"
#include "log/log.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/coro_handler.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/task.hpp"
#include "seam/server_seam.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;

struct thread_id {
  long tid = 0;
  std::string name;
  static thread_id here() {
    thread_id t;
    t.tid = static_cast<long>(::syscall(SYS_gettid));
    t.name = test::thread_name();
    return t;
  }
};

using test::alive_marker;

// Where one proxied call's handler ran: at its start, after each of its two awaited calls.
struct trail {
  thread_id start, after_first, after_second;
};

// A backend with the built-in methods, and a front server with two shards whose on-shard
// coroutine handler "proxy" awaits two echoes of the backend through a client (whose I/O thread
// completes them) and records where it ran.
struct front_and_backend {
  std::unique_ptr<server> backend = test::builtin_server(test::threads(1, 2));
  client to_backend = client::connect("127.0.0.1", backend->port());
  server front{test::threads(2, 1)};
  std::mutex mu;
  std::vector<trail> trails;

  front_and_backend() {
    add_coroutine_method(front, "proxy", [this](deferred_reply& call) -> task<void> {
      alive_marker alive;
      trail t;
      t.start = thread_id::here();
      const std::string payload(reinterpret_cast<const char*>(call.payload().data()), call.payload().size());
      // A 20 ms sleep first: its answer cannot come before the handler has suspended.
      call_result first = co_await co_call(to_backend, "sleep", "20000");
      t.after_first = thread_id::here();
      call_result second = co_await co_call(to_backend, "echo", payload);
      t.after_second = thread_id::here();
      {
        std::lock_guard lock(mu);
        trails.push_back(t);
      }
      if (first.ok() && second.ok()) {
        call.reply(second.payload);
      } else {
        call.fail(status::unavailable, first.ok() ? second.message : first.message);
      }
    }, on_shard);
  }
  ~front_and_backend() {
    front.stop();
    backend->stop();
  }
};

TEST(ShardCoroutines, AHandlerResumesOnTheShardThatDecodedItsCall) {
  front_and_backend f;
  f.front.start();
  // Several connections, so that both shards get calls.
  std::vector<client> callers;
  for (int i = 0; i < 4; ++i) callers.push_back(client::connect("127.0.0.1", f.front.port()));
  for (int round = 0; round < 5; ++round) {
    for (std::size_t i = 0; i < callers.size(); ++i) {
      const std::string text = "m" + std::to_string(round) + "." + std::to_string(i);
      call_result r = callers[i].call("proxy", text);
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_EQ(r.payload_string(), text);
    }
  }
  EXPECT_TRUE(test::eventually([&] { return test::frames_alive.load() == 0; }));
  std::lock_guard lock(f.mu);
  ASSERT_EQ(f.trails.size(), 20u);
  std::vector<long> shards;
  for (const trail& t : f.trails) {
    EXPECT_EQ(t.start.name.rfind("rr-read", 0), 0u) << t.start.name;
    EXPECT_EQ(t.after_first.tid, t.start.tid) << t.after_first.name;
    EXPECT_EQ(t.after_second.tid, t.start.tid) << t.after_second.name;
    if (std::find(shards.begin(), shards.end(), t.start.tid) == shards.end()) shards.push_back(t.start.tid);
  }
  EXPECT_EQ(shards.size(), 2u) << "the four connections all landed on one shard";
  EXPECT_EQ(detail::server_seam::coroutine_frames(f.front), 0u);
}

TEST(ShardCoroutines, ToPoolMovesAnOnShardHandlerOffItsShard) {
  auto backend = test::builtin_server(test::threads(1, 2));
  auto to_backend = client::connect("127.0.0.1", backend->port());
  server front(test::threads(1, 1));
  front.add_pool("blocking", pool_options{.kind = pool_kind::fixed, .threads = 1});
  std::mutex mu;
  std::vector<std::string> seen;
  add_coroutine_method(front, "hop", [&](deferred_reply& call) -> task<void> {
    alive_marker alive;
    std::vector<std::string> here{thread_id::here().name};
    call_result r = co_await co_call(to_backend, "sleep", "10000");
    here.push_back(thread_id::here().name);  // back on the shard
    const bool moved = co_await to_pool(front, "blocking");
    here.push_back(moved ? thread_id::here().name : "not moved");
    r = co_await co_call(to_backend, "echo", call.payload());
    here.push_back(thread_id::here().name);  // the pool is its home now
    {
      std::lock_guard lock(mu);
      seen = here;
    }
    call.reply(r.payload);
  }, on_shard);
  front.start();
  auto c = client::connect("127.0.0.1", front.port());
  call_result r = c.call("hop", "x");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "x");
  EXPECT_TRUE(test::eventually([&] { return test::frames_alive.load() == 0; }));
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], "rr-read/0");
  EXPECT_EQ(seen[1], "rr-read/0");
  EXPECT_EQ(seen[2].rfind("rr-blocking", 0), 0u) << seen[2];
  EXPECT_EQ(seen[3].rfind("rr-blocking", 0), 0u) << seen[3];
  front.stop();
  backend->stop();
}

// An on-shard handler awaiting a backend call that does not answer (a 10 s sleep) is resumed
// with that call cancelled when its caller goes away and when its deadline passes (on its
// shard), and when its server stops past the drain timeout (on its shard, or where the call
// completed once the shard's loop has ended); every frame ends.
struct stuck_handlers {
  std::unique_ptr<server> backend = test::builtin_server(test::threads(1, 4));
  client to_backend = client::connect("127.0.0.1", backend->port());
  std::unique_ptr<server> front;
  std::atomic<int> cancelled{0}, timed_out{0}, finished{0}, resumed_elsewhere{0};

  explicit stuck_handlers(server_options o) : front(std::make_unique<server>(o)) {
    add_coroutine_method(*front, "stuck", [this](deferred_reply& call) -> task<void> {
      alive_marker alive;
      const long started_on = thread_id::here().tid;
      call_result r = co_await co_call(to_backend, "sleep", "10000000");
      if (thread_id::here().tid != started_on) resumed_elsewhere.fetch_add(1);
      if (r.error == call_error::cancelled) cancelled.fetch_add(1);
      if (r.error == call_error::timeout) timed_out.fetch_add(1);
      call.fail(status::unavailable, r.message);
      finished.fetch_add(1);
    }, on_shard);
    front->start();
  }
  ~stuck_handlers() {
    front->stop();
    backend->stop();
  }
};

TEST(ShardCoroutines, TheCallerLeavingCancelsTheAwaitedCall) {
  stuck_handlers s(test::threads(1, 1));
  {
    test::raw_socket peer(s.front->port());
    ASSERT_TRUE(peer.send_frame(test::request(1, "stuck", "")));
    ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
    // A reset, not a FIN (a half-closed connection still gets its answers): the caller is gone.
    const linger hard{1, 0};
    ASSERT_EQ(::setsockopt(peer.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
  }
  EXPECT_TRUE(test::eventually([&] { return s.finished.load() == 1; }, 5s));
  EXPECT_EQ(s.cancelled.load(), 1);
  EXPECT_EQ(s.resumed_elsewhere.load(), 0);
  EXPECT_TRUE(test::eventually([&] { return test::frames_alive.load() == 0 && detail::server_seam::coroutine_frames(*s.front) == 0; }));
}

TEST(ShardCoroutines, TheDeadlinePassingWhileSuspended) {
  stuck_handlers s(test::threads(1, 1));
  auto c = client::connect("127.0.0.1", s.front->port());
  call_result r = c.call("stuck", "", test::within(200ms));
  EXPECT_FALSE(r.ok());
  // The downstream call ended by the inherited deadline, or by the Cancel frame the caller sent
  // when its own timer fired first: either way well before the 10 s sleep.
  EXPECT_TRUE(test::eventually([&] { return s.finished.load() == 1; }, 5s));
  EXPECT_EQ(s.timed_out.load() + s.cancelled.load(), 1);
  EXPECT_EQ(s.resumed_elsewhere.load(), 0);
  EXPECT_TRUE(test::eventually([&] { return test::frames_alive.load() == 0 && detail::server_seam::coroutine_frames(*s.front) == 0; }));
}

TEST(ShardCoroutines, StopPastTheDrainTimeoutEndsSuspendedHandlers) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = 100ms;
  stuck_handlers s(o);
  auto c = client::connect("127.0.0.1", s.front->port());
  std::vector<reply_future<call_result>> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(c.call_future("stuck", test::bytes_of("")));
  EXPECT_TRUE(test::eventually([&] { return test::frames_alive.load() == 4; }));
  s.front->stop();
  for (auto& f : calls) {
    call_result r = f.get();
    EXPECT_FALSE(r.ok());
  }
  EXPECT_EQ(s.finished.load(), 4);
  EXPECT_EQ(s.cancelled.load(), 4);
  EXPECT_EQ(test::frames_alive.load(), 0);
  EXPECT_EQ(detail::server_seam::coroutine_frames(*s.front), 0u);
}

// The log lines of the test's duration.
class captured_log {
 public:
  captured_log() {
    log::configure(log_options{}, [this](std::string_view line) {
      std::lock_guard lock(_mu);
      _lines.emplace_back(line);
    });
  }
  ~captured_log() { log::configure(log_options{}); }
  std::vector<std::string> matching(std::string_view what) {
    std::lock_guard lock(_mu);
    std::vector<std::string> out;
    for (const auto& l : _lines) {
      if (l.find(what) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  std::mutex _mu;
  std::vector<std::string> _lines;
};

std::uint64_t shard_stalls(const server& s) { return s.stats()[server_counter::shard_stalls]; }

// The value of the sample `series` (name and labels) on a /metrics page; -1 when absent.
double sample(const std::string& page, const std::string& series) {
  const auto at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + series.size() + 2));
}

TEST(ShardCoroutines, ADirectHandlerThatBlocksIsReportedAsAStall) {
  captured_log logged;
  server_options o = test::threads(1, 1);
  o.default_policy = dispatch_policy::direct;  // add_method's handlers run on the shard
  server s(o);
  s.add_method("nap", [](call_context& call) {
    std::this_thread::sleep_for(50ms);  // what a shard must never do
    call.reply(call.payload());
  });
  s.add_method("quick", [](call_context& call) { call.reply(call.payload()); });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.call("quick", "q").ok());
  // The log's limit is per shard: a quick call the machine preempted for 10 ms would take the
  // second's line. Past that second, the first nap is logged whatever happened before.
  std::this_thread::sleep_for(1100ms);
  const auto naps_began = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.call("nap", "z").ok());
  const auto naps_took = std::chrono::steady_clock::now() - naps_began;
  const std::string page = metrics_text(s);
  EXPECT_EQ(sample(page, "ringrpc_shard_stalls_total{method=\"nap\"}"), 3) << page;
  EXPECT_GE(sample(page, "ringrpc_shard_stall_seconds_total{method=\"nap\"}"), 0.12) << page;  // 150 ms, less a tick a nap
  // A busy machine may preempt the shard's thread inside a quick call too (the detector
  // measures wall time, as a waiting peer sees it), but not in most of them.
  EXPECT_LE(sample(page, "ringrpc_shard_stalls_total{method=\"quick\"}"), 5) << page;
  EXPECT_GE(shard_stalls(s), 3u);
  const auto lines = logged.matching("method=nap");
  ASSERT_GE(lines.size(), 1u);
  EXPECT_NE(lines[0].find("event=shard_stall"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("level=warn"), std::string::npos) << lines[0];
  // The coarse clock's resolution (4 ms with HZ=250) is the reading's error.
  const auto ms_at = lines[0].find(" ms=");
  ASSERT_NE(ms_at, std::string::npos) << lines[0];
  EXPECT_GE(std::stoi(lines[0].substr(ms_at + 4)), 40) << lines[0];
  // One line a second at most: three naps within a second make one line.
  if (naps_took < 900ms) {
    EXPECT_EQ(lines.size(), 1u);
  }
  s.stop();
}

TEST(ShardCoroutines, ACoroutineStepThatBlocksIsReportedWithItsMethod) {
  captured_log logged;
  auto backend = test::builtin_server(test::threads(1, 1));
  auto to_backend = client::connect("127.0.0.1", backend->port());
  server s(test::threads(1, 1));
  add_coroutine_method(s, "slow_after", [&](deferred_reply& call) -> task<void> {
    call_result r = co_await co_call(to_backend, "sleep", "10000");
    std::this_thread::sleep_for(30ms);  // a blocking step after the resumption, on the shard
    call.reply(r.payload);
  }, on_shard);
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  ASSERT_TRUE(c.call("slow_after", "").ok());
  EXPECT_TRUE(test::eventually([&] { return shard_stalls(s) >= 1; }));
  const std::string page = metrics_text(s);
  EXPECT_GE(sample(page, "ringrpc_shard_stalls_total{method=\"slow_after\"}"), 1) << page;
  EXPECT_FALSE(logged.matching("method=slow_after").empty());
  s.stop();
  backend->stop();
}

}  // namespace
}  // namespace ringrpc

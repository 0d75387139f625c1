// Tests for ringrpc::detail::thread_pool: each kind's growth rules, hand-off, bounded and
// unbounded queues, keep-alive, refusal counting and reports, shutdown, validation, and a
// multi-producer stress in which every accepted task must run exactly once.
//
// Deterministic: workers are held by tasks blocked on a gate, and the test waits for events
// (tasks started, counters reached) with a generous upper bound; no assertion depends on speed.
#include "exec/worker_pool.hpp"
#include "exec/heavy_budget.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/cpu_affinity.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ringrpc::pool_kind;
using ringrpc::pool_options;
using ringrpc::pool_stats;
using ringrpc::detail::heavy_budget;
using ringrpc::detail::pool_task;
using ringrpc::detail::thread_pool;

#if defined(RINGRPC_TEST_SANITIZED)
constexpr int stress_per_producer = 10'000;
#else
constexpr int stress_per_producer = 50'000;
#endif

constexpr auto patience = 5s;  // upper bound for anything the test waits for

// Polls pred() until it holds, at most `limit`.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = patience) {
  return ringrpc::test::eventually(pred, limit);
}

// Blocked tasks wait at a gate until the test opens it; open_on_exit (declared after the pool)
// opens it before the pool's destructor joins, also when an ASSERT returns early.
using ringrpc::test::gate;
using ringrpc::test::open_on_exit;

// Counts events and lets the test wait for a number of them.
class event_count {
 public:
  void post() {
    {
      std::lock_guard lock(_mu);
      ++_n;
    }
    _cv.notify_all();
  }
  bool wait_for(int n) {
    std::unique_lock lock(_mu);
    return _cv.wait_for(lock, patience, [&] { return _n >= n; });
  }
  int count() {
    std::lock_guard lock(_mu);
    return _n;
  }

 private:
  std::mutex _mu;
  std::condition_variable _cv;
  int _n = 0;
};

struct blocking_task : pool_task {
  gate* g = nullptr;
  event_count* started = nullptr;
  std::atomic<int> runs{0};

  blocking_task(gate& gt, event_count& st, std::string_view lbl = "block") : g(&gt), started(&st) {
    run = &run_fn;
    label = lbl;
  }
  static void run_fn(pool_task* p) noexcept {
    auto* t = static_cast<blocking_task*>(p);
    t->runs.fetch_add(1, std::memory_order_relaxed);
    t->started->post();
    t->g->wait();
  }
};

struct counting_task : pool_task {
  std::atomic<int> runs{0};
  counting_task() {
    run = &run_fn;
    label = "count";
  }
  static void run_fn(pool_task* p) noexcept {
    static_cast<counting_task*>(p)->runs.fetch_add(1, std::memory_order_relaxed);
  }
};

pool_options make(pool_kind kind, unsigned threads, unsigned core, int queue,
                  std::chrono::milliseconds keep_alive = 10s) {
  pool_options o;
  o.kind = kind;
  o.threads = threads;
  o.core_threads = core;
  o.queue = queue;
  o.keep_alive = keep_alive;
  return o;
}

// Submits `t` and wakes one worker, as a reader does at the end of its turn.
bool submit(thread_pool& pool, pool_task& t) { return pool.submit_now(&t); }

// ---------------------------------------------------------------------------------------------

TEST(ThreadPool, KindNamesRoundTrip) {
  for (pool_kind k : {pool_kind::fixed, pool_kind::cached, pool_kind::limited, pool_kind::eager}) {
    pool_kind parsed = pool_kind::fixed;
    ASSERT_TRUE(ringrpc::parse_pool_kind(ringrpc::to_string(k), parsed)) << ringrpc::to_string(k);
    EXPECT_EQ(parsed, k);
  }
  EXPECT_EQ(ringrpc::to_string(pool_kind::eager), "eager");
  pool_kind out = pool_kind::cached;
  EXPECT_FALSE(ringrpc::parse_pool_kind("Fixed", out));
  EXPECT_FALSE(ringrpc::parse_pool_kind("", out));
  EXPECT_EQ(out, pool_kind::cached);
}

void expect_invalid(const std::string& name, const pool_options& o,
                    std::vector<std::string> needles,
                    std::chrono::milliseconds interval = std::chrono::seconds(10)) {
  try {
    thread_pool pool(name, o, {}, {}, interval);
    ADD_FAILURE() << "no exception for pool '" << name << "'";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << what;
  }
}

TEST(ThreadPool, ValidationNamesTheFieldAndTheAllowedValues) {
  expect_invalid("p", make(pool_kind::cached, 4, 5, 16), {"'p'", "core_threads = 5", "0 to 4"});
  expect_invalid("p", make(pool_kind::eager, 2, 3, 16), {"core_threads", "0 to 2"});
  expect_invalid("p", make(pool_kind::limited, 1, 2, 16), {"core_threads"});
  expect_invalid("p", make(pool_kind::fixed, 100'000, 0, 16), {"threads = 100000", "0 (one per usable CPU)"});
  expect_invalid("p", make(pool_kind::fixed, 1, 0, 1 << 30), {"queue", "< 0 (unbounded)", "0 (hand-off)"});
  expect_invalid("p", make(pool_kind::cached, 2, 0, 16, 0ms), {"keep_alive", "> 0 ms"});
  expect_invalid("p", make(pool_kind::eager, 2, 0, 16, -5ms), {"keep_alive"});
  expect_invalid("p", make(pool_kind::fixed, 1, 0, 16), {"report_interval"}, -1ms);
  expect_invalid("", make(pool_kind::fixed, 1, 0, 16), {"name"});
  pool_options bad_kind = make(pool_kind::fixed, 1, 0, 16);
  bad_kind.kind = static_cast<pool_kind>(42);
  expect_invalid("p", bad_kind, {"kind", "fixed, cached, limited, eager"});

  // Ignored fields are not validated: fixed ignores core_threads, limited keep_alive.
  EXPECT_NO_THROW(thread_pool("p", make(pool_kind::fixed, 2, 9, 16)));
  EXPECT_NO_THROW(thread_pool("p", make(pool_kind::limited, 2, 1, 16, 0ms)));
}

TEST(ThreadPool, ZeroThreadsMeansOnePerUsableCpu) {
  thread_pool pool("cpus", make(pool_kind::fixed, 0, 0, 16));
  EXPECT_EQ(pool.options().threads, ringrpc::detail::usable_cpus());
  EXPECT_EQ(pool.name(), "cpus");
  pool.start();
  EXPECT_EQ(pool.stats().threads, ringrpc::detail::usable_cpus());
}

TEST(ThreadPool, RefusesBeforeStartWithoutCountingIt) {
  thread_pool pool("idle", make(pool_kind::fixed, 1, 0, 16));
  counting_task t;
  EXPECT_FALSE(pool.try_submit(&t));
  EXPECT_EQ(pool.stats().rejected, 0u);
  EXPECT_EQ(pool.stats().threads, 0u);
}

// fixed: never grows; the (threads + queue + 1)th task is refused while all are blocked. A queue
// size that is not a power of two is exact too (the ring rounds up).
class FixedBoundedQueue : public ::testing::TestWithParam<int> {};

TEST_P(FixedBoundedQueue, RefusesTheFirstTaskBeyondThreadsPlusQueue) {
  const int queue = GetParam();
  gate g;
  event_count started;
  blocking_task b1(g, started), b2(g, started);
  std::vector<counting_task> queued(static_cast<std::size_t>(queue));
  counting_task extra;
  thread_pool pool("fixed", make(pool_kind::fixed, 2, 0, queue));
  open_on_exit release{g};
  pool.start();
  EXPECT_EQ(pool.stats().threads, 2u);

  ASSERT_TRUE(submit(pool, b1));
  ASSERT_TRUE(started.wait_for(1));  // out of the queue (queue = 1 could not take b2 yet)
  ASSERT_TRUE(submit(pool, b2));
  ASSERT_TRUE(started.wait_for(2));
  for (auto& t : queued) ASSERT_TRUE(submit(pool, t));
  pool_stats s = pool.stats();
  EXPECT_EQ(s.queued, static_cast<std::uint64_t>(queue));
  EXPECT_EQ(s.active, 2u);
  EXPECT_FALSE(submit(pool, extra));
  s = pool.stats();
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.threads, 2u);  // fixed never grows
  EXPECT_EQ(s.largest, 2u);
  EXPECT_EQ(s.queue_capacity, queue);

  g.open();
  const auto total = static_cast<std::uint64_t>(2 + queue);
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == total; }));
  for (auto& t : queued) EXPECT_EQ(t.runs.load(), 1);
  EXPECT_EQ(extra.runs.load(), 0);
  EXPECT_EQ(pool.stats().threads, 2u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, FixedBoundedQueue, ::testing::Values(1, 2, 3, 8));

// queue = 0: a task is accepted only if an idle worker can be reserved for it.
TEST(ThreadPool, HandOffAcceptsExactlyAsManyAsIdleWorkers) {
  gate g;
  event_count started;
  blocking_task b1(g, started), b2(g, started);
  counting_task refused1, refused2;
  thread_pool pool("handoff", make(pool_kind::fixed, 2, 0, 0));
  open_on_exit release{g};
  pool.start();

  // Both workers start idle: two reservations succeed, the third has none left, even before
  // any worker was woken.
  ASSERT_TRUE(pool.try_submit(&b1));
  ASSERT_TRUE(pool.try_submit(&b2));
  EXPECT_FALSE(pool.try_submit(&refused1));
  pool.wake(1);  // one wake for the batch: the first worker passes it on
  ASSERT_TRUE(started.wait_for(2));
  EXPECT_FALSE(submit(pool, refused2));
  EXPECT_EQ(pool.stats().rejected, 2u);
  EXPECT_EQ(pool.stats().queued, 0u);
  EXPECT_EQ(pool.stats().queue_capacity, 0);

  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 2 && pool.stats().active == 0; }));
  // Idle again: two more are taken, a third is refused.
  gate g2;
  event_count started2;
  blocking_task b3(g2, started2), b4(g2, started2);
  counting_task refused3;
  open_on_exit release2{g2};
  ASSERT_TRUE(pool.try_submit(&b3));
  ASSERT_TRUE(pool.try_submit(&b4));
  EXPECT_FALSE(pool.try_submit(&refused3));
  pool.wake(2);
  ASSERT_TRUE(started2.wait_for(2));
  g2.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 4; }));
  EXPECT_EQ(refused1.runs.load() + refused2.runs.load() + refused3.runs.load(), 0);
  EXPECT_EQ(pool.stats().threads, 2u);
}

TEST(ThreadPool, HandOffCachedStartsThreadsUpToMaxThenRefuses) {
  gate g;
  event_count started;
  blocking_task b1(g, started), b2(g, started);
  counting_task refused;
  thread_pool pool("handoff-cached", make(pool_kind::cached, 2, 0, 0));
  open_on_exit release{g};
  pool.start();
  EXPECT_EQ(pool.stats().threads, 0u);
  ASSERT_TRUE(pool.try_submit(&b1));  // no idle worker: a new thread takes it
  ASSERT_TRUE(pool.try_submit(&b2));
  EXPECT_FALSE(pool.try_submit(&refused));
  ASSERT_TRUE(started.wait_for(2));
  EXPECT_EQ(pool.stats().threads, 2u);
  EXPECT_EQ(pool.stats().largest, 2u);
  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 2; }));
  EXPECT_EQ(refused.runs.load(), 0);
}

// eager: threads before the queue; the queue only when all are busy at the maximum.
TEST(ThreadPool, EagerAddsThreadsBeforeQueueingAndShrinksAfterKeepAlive) {
  gate g;
  event_count started;
  std::vector<std::unique_ptr<blocking_task>> blockers;
  for (int i = 0; i < 4; ++i) blockers.push_back(std::make_unique<blocking_task>(g, started));
  std::vector<counting_task> queued(2);
  counting_task refused;
  thread_pool pool("eager", make(pool_kind::eager, 4, 1, 2, 30ms));
  open_on_exit release{g};
  pool.start();
  EXPECT_EQ(pool.stats().threads, 1u);

  for (auto& b : blockers) ASSERT_TRUE(submit(pool, *b));
  ASSERT_TRUE(started.wait_for(4));
  pool_stats s = pool.stats();
  EXPECT_EQ(s.threads, 4u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.active, 4u);
  for (auto& t : queued) ASSERT_TRUE(submit(pool, t));
  EXPECT_EQ(pool.stats().queued, 2u);
  EXPECT_FALSE(submit(pool, refused));
  EXPECT_EQ(pool.stats().threads, 4u);

  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 6; }));
  ASSERT_TRUE(eventually([&] { return pool.stats().threads == 1; })) << pool.describe();
  EXPECT_EQ(pool.stats().largest, 4u);
  // Still works after shrinking.
  counting_task after;
  ASSERT_TRUE(submit(pool, after));
  ASSERT_TRUE(eventually([&] { return after.runs.load() == 1; }));
}

// limited: Java order (queue first, then grow), and never shrinks.
TEST(ThreadPool, LimitedQueuesFirstThenGrowsAndNeverShrinks) {
  gate g;
  event_count started;
  blocking_task b1(g, started), b4(g, started), b5(g, started);
  counting_task q2, q3, refused;
  thread_pool pool("limited", make(pool_kind::limited, 3, 1, 2, 1ms));
  open_on_exit release{g};
  pool.start();
  EXPECT_EQ(pool.stats().threads, 1u);

  ASSERT_TRUE(submit(pool, b1));
  ASSERT_TRUE(started.wait_for(1));
  ASSERT_TRUE(submit(pool, q2));
  ASSERT_TRUE(submit(pool, q3));
  pool_stats s = pool.stats();
  EXPECT_EQ(s.threads, 1u);  // queued, not grown
  EXPECT_EQ(s.queued, 2u);
  ASSERT_TRUE(submit(pool, b4));  // queue full: grows
  ASSERT_TRUE(submit(pool, b5));
  ASSERT_TRUE(started.wait_for(3));
  EXPECT_FALSE(submit(pool, refused));
  s = pool.stats();
  EXPECT_EQ(s.threads, 3u);
  EXPECT_EQ(s.queued, 2u);
  EXPECT_EQ(s.active, 3u);

  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 5; }));
  std::this_thread::sleep_for(100ms);  // 100 x keep_alive, which limited ignores
  EXPECT_EQ(pool.stats().threads, 3u);
  EXPECT_EQ(refused.runs.load(), 0);
}

// cached: Java order too, and threads above core exit after keep_alive.
TEST(ThreadPool, CachedQueuesFirstThenGrowsAndShrinksAfterKeepAlive) {
  gate g;
  event_count started;
  blocking_task b1(g, started), b3(g, started), b4(g, started);
  counting_task q2, refused;
  thread_pool pool("cached", make(pool_kind::cached, 3, 1, 1, 20ms));
  open_on_exit release{g};
  pool.start();
  ASSERT_TRUE(submit(pool, b1));
  ASSERT_TRUE(started.wait_for(1));
  ASSERT_TRUE(submit(pool, q2));
  EXPECT_EQ(pool.stats().threads, 1u);
  ASSERT_TRUE(submit(pool, b3));
  ASSERT_TRUE(submit(pool, b4));
  ASSERT_TRUE(started.wait_for(3));
  EXPECT_FALSE(submit(pool, refused));
  EXPECT_EQ(pool.stats().threads, 3u);

  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 4; }));
  ASSERT_TRUE(eventually([&] { return pool.stats().threads == 1; })) << pool.describe();
  EXPECT_EQ(pool.stats().largest, 3u);

  // Grows again when needed, with a fresh slot for the new thread (the old one is joined).
  gate g2;
  event_count started2;
  blocking_task c1(g2, started2), c3(g2, started2);
  counting_task c2;
  open_on_exit release2{g2};
  ASSERT_TRUE(submit(pool, c1));
  ASSERT_TRUE(started2.wait_for(1));
  ASSERT_TRUE(submit(pool, c2));
  ASSERT_TRUE(submit(pool, c3));
  ASSERT_TRUE(started2.wait_for(2));
  EXPECT_EQ(pool.stats().threads, 2u);
  g2.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 7; }));
  EXPECT_EQ(refused.runs.load(), 0);
}

TEST(ThreadPool, UnboundedQueueAcceptsEverythingWhileBlockedAndRunsAll) {
  constexpr std::size_t n = 100'000;
  gate g;
  event_count started;
  blocking_task b(g, started);
  std::vector<counting_task> tasks(n);
  thread_pool pool("unbounded", make(pool_kind::fixed, 1, 0, -1));
  open_on_exit release{g};
  ::testing::internal::CaptureStderr();
  pool.start();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "ringrpc: pool 'unbounded' has an unbounded queue; memory is its only limit\n");

  ASSERT_TRUE(submit(pool, b));
  ASSERT_TRUE(started.wait_for(1));
  for (auto& t : tasks) ASSERT_TRUE(pool.try_submit(&t));
  pool.wake(1);
  EXPECT_EQ(pool.stats().queued, n);
  EXPECT_EQ(pool.stats().rejected, 0u);
  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == n + 1; }, 20s));
  for (auto& t : tasks) ASSERT_EQ(t.runs.load(), 1);
  EXPECT_EQ(pool.stats().queued, 0u);
}

// A pool of each kind, 4 producers; a refused task is retried until taken. Every task must run
// exactly once (a refused one that ran anyway would run twice), and the refusals the producers
// saw must be the pool's count.
struct stress_case {
  const char* name;
  pool_options options;
  int divisor = 1;  // hand-off parks and wakes a worker per task: fewer tasks keep it quick
};

class PoolStress : public ::testing::TestWithParam<stress_case> {};

TEST_P(PoolStress, EveryAcceptedTaskRunsExactlyOnce) {
  constexpr int producers = 4;
  const auto per = static_cast<std::size_t>(stress_per_producer / GetParam().divisor);
  std::vector<counting_task> tasks(producers * per);
  std::atomic<std::uint64_t> hooks{0};
  thread_pool pool(GetParam().name, GetParam().options,
                   [&] { hooks.fetch_add(1, std::memory_order_relaxed); });
  ::testing::internal::CaptureStderr();  // the unbounded case's warning
  pool.start();
  (void)::testing::internal::GetCapturedStderr();

  std::atomic<bool> done{false};
  std::thread observer([&] {  // stats and reports read while everything moves
    while (!done.load(std::memory_order_relaxed)) {
      const std::string d = pool.describe();
      const pool_stats s = pool.stats();
      EXPECT_LE(s.threads, s.max_threads);
      EXPECT_FALSE(d.empty());
      std::this_thread::sleep_for(200us);
    }
  });
  std::atomic<std::uint64_t> refusals{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::uint64_t refused_here = 0;
      for (std::size_t i = 0; i < per; ++i) {
        pool_task* t = &tasks[p * per + i];
        while (!pool.try_submit(t)) {
          ++refused_here;
          pool.wake(4);
          std::this_thread::yield();
        }
        if (i % 16 == 15) pool.wake(16);  // one wake per "turn" of 16
      }
      pool.wake(16);
      refusals.fetch_add(refused_here);
    });
  }
  for (auto& t : threads) t.join();
  const std::uint64_t total = producers * per;
  EXPECT_TRUE(eventually([&] { return pool.stats().completed == total; }, 30s)) << pool.describe();
  done.store(true);
  observer.join();
  pool.shutdown_and_join();
  std::size_t wrong = 0;
  for (auto& t : tasks) wrong += t.runs.load() != 1;
  EXPECT_EQ(wrong, 0u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.completed, total);
  EXPECT_EQ(s.rejected, refusals.load());
  EXPECT_EQ(s.threads, 0u);
  EXPECT_GE(hooks.load(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PoolStress,
    ::testing::Values(stress_case{"fixed", make(pool_kind::fixed, 2, 0, 64)},
                      stress_case{"fixed_handoff", make(pool_kind::fixed, 2, 0, 0), 5},
                      stress_case{"eager", make(pool_kind::eager, 3, 1, 16, 1ms)},
                      stress_case{"eager_core0", make(pool_kind::eager, 2, 0, 8, 1ms)},
                      stress_case{"cached_handoff", make(pool_kind::cached, 2, 0, 0, 1ms), 5},
                      stress_case{"cached_core0", make(pool_kind::cached, 2, 0, 5, 1ms), 2},
                      stress_case{"limited_unbounded", make(pool_kind::limited, 2, 1, -1)}),
    [](const ::testing::TestParamInfo<stress_case>& param_info) { return std::string(param_info.param.name); });

// Hand-off without retries: a refused task never runs, an accepted one runs once.
TEST(ThreadPool, HandOffStressRunsAcceptedOnlyOnce) {
  constexpr int producers = 4;
  const auto per = static_cast<std::size_t>(stress_per_producer / 5);
  std::vector<counting_task> tasks(producers * per);
  std::vector<std::unique_ptr<std::atomic<bool>>> accepted;
  for (std::size_t i = 0; i < tasks.size(); ++i) accepted.push_back(std::make_unique<std::atomic<bool>>(false));
  thread_pool pool("handoff-stress", make(pool_kind::fixed, 2, 0, 0));
  pool.start();
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (std::size_t i = 0; i < per; ++i) {
        const std::size_t k = p * per + i;
        if (pool.submit_now(&tasks[k])) accepted[k]->store(true);
        if (i % 64 == 0) std::this_thread::yield();
      }
    });
  }
  for (auto& t : threads) t.join();
  pool.shutdown_and_join();
  std::uint64_t n_accepted = 0;
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const bool a = accepted[k]->load();
    n_accepted += a;
    ASSERT_EQ(tasks[k].runs.load(), a ? 1 : 0) << "task " << k;
  }
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.completed, n_accepted);
  EXPECT_EQ(s.rejected, tasks.size() - n_accepted);
}

TEST(ThreadPool, RefusalsAreCountedAndReportedOncePerInterval) {
  gate g;
  event_count started;
  blocking_task b(g, started, "sleepy");
  counting_task queued, r1, r2, r3;
  std::mutex mu;
  std::vector<std::string> reports;
  auto sink = [&](std::string_view r) {
    std::lock_guard lock(mu);
    reports.emplace_back(r);
  };
  auto report_count = [&] {
    std::lock_guard lock(mu);
    return reports.size();
  };
  thread_pool pool("rep", make(pool_kind::fixed, 1, 0, 1), {}, sink, std::chrono::hours(1));
  open_on_exit release{g};
  pool.start();
  EXPECT_NE(pool.describe().find("pool 'rep' (fixed): 0/1 threads busy, 0/1 queued, 0 refused so far; busy: none"),
            std::string::npos)
      << pool.describe();

  ASSERT_TRUE(submit(pool, b));
  ASSERT_TRUE(started.wait_for(1));
  ASSERT_TRUE(submit(pool, queued));
  EXPECT_FALSE(submit(pool, r1));
  EXPECT_FALSE(submit(pool, r2));
  EXPECT_FALSE(submit(pool, r3));
  EXPECT_EQ(pool.stats().rejected, 3u);
  ASSERT_EQ(report_count(), 1u);  // once per interval, however many refusals
  {
    std::lock_guard lock(mu);
    const std::string& r = reports[0];
    EXPECT_EQ(r.rfind("pool 'rep' (fixed) refused work: 1/1 threads busy, 1/1 queued, 1 refused so far; busy: [0] sleepy ", 0), 0u) << r;
  }
  const std::string d = pool.describe();
  EXPECT_NE(d.find("3 refused so far; busy: [0] sleepy "), std::string::npos) << d;
  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 2; }));
  EXPECT_EQ(r1.runs.load() + r2.runs.load() + r3.runs.load(), 0);
}

TEST(ThreadPool, ReportAgainAfterTheIntervalHasPassed) {
  gate g;
  event_count started;
  blocking_task b(g, started, "echo");
  counting_task r1, r2, r3;
  std::atomic<int> reports{0};
  thread_pool pool("rep2", make(pool_kind::fixed, 1, 0, 0), {},
                   [&](std::string_view) { reports.fetch_add(1); }, 40ms);
  open_on_exit release{g};
  pool.start();
  ASSERT_TRUE(submit(pool, b));
  ASSERT_TRUE(started.wait_for(1));
  EXPECT_FALSE(submit(pool, r1));
  EXPECT_EQ(reports.load(), 1);
  std::this_thread::sleep_for(60ms);
  EXPECT_FALSE(submit(pool, r2));
  EXPECT_EQ(reports.load(), 2);
  g.open();
}

TEST(ThreadPool, ShutdownRunsWhatWasAcceptedAndRefusesAfterwards) {
  gate g;
  event_count started;
  blocking_task b(g, started);
  std::vector<counting_task> accepted(3);
  std::vector<counting_task> probes(4000);
  counting_task late;
  thread_pool pool("stop", make(pool_kind::fixed, 1, 0, 4096));
  open_on_exit release{g};
  pool.start();
  ASSERT_TRUE(submit(pool, b));
  ASSERT_TRUE(started.wait_for(1));
  for (auto& t : accepted) ASSERT_TRUE(submit(pool, t));

  std::thread stopper([&] { pool.shutdown_and_join(); });
  // Submit until the pool refuses: from then on it is closed (the queue has room, so it is not
  // a saturation refusal, and such refusals are not counted).
  std::size_t probes_accepted = 0;
  while (probes_accepted < probes.size() && pool.try_submit(&probes[probes_accepted])) {
    ++probes_accepted;
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_LT(probes_accepted, probes.size());
  EXPECT_EQ(pool.stats().rejected, 0u);
  g.open();
  stopper.join();
  EXPECT_EQ(b.runs.load(), 1);
  for (auto& t : accepted) EXPECT_EQ(t.runs.load(), 1);
  for (std::size_t i = 0; i < probes.size(); ++i) {
    EXPECT_EQ(probes[i].runs.load(), i < probes_accepted ? 1 : 0) << i;
  }
  EXPECT_FALSE(pool.submit_now(&late));
  pool.shutdown_and_join();  // idempotent
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.threads, 0u);
  EXPECT_EQ(s.completed, 4 + probes_accepted);
  EXPECT_EQ(late.runs.load(), 0);
  EXPECT_THROW(pool.start(), std::logic_error);
}

// Submitters racing with shutdown_and_join(): whatever was accepted runs exactly once, whatever
// was refused never runs. 70 threads, so some use the shared-counter path (the per-thread
// announcement flags cover the first 64 submitting threads of the process).
TEST(ThreadPool, ShutdownRacingSubmittersLosesNothing) {
  constexpr int producers = 70;
  constexpr std::size_t per = 300;
  std::vector<counting_task> tasks(producers * per);
  std::vector<std::size_t> accepted(producers, 0);
  thread_pool pool("race", make(pool_kind::fixed, 2, 0, 1 << 16));
  pool.start();
  std::atomic<int> running{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      running.fetch_add(1);
      std::size_t i = 0;
      while (i < per && pool.submit_now(&tasks[p * per + i])) {
        ++i;
        if (i % 8 == 0) std::this_thread::yield();
      }
      accepted[p] = i;
    });
  }
  ASSERT_TRUE(eventually([&] { return running.load() == producers; }));
  pool.shutdown_and_join();
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  for (int p = 0; p < producers; ++p) {
    for (std::size_t i = 0; i < per; ++i) {
      ASSERT_EQ(tasks[p * per + i].runs.load(), i < accepted[p] ? 1 : 0) << p << "/" << i;
    }
    total += accepted[p];
  }
  EXPECT_EQ(pool.stats().completed, total);
  EXPECT_EQ(pool.stats().rejected, 0u);
}

TEST(ThreadPool, ShutdownJoinsThreadsThatExitedByKeepAlive) {
  gate g;
  event_count started;
  blocking_task b1(g, started), b2(g, started);
  thread_pool pool("ka", make(pool_kind::cached, 2, 0, 0, 5ms));
  open_on_exit release{g};
  pool.start();
  ASSERT_TRUE(submit(pool, b1));
  ASSERT_TRUE(submit(pool, b2));
  ASSERT_TRUE(started.wait_for(2));
  g.open();
  ASSERT_TRUE(eventually([&] { return pool.stats().threads == 0; }));
  pool.shutdown_and_join();  // joins the two exited threads (a leak checker would see them)
  EXPECT_EQ(pool.stats().completed, 2u);
}

TEST(ThreadPool, BurstHookRunsOnTheWorkerEvery32TasksAndAtTheEndOfABurst) {
  gate g;
  event_count started;
  blocking_task b(g, started);
  std::vector<counting_task> tasks(100);
  std::atomic<int> hooks{0};
  std::atomic<bool> hook_on_test_thread{false};
  const auto test_thread = std::this_thread::get_id();
  thread_pool pool("hook", make(pool_kind::fixed, 1, 0, 256), [&] {
    if (std::this_thread::get_id() == test_thread) hook_on_test_thread.store(true);
    hooks.fetch_add(1);
  });
  open_on_exit release{g};
  pool.start();
  ASSERT_TRUE(submit(pool, b));
  ASSERT_TRUE(started.wait_for(1));
  for (auto& t : tasks) ASSERT_TRUE(pool.try_submit(&t));
  EXPECT_EQ(hooks.load(), 0);
  g.open();
  // One burst of 101 tasks: the hook runs after the 32nd, 64th and 96th, and at its end: 4 calls
  // while the tasks are quick. A batch that took longer than 32 slow tasks (the worker waited
  // for the gate, or was preempted on a busy machine) switches the worker to a hook after every
  // task (pool_worker.cpp), so the count is 4 at least and 101 at most, never 0 or more.
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 101u; }));
  ASSERT_TRUE(eventually([&] { return hooks.load() >= 4; }));
  const int after_burst = hooks.load();
  EXPECT_LE(after_burst, 101);
  EXPECT_FALSE(hook_on_test_thread.load());
  // A burst of one, far from 32 tasks: the hook still runs at its end. (At least one more call:
  // in the every-task mode the burst's last hook may land after `after_burst` was read.)
  counting_task one;
  ASSERT_TRUE(submit(pool, one));
  ASSERT_TRUE(eventually([&] { return pool.stats().completed == 102u && hooks.load() >= after_burst + 1; }));
}

}  // namespace

// --- fair share: work beyond a caller's share waits behind the rest -----------------------------

// Records the order tasks ran in.
struct ordered_task : pool_task {
  std::vector<std::string>* order = nullptr;
  std::mutex* mu = nullptr;
  std::string name;
  ordered_task(std::vector<std::string>& o, std::mutex& m, std::string n, bool over) : order(&o), mu(&m), name(std::move(n)) {
    run = &run_fn;
    label = "ordered";
    over_share = over;
  }
  static void run_fn(pool_task* p) noexcept {
    auto* t = static_cast<ordered_task*>(p);
    std::lock_guard lock(*t->mu);
    t->order->push_back(t->name);
  }
};

// One worker held at a gate; eight tasks of a greedy caller (over its share) queue first, then
// four of polite callers. Once the gate opens, the polite ones run ahead of the backlog: each
// ring keeps its own order, and at most one over-share task runs per three others while both
// wait. (The old single FIFO ran all eight greedy tasks first.)
TEST(ThreadPoolFairShare, WorkWithinItsShareRunsAheadOfABacklog) {
  gate g;
  event_count started;
  thread_pool pool("fair", make(pool_kind::fixed, 1, 0, 64));
  open_on_exit guard{g};
  pool.start();
  blocking_task blocker(g, started);
  ASSERT_TRUE(submit(pool, blocker));
  ASSERT_TRUE(started.wait_for(1));
  std::vector<std::string> order;
  std::mutex mu;
  std::vector<std::unique_ptr<ordered_task>> tasks;
  // Names appended, not `"G" + std::to_string(i)`: GCC 12 -O3 warns falsely (-Wrestrict).
  auto name = [](char kind, int i) { return std::string(1, kind).append(std::to_string(i)); };
  for (int i = 1; i <= 8; ++i) tasks.push_back(std::make_unique<ordered_task>(order, mu, name('G', i), true));
  for (int i = 1; i <= 4; ++i) tasks.push_back(std::make_unique<ordered_task>(order, mu, name('P', i), false));
  for (auto& t : tasks) ASSERT_TRUE(pool.try_submit(t.get()));
  EXPECT_EQ(pool.stats().queued, 12u);
  g.open();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 12;
  }));
  std::lock_guard lock(mu);
  std::vector<std::string> greedy, polite;
  std::size_t last_polite = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i][0] == 'P') {
      polite.push_back(order[i]);
      last_polite = i;
    } else {
      greedy.push_back(order[i]);
    }
  }
  EXPECT_EQ(polite, (std::vector<std::string>{"P1", "P2", "P3", "P4"}));
  EXPECT_EQ(greedy, (std::vector<std::string>{"G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8"}));
  // Four polite tasks and at most one greedy one per pop in four: all polite within 6 runs.
  EXPECT_LE(last_polite, 5u) << "order: " << ::testing::PrintToString(order);
}

// The backlog's queue is bounded like the main one, and full backlogs never take the slots of
// work within its share.
TEST(ThreadPoolFairShare, OverShareQueueIsBoundedApart) {
  gate g;
  event_count started;
  thread_pool pool("fair", make(pool_kind::fixed, 1, 0, 4));
  open_on_exit guard{g};
  pool.start();
  blocking_task blocker(g, started);
  ASSERT_TRUE(submit(pool, blocker));
  ASSERT_TRUE(started.wait_for(1));
  std::vector<std::string> order;
  std::mutex mu;
  std::vector<std::unique_ptr<ordered_task>> greedy, polite;
  for (int i = 0; i < 5; ++i) greedy.push_back(std::make_unique<ordered_task>(order, mu, "G", true));
  for (int i = 0; i < 5; ++i) polite.push_back(std::make_unique<ordered_task>(order, mu, "P", false));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(pool.try_submit(greedy[i].get())) << i;
  EXPECT_FALSE(pool.try_submit(greedy[4].get())) << "the over-share queue holds 4";
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(pool.try_submit(polite[i].get())) << i;
  EXPECT_FALSE(pool.try_submit(polite[4].get())) << "the main queue holds 4";
  g.open();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 8;
  }));
}

// --- fair share by cost: a slow backlog gets its share of the workers' time, not of their pops --

// Work of a caller whose recent calls are slow (cost hint 100 ms) or cheap (0): a slow one takes
// `busy` of a worker's time (a sleep: the test asserts the order it causes, never how long
// anything took), then records its name (its last touch of the task: the test may free it).
struct costed_task : ordered_task {
  std::chrono::milliseconds busy{0};
  costed_task(std::vector<std::string>& o, std::mutex& m, std::string n, bool over,
              const std::atomic<std::uint16_t>* hint, std::chrono::milliseconds b)
      : ordered_task(o, m, std::move(n), over), busy(b) {
    run = &run_costed;
    cost_hint = hint;
  }
  static void run_costed(pool_task* p) noexcept {
    auto* t = static_cast<costed_task*>(p);
    if (t->busy.count() > 0) std::this_thread::sleep_for(t->busy);
    run_fn(p);
  }
};

const std::atomic<std::uint16_t> slow_caller{1'000};  // 100 ms per call, in cost ticks
const std::atomic<std::uint16_t> cheap_caller{0};

std::size_t runs_before(const std::vector<std::string>& order, char kind, std::size_t end) {
  return static_cast<std::size_t>(std::count_if(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(end),
                                                [&](const std::string& n) { return n[0] == kind; }));
}

// One worker held at a gate; a slow caller's backlog (four 60 ms tasks, over its share) queues
// first, then a cheap caller's backlog (four, over its share), then eight tasks within their
// share. Counting pops, every fourth would be slow: two slow tasks before the last quick one.
// By cost, one slow task may go ahead; it makes the worker owe three times its time (180 ms)
// to the rest, so the others all run before the second, and the cheap backlog overtakes the
// slow one it queued behind. The slow tasks still all run, in their order. (A busy machine
// only makes the slow tasks longer; the quick ones would have to be held up 180 ms in all.)
TEST(ThreadPoolFairShare, ASlowBacklogGetsItsShareOfTimeNotOfPops) {
  gate g;
  event_count started;
  std::vector<std::string> order;
  std::mutex mu;
  std::vector<std::unique_ptr<costed_task>> tasks;  // before the pool: they outlive its workers
  blocking_task blocker(g, started);
  thread_pool pool("fair", make(pool_kind::fixed, 1, 0, 64));
  open_on_exit guard{g};
  pool.start();
  ASSERT_TRUE(submit(pool, blocker));
  ASSERT_TRUE(started.wait_for(1));
  auto name = [](char kind, int i) { return std::string(1, kind).append(std::to_string(i)); };
  for (int i = 1; i <= 4; ++i) tasks.push_back(std::make_unique<costed_task>(order, mu, name('S', i), true, &slow_caller, 60ms));
  for (int i = 1; i <= 4; ++i) tasks.push_back(std::make_unique<costed_task>(order, mu, name('C', i), true, &cheap_caller, 0ms));
  for (int i = 1; i <= 8; ++i) tasks.push_back(std::make_unique<costed_task>(order, mu, name('P', i), false, nullptr, 0ms));
  for (auto& t : tasks) ASSERT_TRUE(pool.try_submit(t.get()));
  EXPECT_EQ(pool.stats().queued, 16u);
  g.open();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 16;
  }));
  std::lock_guard lock(mu);
  std::vector<std::string> slow;
  std::size_t last_quick = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i][0] == 'S') slow.push_back(order[i]); else last_quick = i;
  }
  EXPECT_EQ(slow, (std::vector<std::string>{"S1", "S2", "S3", "S4"}));
  EXPECT_LE(runs_before(order, 'S', last_quick), 1u) << "order: " << ::testing::PrintToString(order);
  EXPECT_EQ(pool.stats().queued, 0u);
}

// Two workers and a backlog of slow work only: it runs, but on one worker at a time (all but
// one, at least one), so work that arrives while a slow task holds a worker finds the other
// one free. (Counting pops, both workers took slow tasks and the quick one waited for them.)
TEST(ThreadPoolFairShare, ASlowBacklogNeverHoldsEveryWorker) {
  struct quick_task : pool_task {
    event_count* done;
    explicit quick_task(event_count& d) : done(&d) {
      run = [](pool_task* p) noexcept { static_cast<quick_task*>(p)->done->post(); };
      label = "quick";
    }
  };
  gate g;
  event_count started, quick_done;
  std::vector<std::unique_ptr<blocking_task>> slow;  // before the pool: they outlive its workers
  quick_task quick(quick_done);
  thread_pool pool("fair", make(pool_kind::fixed, 2, 0, 64));
  open_on_exit guard{g};
  pool.start();
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<blocking_task>(g, started, "slow"));
    slow.back()->over_share = true;
    slow.back()->cost_hint = &slow_caller;
    ASSERT_TRUE(submit(pool, *slow.back()));
  }
  pool.wake(2);
  ASSERT_TRUE(started.wait_for(1));
  ASSERT_TRUE(submit(pool, quick));
  EXPECT_TRUE(quick_done.wait_for(1)) << "a quick task waited behind a slow backlog on every worker";
  EXPECT_EQ(started.count(), 1) << "slow tasks ran on both workers";
  g.open();
  ASSERT_TRUE(started.wait_for(3));
  for (auto& t : slow) ASSERT_TRUE(eventually([&] { return t->runs.load() == 1; }));
}

TEST(HeavyBudget, HeavyWorkMakesTheWorkerOweThreeTimesItsTime) {
  constexpr std::int64_t ms = 1'000'000;
  heavy_budget b(4);
  EXPECT_TRUE(b.may_go_ahead());
  b.started(1000 * ms, true);
  EXPECT_FALSE(b.may_go_ahead()) << "a heavy task not yet settled";
  b.started(1010 * ms, false);  // the heavy one took 10 ms
  EXPECT_EQ(b.owed_ns(), 30 * ms);
  EXPECT_FALSE(b.may_go_ahead());
  b.stopped(1030 * ms);  // 20 ms of other work
  EXPECT_EQ(b.owed_ns(), 10 * ms);
  b.started(2000 * ms, false);  // idle time in between pays nothing
  EXPECT_EQ(b.owed_ns(), 10 * ms);
  b.started(2015 * ms, false);
  EXPECT_EQ(b.owed_ns(), 0);
  EXPECT_TRUE(b.may_go_ahead());
  // A clock that steps back charges nothing; a call of hours owes at most the cap.
  b.started(2010 * ms, true);
  b.stopped(2000 * ms);
  EXPECT_EQ(b.owed_ns(), 0);
  b.started(3000 * ms, true);
  b.stopped(3000 * ms + 3'600'000 * ms);
  EXPECT_EQ(b.owed_ns(), heavy_budget::max_owed_ns);
}

namespace {

// Records the name of the worker that runs it, then waits at the gate (so each of a pool's
// workers runs exactly one).
struct naming_task : pool_task {
  gate* g = nullptr;
  event_count* started = nullptr;
  std::mutex* mu = nullptr;
  std::set<std::string>* names = nullptr;
  naming_task() { run = &run_fn; }
  static void run_fn(pool_task* p) noexcept {
    auto* t = static_cast<naming_task*>(p);
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    {
      std::lock_guard lock(*t->mu);
      t->names->insert(buf);
    }
    t->started->post();
    t->g->wait();
  }
};

std::set<std::string> worker_names(const std::string& pool_name, unsigned threads) {
  gate g;
  event_count started;
  std::mutex mu;
  std::set<std::string> names;
  std::vector<naming_task> tasks(threads);
  {
    thread_pool pool(pool_name, make(pool_kind::fixed, threads, 0, static_cast<int>(threads)));
    open_on_exit opener{g};
    pool.start();
    for (auto& t : tasks) {
      t.g = &g;
      t.started = &started;
      t.mu = &mu;
      t.names = &names;
      EXPECT_TRUE(submit(pool, t));
    }
    EXPECT_TRUE(started.wait_for(static_cast<int>(threads)));
  }
  return names;
}

}  // namespace

TEST(ThreadPool, WorkersAreNamedByPoolWithinFifteenBytes) {
  EXPECT_EQ(worker_names("default", 3), (std::set<std::string>{"rr-default/0", "rr-default/1", "rr-default/2"}));
  EXPECT_EQ(worker_names("conn-events", 1), (std::set<std::string>{"rr-conn-events"}));
  // Too long: the pool name is cut, the prefix and the index stay, so names stay distinct.
  const auto names = worker_names("a-very-long-pool-name", 12);
  EXPECT_EQ(names.size(), 12u);
  EXPECT_TRUE(names.contains("rr-a-very-lon/3"));
  EXPECT_TRUE(names.contains("rr-a-very-lo/11"));
  for (const auto& n : names) {
    EXPECT_LE(n.size(), 15u) << n;
    EXPECT_EQ(n.rfind("rr-a-very-lo", 0), 0u) << n;
  }
}

// submit_singleton (connection-event lanes, serial drains holding events): accepted whatever
// the queue holds, outside its capacity, not counted as a refusal, served ahead of the queue;
// refused only by a pool that is not running.
TEST(ThreadPool, SingletonsAreNeverRefusedAndTakeNoQueueSlot) {
  gate g;
  event_count started;
  std::vector<std::string> order;
  std::mutex mu;
  ordered_task queued(order, mu, "queued", false), refused(order, mu, "refused", false);
  ordered_task single1(order, mu, "single1", false), single2(order, mu, "single2", false);
  thread_pool pool("single", make(pool_kind::fixed, 1, 0, 1));
  EXPECT_FALSE(pool.submit_singleton(&single1));  // not started
  open_on_exit guard{g};
  pool.start();
  blocking_task blocker(g, started);
  ASSERT_TRUE(submit(pool, blocker));
  ASSERT_TRUE(started.wait_for(1));
  ASSERT_TRUE(pool.try_submit(&queued));
  EXPECT_FALSE(pool.try_submit(&refused));  // the queue is full
  EXPECT_TRUE(pool.submit_singleton(&single1));
  EXPECT_TRUE(pool.submit_singleton(&single2));
  EXPECT_FALSE(pool.try_submit(&refused));  // and the singletons took no slot from it
  EXPECT_EQ(pool.stats().queued, 3u);
  EXPECT_EQ(pool.stats().rejected, 2u);
  EXPECT_EQ(pool.run_queued_here(), 1u);  // the queue only: singletons wait for a worker
  g.open();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 3;
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"queued", "single1", "single2"}));
  pool.shutdown_and_join();
  EXPECT_FALSE(pool.submit_singleton(&single1));  // shut down
}

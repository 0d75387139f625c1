// ringrpc::task<T> (include/ringrpc/task.hpp) and the coroutine frame pool
// (src/base/frame_pool.cpp): laziness, values, exceptions, symmetric transfer, detached
// starts, no heap allocation once warm, and frames freed on another thread than their own.

#include "ringrpc/task.hpp"

#include "base/frame_pool.hpp"
#include "replace_global_new.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <coroutine>
#include <cstdlib>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <thread>
#include <vector>

// --- allocation probe: counts global operator new calls while switched on -----------------------
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_news{0};

void* counted_alloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

// Every allocation of this program (replace_global_new.hpp).
void* test_alloc(std::size_t n) { return counted_alloc(n); }

namespace {

using ringrpc::task;
using ringrpc::task_outcome;

task<int> value_of(int v) { co_return v; }
task<void> nothing() { co_return; }
task<int> throws() {
  throw std::runtime_error("boom");
  co_return 0;
}

task<int> sum_chain(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await sum_chain(depth - 1);
}

// Awaits `n` tasks one after the other, each completing synchronously.
task<long> many_awaits(int n) {
  long total = 0;
  for (int i = 0; i < n; ++i) total += co_await value_of(i);
  co_return total;
}

template <class T>
std::optional<T> run_sync(task<T> t) {
  std::optional<T> out;
  ringrpc::start_detached(std::move(t), [&](task_outcome<T>& o) { out = o.value(); });
  return out;
}

TEST(Task, LazyUntilAwaited) {
  bool ran = false;
  auto body = [&]() -> task<void> {
    ran = true;
    co_return;
  };
  task<void> t = body();
  EXPECT_FALSE(ran);
  ringrpc::start_detached(std::move(t), [](task_outcome<void>& o) { EXPECT_TRUE(o.ok()); });
  EXPECT_TRUE(ran);
}

TEST(Task, ValuesAndVoid) {
  EXPECT_EQ(run_sync(value_of(7)), 7);
  bool done = false;
  ringrpc::start_detached(nothing(), [&](task_outcome<void>& o) {
    EXPECT_TRUE(o.ok());
    done = true;
  });
  EXPECT_TRUE(done);
  auto strings = []() -> task<std::string> { co_return std::string(100, 'x'); };
  EXPECT_EQ(run_sync(strings())->size(), 100u);
}

TEST(Task, ExceptionReachesTheAwaiter) {
  auto outer = []() -> task<std::string> {
    try {
      co_await throws();
    } catch (const std::runtime_error& e) {
      co_return std::string("caught ") + e.what();
    }
    co_return "not caught";
  };
  EXPECT_EQ(run_sync(outer()), "caught boom");

  std::exception_ptr seen;
  ringrpc::start_detached(throws(), [&](task_outcome<int>& o) {
    EXPECT_FALSE(o.ok());
    seen = o.exception();
  });
  ASSERT_TRUE(seen);
  EXPECT_THROW(std::rethrow_exception(seen), std::runtime_error);
}

TEST(Task, AwaitingANamedTask) {
  auto outer = []() -> task<int> {
    task<int> named = value_of(20);
    int v = co_await named;  // an lvalue: the task keeps its frame until it goes out of scope
    task<int> empty;
    try {
      co_await empty;
    } catch (const std::invalid_argument&) {
      v += 1;
    }
    co_return v + co_await value_of(1);
  };
  EXPECT_EQ(run_sync(outer()), 22);
}

TEST(Task, SymmetricTransferKeepsTheStackFlat) {
  // A million nested synchronous completions: without symmetric transfer each level would
  // take stack frames for resume() and overflow long before. Sanitized and unoptimised builds
  // need not make the transfer a tail call: they check the chain only.
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  constexpr int depth = 1'000'000;
#else
  constexpr int depth = 1'000;
#endif
  EXPECT_EQ(run_sync(sum_chain(depth)), depth);
}

TEST(Task, UnstartedTaskIsDestroyedWithItsFrame) {
  const auto before = ringrpc::detail::this_thread_frame_pool().live;
  {
    task<int> t = value_of(1);
    EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().live, before + 1);
    task<int> moved = std::move(t);
    EXPECT_FALSE(t);
    EXPECT_TRUE(moved);
  }
  EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().live, before);
  EXPECT_THROW(ringrpc::start_detached(task<int>{}, [](task_outcome<int>&) {}), std::invalid_argument);
}

TEST(Task, NoHeapAllocationOnceWarm) {
  RINGRPC_SKIP_UNLESS_NEW_REPLACED();
  // Warm the pool: every size class these frames use has a frame cached afterwards.
  ASSERT_EQ(run_sync(many_awaits(10)), 45);
  const auto heap_before = ringrpc::detail::this_thread_frame_pool().heap_allocs;
  g_news.store(0);
  g_counting.store(true);
  long total = 0;
  for (int round = 0; round < 100; ++round) {
    ringrpc::start_detached(many_awaits(1000), [&](task_outcome<long>& o) { total += o.value(); });
  }
  g_counting.store(false);
  EXPECT_EQ(total, 100L * 499'500L);
  // 100 detached runs of 1001 frames each (and a runner each): not one global operator new.
  EXPECT_EQ(g_news.load(), 0u);
  EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().heap_allocs, heap_before);
  EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().live, 0u);
}

TEST(Task, FramesFreedElsewhereComeHome) {
  // Frames made here, destroyed on another thread, come back to this thread's lists: the next
  // round allocates nothing from the heap.
  constexpr int n = 64;
  for (int round = 0; round < 3; ++round) {
    std::vector<task<int>> made;
    for (int i = 0; i < n; ++i) made.push_back(value_of(i));
    EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().live, static_cast<std::uint64_t>(n));
    const auto heap_before = ringrpc::detail::this_thread_frame_pool().heap_allocs;
    std::thread([&] { made.clear(); }).join();
    EXPECT_EQ(ringrpc::detail::this_thread_frame_pool().live, 0u);
    if (round > 0) {
      EXPECT_EQ(heap_before, ringrpc::detail::this_thread_frame_pool().heap_allocs);
    }
  }
}

TEST(Task, FramesOutliveTheirThread) {
  // The allocating thread exits with frames alive; they are freed later elsewhere (ASan / LSan
  // would see a leak or a use after free of the thread's lists).
  std::vector<task<int>> made;
  std::thread([&] {
    for (int i = 0; i < 16; ++i) made.push_back(value_of(i));
  }).join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(run_sync(std::move(made[i])), i);
  made.clear();
}

// A thread_local destroyed after the thread's frame cache (made before the cache was first
// used) makes a frame: it comes from the heap, owned by no cache. Before, a new cache was made
// for the exiting thread and never freed (here: it counted the frame as live).
struct makes_a_frame_at_exit {
  std::atomic<std::uint64_t>* live_seen = nullptr;
  ~makes_a_frame_at_exit() {
    if (live_seen == nullptr) return;
    task<int> late = value_of(7);
    live_seen->store(ringrpc::detail::this_thread_frame_pool().live);
  }
};

TEST(Task, AFrameMadeAfterTheThreadsCacheWentUsesTheHeap) {
  std::atomic<std::uint64_t> live_seen{~std::uint64_t{0}};
  std::thread([&] {
    thread_local makes_a_frame_at_exit at_exit;  // registered before the cache: destroyed after
    at_exit.live_seen = &live_seen;
    EXPECT_EQ(run_sync(value_of(1)), 1);  // the cache, made now
  }).join();
  EXPECT_EQ(live_seen.load(), 0u);
}

TEST(TaskConcurrency, FramesPingPongBetweenThreads) {
  // Two threads make frames and hand them to each other to destroy, for a while: the return
  // stacks are pushed by one thread while their owner takes them (TSan checks the hand-off).
  constexpr int rounds = 2000;
  std::atomic<task<int>*> slot_a{nullptr}, slot_b{nullptr};
  auto side = [](std::atomic<task<int>*>& mine, std::atomic<task<int>*>& theirs) {
    for (int i = 0; i < rounds; ++i) {
      auto* t = new task<int>(value_of(i));
      while (mine.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
      mine.store(t, std::memory_order_release);
      task<int>* other = nullptr;
      while ((other = theirs.exchange(nullptr, std::memory_order_acq_rel)) == nullptr) std::this_thread::yield();
      delete other;
    }
  };
  std::thread a([&] { side(slot_a, slot_b); });
  std::thread b([&] { side(slot_b, slot_a); });
  a.join();
  b.join();
  EXPECT_EQ(slot_a.load(), nullptr);
  EXPECT_EQ(slot_b.load(), nullptr);
}

task<std::pair<int, std::string>> braced() { co_return {7, "seven"}; }

// co_return of a braced list; a task awaited twice throws rather than yield a moved-from value;
// start_detached refuses a task that has run.
TEST(Task, BracedReturnsSecondAwaitsAndStartedTasks) {
  auto pair_of = run_sync(braced());
  ASSERT_TRUE(pair_of);
  EXPECT_EQ(pair_of->first, 7);
  EXPECT_EQ(pair_of->second, "seven");

  bool threw = false;
  auto twice = [&]() -> task<void> {
    task<std::string> t = [](std::string s) -> task<std::string> { co_return s; }("a string too long for SSO");
    EXPECT_EQ(co_await t, "a string too long for SSO");
    try {
      (void)co_await t;
    } catch (const std::logic_error&) {
      threw = true;
    }
  };
  ASSERT_TRUE(run_sync([&]() -> task<int> {
    co_await twice();
    co_return 0;
  }()));
  EXPECT_TRUE(threw);

  task<int> done = value_of(1);
  auto awaits = [&]() -> task<int> { co_return co_await done; };
  EXPECT_EQ(run_sync(awaits()), 1);
  EXPECT_TRUE(done.started());
  EXPECT_THROW(ringrpc::start_detached(std::move(done), [](task_outcome<int>&) {}), std::invalid_argument);
}

// A coroutine of a type of its own that awaits a task, so that the test can destroy it while
// the task is suspended.
struct driver {
  struct promise_type {
    driver get_return_object() { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_always final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept {}
  };
  std::coroutine_handle<promise_type> h;
};

ringrpc::task<void> waits_forever() { co_await std::suspend_always{}; }
driver drive() { co_await waits_forever(); }

TEST(TaskDeathTest, DestroyingASuspendedTaskTerminates) {
  // Whatever the task awaits would resume it into freed memory: the destruction stops the
  // program instead.
  EXPECT_DEATH(
      {
        driver d = drive();
        d.h.destroy();
      },
      "");
}

}  // namespace

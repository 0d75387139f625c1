// Thread-pool submit+run throughput: ringrpc::detail::thread_pool against the loop it replaces.
//
// What is compared: tasks/s moved from one submitting thread (the benchmark thread, standing in
// for a reader ring) to worker threads, each task a call through a function pointer that bumps a
// counter. The submitter works in turns of 64 submissions followed by one wake(), as a reader
// does; on a refusal (queue full) it wakes a worker and yields, then retries.
//   baseline      the server's former hand-off: mpmc_queue<pool_task*> (1024) + parking, one
//                 worker running server_core::handler_loop's shape (pop loop, hook every 32 and
//                 at the end of a burst, prepare_wait / re-check / park)
//   fixed/1       thread_pool, fixed, 1 thread, queue 1024
//   eager/2       thread_pool, eager, core 1, max 2, queue 1024
// Both the baseline and the pools call the same burst hook (a std::function bumping a counter).
//
// The same task object is submitted again and again: with a bounded queue the pool never writes
// to a task (only the unbounded overflow uses pool_task::next), so that is safe here.

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "base/mpmc_queue.hpp"
#include "base/parking.hpp"
#include "exec/worker_pool.hpp"

namespace {

using ringrpc::pool_kind;
using ringrpc::pool_options;
using ringrpc::detail::mpmc_queue;
using ringrpc::detail::parking;
using ringrpc::detail::pool_task;
using ringrpc::detail::thread_pool;

constexpr int turn = 64;

std::atomic<std::uint64_t> g_done{0};
std::atomic<std::uint64_t> g_hooks{0};

struct bench_task : pool_task {
  bench_task() {
    run = [](pool_task*) noexcept { g_done.fetch_add(1, std::memory_order_relaxed); };
    label = "bench";
  }
};

void hook() { g_hooks.fetch_add(1, std::memory_order_relaxed); }

void wait_done(std::uint64_t n) {
  while (g_done.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

// The former server loop, reduced to its hand-off.
class baseline {
 public:
  explicit baseline(std::function<void()> after_burst) : _hook(std::move(after_burst)) {
    _worker = std::thread([this] { loop(); });
  }
  ~baseline() {
    _stop.store(true, std::memory_order_release);
    _park.wake_all();
    _worker.join();
  }
  bool try_submit(pool_task* t) noexcept { return _queue.try_push(t); }
  void wake(int n) noexcept { _park.wake(n); }

 private:
  void loop() {
    for (;;) {
      pool_task* t = nullptr;
      unsigned batch = 0;
      while (_queue.try_pop(t)) {
        t->run(t);
        _executed.store(_executed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (++batch == 32) {
          _hook();
          batch = 0;
        }
      }
      if (batch != 0) _hook();
      const auto epoch = _park.prepare_wait();
      if (!_queue.empty_approx()) {
        _park.cancel_wait();
        continue;
      }
      if (_stop.load(std::memory_order_acquire)) {
        _park.cancel_wait();
        return;
      }
      _park.wait(epoch);
    }
  }

  mpmc_queue<pool_task*> _queue{1024};
  parking _park;
  std::function<void()> _hook;
  std::atomic<bool> _stop{false};
  std::atomic<std::uint64_t> _executed{0};
  std::thread _worker;
};

template <class Pool>
void drive(benchmark::State& state, Pool& pool) {
  bench_task task;
  g_done.store(0);
  std::uint64_t submitted = 0;
  std::uint64_t refused = 0;
  for (auto _ : state) {
    for (int i = 0; i < turn; ++i) {
      while (!pool.try_submit(&task)) {
        ++refused;
        pool.wake(1);
        std::this_thread::yield();
      }
    }
    submitted += turn;
    pool.wake(1);
  }
  wait_done(submitted);
  state.SetItemsProcessed(static_cast<std::int64_t>(submitted));
  state.counters["refused/task"] =
      benchmark::Counter(static_cast<double>(refused) / static_cast<double>(submitted));
}

void BM_baseline_mpmc_parking(benchmark::State& state) {
  baseline pool(hook);
  drive(state, pool);
}

void BM_pool(benchmark::State& state, pool_options options) {
  thread_pool pool("bench", options, hook);
  pool.start();
  drive(state, pool);
}

pool_options fixed1() {
  pool_options o;
  o.kind = pool_kind::fixed;
  o.threads = 1;
  o.queue = 1024;
  return o;
}

pool_options eager2() {
  pool_options o;
  o.kind = pool_kind::eager;
  o.threads = 2;
  o.core_threads = 1;
  o.queue = 1024;
  return o;
}

BENCHMARK(BM_baseline_mpmc_parking)->UseRealTime();
BENCHMARK_CAPTURE(BM_pool, fixed_1, fixed1())->UseRealTime();
BENCHMARK_CAPTURE(BM_pool, eager_2, eager2())->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

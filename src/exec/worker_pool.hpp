#pragma once
// The engine behind ringrpc/thread_pool.hpp: a named pool of worker threads running intrusive
// tasks, in four kinds (fixed, cached, limited, eager). Submission never blocks and never
// allocates: it either takes the task or refuses it at once, so the I/O thread can answer
// SERVER_BUSY immediately. Implemented in src/exec/pool_*.cpp (see worker_pool_impl.hpp).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ringrpc/thread_pool.hpp"
#include "exec/coro_home.hpp"

namespace ringrpc::detail {

/// Work for a pool. Embedded in the object it runs (a call, an inbox, an event), so submitting
/// allocates nothing. `run` is called exactly once per accepted submission, on a worker thread.
struct pool_task {
  void (*run)(pool_task* self) noexcept = nullptr;
  /// What the overload report shows while this task runs (e.g. the method name). Must stay
  /// valid until `run` returns; the pool copies the view, not the bytes.
  /// Moreover describe() (another thread) may read the bytes while the task runs and a little
  /// after `run` returns, so they must outlive the pool: use names owned by the server (method
  /// or endpoint names), never bytes owned by the task itself.
  std::string_view label;
  pool_task* next = nullptr;  // the pool's own link (unbounded overflow); do not touch
  /// Set by the submitter for work of a caller beyond its fair share: a bounded pool queues it
  /// apart and serves it one pop in four, or when nothing else waits (docs/execution.md).
  bool over_share = false;
  /// Optional, for over_share work: the recent handler time per call of the task's caller, in
  /// cost_tick_us ticks, kept up to date by the submitter while the task waits. At or above
  /// heavy_task_ticks the pool treats the task as heavy (pool_queue.hpp): it may take only a
  /// share of the workers' time and of the workers at once. Must stay valid while it waits.
  const std::atomic<std::uint16_t>* cost_hint = nullptr;
};

/// The resolution of pool_task::cost_hint: 100 us (up to 6.5 s, where it saturates).
constexpr std::uint32_t cost_tick_us = 100;
/// Over-share work whose caller's calls take 5 ms or longer is heavy (see cost_hint).
constexpr std::uint16_t heavy_task_ticks = 50;

/// Called on the thread that was refused, at most once per report interval per pool, with a
/// one-line summary of the pool and what each busy worker has been running for how long.
/// Must be thread-safe (refusals happen on any thread); an exception it throws is dropped.
using pool_report_sink = std::function<void(std::string_view report)>;

/// Called by a worker after each burst of tasks (every 32 tasks within a long burst of short ones,
/// after each task while they take over 20 us), so work can be flushed in batches (the server
/// wakes the readers whose connections got replies here).
/// Must not throw (it runs on a worker, which has nowhere to report it).
using pool_burst_hook = std::function<void()>;

class thread_pool {
 public:
  /// Validates `options` (std::invalid_argument naming the field and the allowed values).
  /// threads == 0 is resolved from the CPU affinity mask here.
  thread_pool(std::string name, pool_options options, pool_burst_hook after_burst = {},
              pool_report_sink report = {},
              std::chrono::milliseconds report_interval = std::chrono::seconds(10));
  ~thread_pool();  ///< shutdown_and_join()
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Starts the initial threads (fixed: `threads`; others: `core_threads`).
  void start();

  /// Any thread. True: `t` will run exactly once. False: refused now (pool saturated per its
  /// kind and queue, or shut down); the caller answers the work itself. Refusals are counted.
  /// (Refusals before start() or once shutdown_and_join() began are not: they are not
  /// SERVER_BUSY. A pool task may submit to its own pool.)
  /// Does not wake a worker unless it must start one: call wake() once per batch of accepted
  /// submissions (a loop turn), so a burst costs one wake-up.
  bool try_submit(pool_task* t) noexcept;
  /// Wakes up to `n` parked workers for work submitted since the last wake.
  void wake(unsigned n) noexcept;
  /// wake() for a caller that wakes through its io_uring (IORING_OP_FUTEX_WAKE): null when no
  /// worker is parked, else the futex word to wake (FUTEX_WAKE_PRIVATE, `n` of them).
  std::uint32_t* claim_wake() noexcept;
  /// try_submit() followed by wake(1).
  bool submit_now(pool_task* t) noexcept;

  /// For a task that by construction waits in this pool at most once at a time (an endpoint's
  /// connection-event lane, a serial endpoint's inbox drain: each is resubmitted only by
  /// itself, after it started running). Accepted whatever the queue holds and however busy the
  /// workers are: it waits apart from the queue, served ahead of it (but for one pop in four),
  /// so it never takes the queue's capacity and is never refused for lack of it. Wakes a
  /// worker, unless `wake_now` is false: then the caller calls wake() once for its batch (a
  /// loop turn). False only before start() or once shutdown_and_join() began. Not counted in
  /// `rejected`; counted in `queued`.
  bool submit_singleton(pool_task* t, bool wake_now = true) noexcept;

  /// Runs everything already accepted, then stops and joins every thread. Later submissions are
  /// refused. Idempotent.
  /// Not from one of the pool's own workers (that throws std::logic_error).
  void shutdown_and_join();

  /// Runs every task waiting in the queue on the calling thread, now, instead of behind busy
  /// workers (a stopping server answers them this way while a handler will not finish).
  /// Pools that hand work to reserved idle workers (queue 0, eager) are left alone.
  std::size_t run_queued_here() noexcept;

  /// Whether the calling thread is a worker of some pool (whose burst hook will run after the
  /// task it is in).
  static bool on_worker_thread() noexcept;
  /// The pool whose worker the calling thread is; null on any other thread.
  static thread_pool* current() noexcept;
  /// Whether tasks wait in the queue now (approximate): a worker finishing one asks whether it
  /// goes on or parks next.
  bool has_queued_work() const noexcept;
  /// This pool as a place coroutines resume (ringrpc/coro.hpp's resume rule).
  coro_abi::coro_home* home() noexcept { return &_home; }

  const std::string& name() const noexcept;
  const pool_options& options() const noexcept;  ///< with threads resolved
  /// Who made the pool (a dispatcher), so that a worker can ask "is this one of yours?"
  /// through current() without a lock. Set before start(), never after: the workers read it.
  void set_owner(const void* owner) noexcept;
  const void* owner() const noexcept;
  pool_stats stats() const;
  /// The text the report sink gets: state and, per busy worker, label and running time.
  std::string describe() const;

 private:
  struct impl;
  impl* _impl;
  coro_abi::coro_home _home{&resume_on_pool, this};
};

}  // namespace ringrpc::detail

#pragma once
// The state behind a thread_pool (worker_pool.hpp), shared by the .cpp files that implement it,
// one idea each:
//   pool_options.cpp   pool kinds by name, option validation
//   pool_queue.hpp     where accepted work waits (main queue, overflow, over-share queues)
//   heavy_budget.hpp   a worker's share of time for heavy over-share work
//   pool_submit.cpp    submission: the shutdown handshake, and each kind's growth policy
//   pool_worker.cpp    the worker loop: run, flush, park, keep-alive exit
//   pool_lifecycle.cpp start, run_queued_here, shutdown
//   pool_stats.cpp     stats() and the overload report
//
// How the pool works
// ==================
//
// Queue: see pool_queue.hpp.
//
// Workers run the server's old handler loop: pop until empty (the burst hook every 32 tasks
// and at the end), then prepare_wait / re-check / park on the futex event count. Per task a
// worker pays the pop, a seqlock publication of (label, start time) for the overload report,
// one coarse clock read (which also times its heavy_budget), and a store to its own completed
// counter: no lock, no allocation, no write to a line another thread writes. (Heavy tasks,
// 5 ms or more each, also take and give back a heavy slot: pool_queue.hpp.)
//
// Hand-off and "is a worker idle?" (queue == 0, and eager, which adds threads only when none is
// idle) use `available`, which is kept equal to
//     (workers in their idle phase) - (reserved entries in the ring)
// A worker enters its idle phase when it finds the ring empty (+1; a thread started without a
// task starts in it, the starter adds the 1 before the thread exists, so start() is
// deterministic). A submitter reserves with a CAS that only moves `available` from > 0 down, and
// then pushes a reserved entry. The worker that pops an entry fixes the count up: idle worker +
// reserved entry: nothing (both terms drop by one); idle worker + unreserved entry: -1 (can go
// below zero for a moment, only in eager with a queue); busy worker + reserved entry: +1 (it
// took work meant for an idle worker, who is now available again); busy + unreserved: nothing.
// A worker leaves its idle phase without popping (keep-alive exit) only by the same CAS from
// > 0. Hence at every moment reserved entries <= idle-phase workers, every one of which is
// either about to pop or parked on the event count: an accepted hand-off has a worker that will
// run it as soon as the submitter's wake() arrives (and a worker that takes a reserved entry
// from idle wakes one more if work is left, so even wake(1) for a batch is enough). A refused
// hand-off was never pushed, so it never runs. The race "worker about to park vs. submitter
// reserving" is harmless: the token is deposited before the worker's prepare_wait, so the
// reservation either sees it (and the worker's re-check after prepare_wait, or the epoch moved
// by wake(), finds the entry) or does not (refused / grown). The only imprecision: a worker
// giving up its token to exit after keep_alive may cause one refusal (or one extra thread) in
// the instant between withdrawing its token and deciding to stay because it is a core thread.
//
// Shutdown has to know that no submitter is between "not closed" and its push. A submitter
// announces itself in a flag of its own (one cache line per thread, for the first 64 threads
// that submit to any pool), then reads `closed`; shutdown sets `closed`, then waits for every
// flag to clear: afterwards nothing can be pushed, and workers exit once the queue is empty.
// That is Dekker's handshake, and the store-load barrier it needs is made asymmetric: the
// submitter has only a compiler barrier, shutdown runs membarrier(PRIVATE_EXPEDITED), which
// puts a full barrier into every running thread of the process (as folly's
// asymmetric_thread_fence_heavy does). So a submission costs two plain stores to a line
// nobody else writes. Where membarrier is refused (old kernel, seccomp), and under TSan, both
// sides use a seq_cst fence. Threads beyond the first 64 share 16 counters updated with
// seq_cst read-modify-writes instead.

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "base/clock.hpp"
#include "base/counter.hpp"
#include "base/parking.hpp"
#include "exec/heavy_budget.hpp"
#include "exec/pool_queue.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

constexpr unsigned burst_hook_every = 32;
// Tasks averaging longer than this get the hook after each one (see worker_main).
constexpr std::int64_t slow_task_ns = 20'000;
constexpr unsigned max_pool_threads = 4096;
constexpr int max_bounded_queue = 1 << 24;
constexpr std::size_t announce_slots = 64;
constexpr std::size_t gate_shards = 16;
constexpr std::int64_t never = std::numeric_limits<std::int64_t>::min();

// Task start stamps: CLOCK_MONOTONIC_COARSE costs a few ns where CLOCK_MONOTONIC costs 20-40
// (more in VMs), and it is read once per task. Its resolution (one kernel tick, 1-4 ms) is
// plenty for a report about work that is stuck; shorter runs are shown as "< 4 ms".
inline std::int64_t task_stamp_ns() noexcept {
  const std::int64_t t = coarse_now_ns();
  return t != 0 ? t : 1;  // 0 means "idle"
}

inline std::string_view piece(std::string_view s) noexcept { return s; }
inline std::string piece(std::uint64_t n) { return std::to_string(n); }
inline std::string piece(std::int64_t n) { return std::to_string(n); }
inline std::string piece(unsigned n) { return std::to_string(n); }
inline std::string piece(int n) { return std::to_string(n); }

// Concatenation by appending only: GCC 12 at -O3 reports a false -Wrestrict for
// `"literal" + std::string&&` (GCC bug 105329), and release builds use -Werror.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(piece(parts)), ...);
  return out;
}

/// `o` checked (std::invalid_argument naming the field and the allowed values), threads == 0
/// resolved from the CPU affinity mask (pool_options.cpp).
pool_options validate_pool_options(const std::string& name, pool_options o,
                                   std::chrono::milliseconds report_interval);

/// True when membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) can serve as the heavy side of the
/// asymmetric barrier (registered once per process; pool_lifecycle.cpp).
bool membarrier_usable() noexcept;

struct thread_pool::impl {
  enum : std::uint8_t { slot_free, slot_running, slot_exited };

  struct alignas(64) worker_slot {
    // Written by the slot's worker only; read by describe()/stats(). (label_data, label_size,
    // started_ns) form a seqlock-protected record; started_ns alone is zeroed when the worker
    // goes idle (a reader seeing 0 skips the record, so that store needs no sequence bump).
    std::atomic<std::uint32_t> seq{0};
    std::atomic<const char*> label_data{nullptr};
    std::atomic<std::size_t> label_size{0};
    std::atomic<std::int64_t> started_ns{0};
    counter completed;
    // Lifecycle. `thread` is touched only under lifecycle_mu.
    std::atomic<std::uint8_t> state{slot_free};
    unsigned index = 0;
    std::thread thread;
  };

  struct alignas(64) gate_shard {
    std::atomic<std::uint64_t> inside{0};
  };
  struct alignas(64) announce_slot {
    std::atomic<std::uint32_t> inside{0};  // written by one thread only
  };

  impl(std::string n, const pool_options& o, pool_burst_hook hook, pool_report_sink sink,
       std::chrono::milliseconds interval);

  // ---- configuration (read-only after construction) -------------------------------------
  const std::string name;
  const pool_options opts;
  const pool_burst_hook after_burst;
  const pool_report_sink report;
  const std::int64_t report_interval_ns;
  const unsigned max_threads;
  const unsigned core_threads;  // fixed: max_threads
  const bool hand_off;
  const bool reserve_mode;  // submitters reserve idle workers (hand-off, eager)
  const bool shrinks;       // threads above core exit after keep_alive (cached, eager)
  const std::int64_t keep_alive_ns;
  const bool asymmetric;    // membarrier is the heavy side of the submit/shutdown handshake

  pool_queue queue;  // rings created in start(): a probe pool allocates nothing
  std::unique_ptr<worker_slot[]> slots;
  parking park;

  // ---- shared state, one line each ---------------------------------------------------------
  announce_slot announce[announce_slots];
  gate_shard gate[gate_shards];
  alignas(64) std::atomic<bool> closed{true};  // refusing: before start() and after shutdown
  alignas(64) std::atomic<int> available{0};   // reserve_mode only; see the comment on top
  alignas(64) std::atomic<unsigned> threads{0};
  alignas(64) std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::int64_t> last_report{never};
  std::atomic<unsigned> largest{0};
  std::atomic<bool> stopping{false};

  std::mutex lifecycle_mu;  // starting and joining threads
  std::mutex shutdown_mu;   // start() / shutdown_and_join()
  bool started = false;     // under shutdown_mu
  bool shut = false;        // under shutdown_mu

  static thread_local const impl* current;  // the pool whose worker this thread is
  thread_pool* self = nullptr;               // the facade, for thread_pool::current()
  const void* owner = nullptr;               // set before start(), read-only afterwards

  // ---- submission and growth (pool_submit.cpp) ------------------------------------------
  bool admit(pool_task* t) noexcept;
  /// The shutdown handshake around `admit_fn` (try_submit, submit_singleton); false if closed.
  template <class Admit>
  bool gated(Admit&& admit_fn) noexcept;
  bool reserve_and_push(pool_task* t) noexcept;
  void keep_one_thread() noexcept;
  bool grow(pool_task* first, unsigned limit) noexcept;
  bool start_thread(pool_task* first) noexcept;
  void refused() noexcept;

  bool reserve_idle() noexcept {
    int a = available.load(std::memory_order_relaxed);
    do {
      if (a <= 0) return false;
    } while (!available.compare_exchange_weak(a, a - 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed));
    return true;
  }

  void bump_largest(unsigned n) noexcept {
    unsigned l = largest.load(std::memory_order_relaxed);
    while (l < n && !largest.compare_exchange_weak(l, n, std::memory_order_relaxed)) {
    }
  }

  // ---- workers (pool_worker.cpp) -------------------------------------------------------------
  void worker_main(worker_slot& s, pool_task* first) noexcept;
  /// Runs `t`; returns its start stamp (coarse clock).
  static std::int64_t run_one(worker_slot& s, pool_task* t, std::uint32_t& seq) noexcept;
  bool retire() noexcept;
  void name_thread(unsigned index) noexcept;

  void hook() noexcept {
    if (after_burst) after_burst();
  }

  // ---- lifecycle (pool_lifecycle.cpp) ------------------------------------------------------
  void start();
  std::size_t run_queued_here() noexcept;
  void shutdown_and_join();
  void stop_and_join();

  // ---- introspection (pool_stats.cpp) ------------------------------------------------------
  unsigned count_active() const noexcept;
  pool_stats stats() const;
  std::string describe() const;
};

}  // namespace ringrpc::detail

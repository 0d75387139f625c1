#include "exec/thread_pool.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/counter.hpp"
#include "base/cpu_affinity.hpp"
#include "base/mpmc_queue.hpp"
#include "base/parking.hpp"

namespace ringrpc {

std::string_view to_string(pool_kind k) noexcept {
  switch (k) {
    case pool_kind::fixed: return "fixed";
    case pool_kind::cached: return "cached";
    case pool_kind::limited: return "limited";
    case pool_kind::eager: return "eager";
  }
  return "unknown";
}

bool parse_pool_kind(std::string_view name, pool_kind& out) noexcept {
  for (pool_kind k : {pool_kind::fixed, pool_kind::cached, pool_kind::limited, pool_kind::eager}) {
    if (name == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

}  // namespace ringrpc

namespace ringrpc::detail {

// How the pool works
// ==================
//
// Queue. Accepted work waits in one bounded Vyukov ring (mpmc_queue) of entries: a task pointer
// whose low bit says whether the submitter reserved an idle worker for it (see hand-off below).
// queue > 0 sizes the ring; when that size is not a power of two (the ring rounds up) an extra
// counter keeps the bound exact. queue < 0 adds an intrusive overflow list (pool_task::next)
// under a mutex, used only while the ring is full or the list is non-empty (so the ring drains
// before the list: roughly FIFO, and the list cannot starve). queue == 0 sizes the ring for
// reserved entries only.
//
// Workers run the server's old handler loop: pop until empty (the burst hook every 32 tasks
// and at the end), then prepare_wait / re-check / park on the futex event count. Per task a
// worker pays the pop, a seqlock publication of (label, start time) for the overload report,
// one coarse clock read, and a store to its own completed counter: no lock, no allocation, no
// write to a line another thread writes.
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

namespace {

using entry = std::uintptr_t;  // pool_task* | reserved bit
constexpr entry reserved_bit = 1;
// Entries of the over-share queue (pool_task::over_share): counted there, not in queued_count.
constexpr entry over_share_bit = 2;
constexpr entry tag_bits = reserved_bit | over_share_bit;
// Fair share: a worker takes from the over-share queue first on one pop in this many (and
// whenever the main queue is empty), so callers within their share are served ahead of a
// caller's backlog while the backlog still drains with whatever capacity is spare.
constexpr unsigned over_share_every = 4;

constexpr unsigned burst_hook_every = 32;
// Tasks averaging longer than this get the hook after each one (see worker_main).
constexpr std::int64_t slow_task_ns = 20'000;
constexpr unsigned max_pool_threads = 4096;
constexpr int max_bounded_queue = 1 << 24;
constexpr std::size_t unbounded_ring_capacity = 1024;
constexpr std::size_t announce_slots = 64;
constexpr std::size_t gate_shards = 16;
constexpr std::int64_t never = std::numeric_limits<std::int64_t>::min();

std::int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Task start stamps: CLOCK_MONOTONIC_COARSE costs a few ns where CLOCK_MONOTONIC costs 20-40
// (more in VMs), and it is read once per task. Its resolution (one kernel tick, 1-4 ms) is
// plenty for a report about work that is stuck; shorter runs are shown as "< 4 ms".
std::int64_t coarse_now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const std::int64_t t = static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  return t != 0 ? t : 1;  // 0 means "idle"
}

std::int64_t coarse_resolution_ns() noexcept {
  static const std::int64_t res = [] {
    timespec ts{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0) return std::int64_t{4'000'000};
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }();
  return res;
}

// A number per thread, from 1, never reused. Constant-initialised thread_local: no TLS wrapper.
thread_local std::uint32_t tl_submitter_id = 0;
std::atomic<std::uint32_t> next_submitter_id{1};

std::uint32_t submitter_id() noexcept {
  std::uint32_t id = tl_submitter_id;
  if (id == 0) {
    id = next_submitter_id.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_submitter_id.fetch_add(1, std::memory_order_relaxed);  // wrapped
    tl_submitter_id = id;
  }
  return id;
}

#if defined(__SANITIZE_THREAD__)
#define RINGRPC_POOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGRPC_POOL_TSAN 1
#endif
#endif

// True when membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) can serve as the heavy side of the
// asymmetric barrier (registered once per process).
bool membarrier_usable() noexcept {
#if defined(RINGRPC_POOL_TSAN)
  return false;  // TSan models neither; keep to what it can at least see
#else
  static const bool usable = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return usable;
#endif
}

std::string_view piece(std::string_view s) noexcept { return s; }
std::string piece(std::uint64_t n) { return std::to_string(n); }
std::string piece(std::int64_t n) { return std::to_string(n); }
std::string piece(unsigned n) { return std::to_string(n); }
std::string piece(int n) { return std::to_string(n); }

std::string format_duration(std::int64_t ns) {
  char buf[32];
  const std::int64_t res = coarse_resolution_ns();
  if (ns < res) {
    std::snprintf(buf, sizeof buf, "< %.0f ms", std::max(1.0, static_cast<double>(res) / 1e6));
    return buf;
  }
  const double us = static_cast<double>(ns) / 1e3;
  if (us < 1000) {
    std::snprintf(buf, sizeof buf, "%.0f us", us);
  } else if (us < 10'000) {
    std::snprintf(buf, sizeof buf, "%.1f ms", us / 1e3);
  } else if (us < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.0f ms", us / 1e3);
  } else if (us < 10'000'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", us / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f s", us / 1e6);
  }
  return buf;
}

// Concatenation by appending only: GCC 12 at -O3 reports a false -Wrestrict for
// `"literal" + std::string&&` (GCC bug 105329), and release builds use -Werror.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(piece(parts)), ...);
  return out;
}

[[noreturn]] void invalid(const std::string& pool, const std::string& what) {
  throw std::invalid_argument(cat("thread pool '", pool, "': ", what));
}

pool_options validate(const std::string& name, pool_options o,
                      std::chrono::milliseconds report_interval) {
  if (name.empty()) throw std::invalid_argument("thread pool name must not be empty");
  switch (o.kind) {
    case pool_kind::fixed:
    case pool_kind::cached:
    case pool_kind::limited:
    case pool_kind::eager: break;
    default:
      invalid(name, cat("kind = ", static_cast<int>(o.kind),
                        " is not a pool kind; allowed: fixed, cached, limited, eager"));
  }
  if (o.threads > max_pool_threads) {
    invalid(name, cat("threads = ", o.threads,
                      " is out of range; allowed: 0 (one per usable CPU) or 1 to ", max_pool_threads));
  }
  if (o.threads == 0) o.threads = usable_cpus();
  if (o.kind != pool_kind::fixed && o.core_threads > o.threads) {
    invalid(name, cat("core_threads = ", o.core_threads, " exceeds threads = ", o.threads,
                      "; allowed: 0 to ", o.threads));
  }
  if (o.queue > max_bounded_queue) {
    invalid(name, cat("queue = ", o.queue,
                      " is out of range; allowed: < 0 (unbounded), 0 (hand-off) or 1 to ",
                      max_bounded_queue));
  }
  if ((o.kind == pool_kind::cached || o.kind == pool_kind::eager) && o.keep_alive.count() <= 0) {
    invalid(name, cat("keep_alive = ", static_cast<std::int64_t>(o.keep_alive.count()),
                      " ms; allowed: > 0 ms"));
  }
  if (report_interval.count() < 0) {
    invalid(name, cat("report_interval = ", static_cast<std::int64_t>(report_interval.count()),
                      " ms; allowed: >= 0 ms"));
  }
  return o;
}

}  // namespace

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
       std::chrono::milliseconds interval)
      : name(std::move(n)),
        opts(validate(name, o, interval)),
        after_burst(std::move(hook)),
        report(std::move(sink)),
        report_interval_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()),
        max_threads(opts.threads),
        core_threads(opts.kind == pool_kind::fixed ? opts.threads : opts.core_threads),
        hand_off(opts.queue == 0),
        unbounded(opts.queue < 0),
        reserve_mode(opts.queue == 0 || opts.kind == pool_kind::eager),
        exact_count(opts.queue == 1 ||
                    (opts.queue > 1 && !std::has_single_bit(static_cast<unsigned>(opts.queue)))),
        shrinks(opts.kind == pool_kind::cached || opts.kind == pool_kind::eager),
        keep_alive_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(opts.keep_alive).count()),
        asymmetric(membarrier_usable()),
        slots(std::make_unique<worker_slot[]>(max_threads)) {
    for (unsigned i = 0; i < max_threads; ++i) slots[i].index = i;
  }

  // ---- configuration (read-only after construction) -------------------------------------
  const std::string name;
  const pool_options opts;
  const pool_burst_hook after_burst;
  const pool_report_sink report;
  const std::int64_t report_interval_ns;
  const unsigned max_threads;
  const unsigned core_threads;  // fixed: max_threads
  const bool hand_off;
  const bool unbounded;
  const bool reserve_mode;  // submitters reserve idle workers (hand-off, eager)
  const bool exact_count;   // bounded queue whose size the ring cannot express exactly
  const bool shrinks;       // threads above core exit after keep_alive (cached, eager)
  const std::int64_t keep_alive_ns;
  const bool asymmetric;    // membarrier is the heavy side of the submit/shutdown handshake

  std::optional<mpmc_queue<entry>> ring;  // created in start(): a probe pool allocates nothing
  std::optional<mpmc_queue<entry>> over_share;  // bounded pools: calls beyond a caller's share
  std::unique_ptr<worker_slot[]> slots;
  parking park;

  // ---- shared state, one line each ---------------------------------------------------------
  announce_slot announce[announce_slots];
  gate_shard gate[gate_shards];
  alignas(64) std::atomic<bool> closed{true};  // refusing: before start() and after shutdown
  alignas(64) std::atomic<int> available{0};   // reserve_mode only; see the comment on top
  alignas(64) std::atomic<unsigned> threads{0};
  alignas(64) std::atomic<std::int64_t> queued_count{0};  // exact_count only
  alignas(64) std::atomic<std::int64_t> over_share_count{0};  // exact bound of over_share
  alignas(64) std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::int64_t> last_report{never};
  std::atomic<unsigned> largest{0};
  std::atomic<bool> stopping{false};

  // Unbounded overflow (queue < 0).
  alignas(64) std::atomic<std::size_t> overflow_size{0};
  std::mutex overflow_mu;
  pool_task* overflow_head = nullptr;
  pool_task* overflow_tail = nullptr;

  std::mutex lifecycle_mu;  // starting and joining threads
  std::mutex shutdown_mu;   // start() / shutdown_and_join()
  bool started = false;     // under shutdown_mu
  bool shut = false;        // under shutdown_mu

  static thread_local const impl* current;  // the pool whose worker this thread is

  // ---- submission ---------------------------------------------------------------------------

  bool admit(pool_task* t) noexcept {
    switch (opts.kind) {
      case pool_kind::fixed:
        if (hand_off) return reserve_and_push(t);
        return push(t);
      case pool_kind::cached:
      case pool_kind::limited:
        // java.util.concurrent.ThreadPoolExecutor's order: core, queue, grow, refuse.
        if (threads.load(std::memory_order_relaxed) < core_threads && grow(t, core_threads)) return true;
        if (hand_off) return reserve_and_push(t) || grow(t, max_threads);
        if (push(t)) {
          if (core_threads == 0) keep_one_thread();
          return true;
        }
        return grow(t, max_threads);
      case pool_kind::eager:
        // Idle worker first, then a new thread, then the queue.
        if (threads.load(std::memory_order_relaxed) < core_threads && grow(t, core_threads)) return true;
        if (reserve_and_push(t)) return true;
        if (grow(t, max_threads)) return true;
        if (hand_off || !push(t)) return false;
        if (core_threads == 0) keep_one_thread();
        return true;
    }
    return false;
  }

  bool reserve_idle() noexcept {
    int a = available.load(std::memory_order_relaxed);
    do {
      if (a <= 0) return false;
    } while (!available.compare_exchange_weak(a, a - 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed));
    return true;
  }

  bool reserve_and_push(pool_task* t) noexcept {
    if (!reserve_idle()) return false;
    // Reserved entries go to the ring only. In hand-off mode it has room for 2 x threads, more
    // than reservations can ever occupy; with a queue (eager) a full ring just undoes it.
    if (ring->try_push(reinterpret_cast<entry>(t) | reserved_bit)) return true;
    available.fetch_add(1, std::memory_order_seq_cst);
    return false;
  }

  bool push(pool_task* t) noexcept {
    const entry e = reinterpret_cast<entry>(t);
    if (t->over_share && over_share) {
      // A caller beyond its share waits in a queue of its own, as large as the main one: it
      // can never take a slot from callers within their share.
      if (over_share_count.fetch_add(1, std::memory_order_relaxed) >= opts.queue) {
        over_share_count.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
      if (over_share->try_push(e | over_share_bit)) return true;
      over_share_count.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    if (unbounded) {
      if (overflow_size.load(std::memory_order_relaxed) == 0 && ring->try_push(e)) return true;
      std::lock_guard lock(overflow_mu);
      t->next = nullptr;
      if (overflow_tail) {
        overflow_tail->next = t;
      } else {
        overflow_head = t;
      }
      overflow_tail = t;
      overflow_size.store(overflow_size.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return true;
    }
    if (exact_count) {
      if (queued_count.fetch_add(1, std::memory_order_relaxed) >= opts.queue) {
        queued_count.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
      if (ring->try_push(e)) return true;
      queued_count.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return ring->try_push(e);
  }

  // A pool that may shrink to zero threads (core 0) must not strand what was just queued: the
  // last worker, after deciding to exit, re-checks the queue (retire()); here the submitter,
  // after pushing, re-checks the thread count. With a fence on both sides one of them sees
  // the other.
  void keep_one_thread() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (threads.load(std::memory_order_seq_cst) == 0) grow(nullptr, max_threads);
  }

  bool grow(pool_task* first, unsigned limit) noexcept {
    unsigned n = threads.load(std::memory_order_relaxed);
    do {
      if (n >= limit) return false;
    } while (!threads.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if (!start_thread(first)) return false;
    bump_largest(n + 1);
    return true;
  }

  void bump_largest(unsigned n) noexcept {
    unsigned l = largest.load(std::memory_order_relaxed);
    while (l < n && !largest.compare_exchange_weak(l, n, std::memory_order_relaxed)) {
    }
  }

  // The caller has counted the thread in `threads`; undone here on failure.
  bool start_thread(pool_task* first) noexcept {
    std::lock_guard lock(lifecycle_mu);
    worker_slot* s = nullptr;
    // A free slot exists: `threads` <= max_threads counts every running slot, except a worker
    // that has just un-counted itself on its way out and marks its slot a moment later.
    for (;;) {
      for (unsigned i = 0; i < max_threads && !s; ++i) {
        if (slots[i].state.load(std::memory_order_acquire) != slot_running) s = &slots[i];
      }
      if (s) break;
      std::this_thread::yield();
    }
    if (s->thread.joinable()) s->thread.join();  // exited after keep_alive: already gone
    const bool deposit = first == nullptr && reserve_mode;
    if (deposit) available.fetch_add(1, std::memory_order_seq_cst);
    s->state.store(slot_running, std::memory_order_relaxed);
    try {
      s->thread = std::thread([this, s, first] { worker_main(*s, first); });
    } catch (...) {
      s->state.store(slot_free, std::memory_order_relaxed);
      if (deposit) available.fetch_sub(1, std::memory_order_seq_cst);
      threads.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
    return true;
  }

  void refused() noexcept {
    rejected.fetch_add(1, std::memory_order_relaxed);
    if (!report) return;
    const std::int64_t now = now_ns();
    std::int64_t last = last_report.load(std::memory_order_relaxed);
    if (last != never && now - last < report_interval_ns) return;
    if (!last_report.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
    try {
      report(describe());
    } catch (...) {
      // A report is best effort; the refusal itself has been counted.
    }
  }

  // ---- workers ------------------------------------------------------------------------------

  bool pop_over_share(entry& e) noexcept {
    if (!over_share || !over_share->try_pop(e)) return false;
    over_share_count.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  bool pop(entry& e) noexcept {
    thread_local unsigned pops = 0;
    if (over_share && ++pops % over_share_every == 0 && pop_over_share(e)) return true;
    if (pop_main(e)) return true;
    return pop_over_share(e);
  }

  bool pop_main(entry& e) noexcept {
    if (ring->try_pop(e)) return true;
    if (!unbounded || overflow_size.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard lock(overflow_mu);
    pool_task* t = overflow_head;
    if (!t) return false;
    overflow_head = t->next;
    if (!overflow_head) overflow_tail = nullptr;
    overflow_size.store(overflow_size.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    e = reinterpret_cast<entry>(t);
    return true;
  }

  bool has_work() const noexcept {
    return !ring->empty_approx() || (unbounded && overflow_size.load(std::memory_order_relaxed) != 0) ||
           (over_share && !over_share->empty_approx());
  }

  void hook() noexcept {
    if (after_burst) after_burst();
  }

  static void run_one(worker_slot& s, pool_task* t, std::uint32_t& seq) noexcept {
    // Seqlock write: odd while the record changes. Copy the label before run(): `t` may be
    // gone once run() returns.
    s.seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.label_data.store(t->label.data(), std::memory_order_relaxed);
    s.label_size.store(t->label.size(), std::memory_order_relaxed);
    s.started_ns.store(coarse_now_ns(), std::memory_order_relaxed);
    seq += 2;
    s.seq.store(seq, std::memory_order_release);
    t->run(t);
    s.completed.add();
  }

  void name_thread(unsigned index) noexcept {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.9s/%u", name.c_str(), index);
    pthread_setname_np(pthread_self(), buf);
  }

  void worker_main(worker_slot& s, pool_task* first) noexcept {
    current = this;
    name_thread(s.index);
    std::uint32_t seq = s.seq.load(std::memory_order_relaxed);
    // Started without a task: idle phase from the start (the starter deposited the token).
    bool idle = first == nullptr;
    std::int64_t idle_since = idle && shrinks ? now_ns() : 0;
    unsigned batch = 0;
    // The hook flushes finished work (the server's replies) in batches. Every burst_hook_every
    // tasks is right for short tasks; for long ones it would hold a reply back for that many
    // task durations while the worker stays busy (32 x 500 us = 16 ms). So each batch is timed
    // (one precise clock read per batch) and, while tasks average over slow_task_ns, the hook
    // runs after every task: its cost is then small beside the task's.
    unsigned flush_every = burst_hook_every;
    std::int64_t batch_started = now_ns();
    auto batch_done = [&]() noexcept {
      hook();
      const std::int64_t now = now_ns();
      flush_every = now - batch_started >= static_cast<std::int64_t>(batch) * slow_task_ns ? 1 : burst_hook_every;
      batch_started = now;
      batch = 0;
    };
    if (first) {
      run_one(s, first, seq);
      batch = 1;
    }
    for (;;) {
      entry e = 0;
      while (pop(e)) {
        auto* t = reinterpret_cast<pool_task*>(e & ~tag_bits);
        const bool reserved = (e & reserved_bit) != 0;
        const bool counted = exact_count && (e & tag_bits) == 0;
        if (reserve_mode) {
          if (idle && !reserved) {
            available.fetch_sub(1, std::memory_order_seq_cst);
          } else if (!idle && reserved) {
            available.fetch_add(1, std::memory_order_seq_cst);
          }
          // Pass the baton: a batch of reserved entries needs only one wake() from the caller.
          if (idle && has_work()) park.wake(1);
        }
        if (counted) queued_count.fetch_sub(1, std::memory_order_relaxed);
        if (idle) batch_started = now_ns();  // a burst begins: time it from here, not from sleep
        idle = false;
        run_one(s, t, seq);
        if (++batch >= flush_every) batch_done();
      }
      if (batch != 0) batch_done();
      if (!idle) {
        idle = true;
        if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
        s.started_ns.store(0, std::memory_order_relaxed);
        if (shrinks) idle_since = now_ns();
      }
      const std::uint32_t epoch = park.prepare_wait();
      if (has_work()) {
        park.cancel_wait();
        continue;
      }
      if (stopping.load(std::memory_order_acquire)) {
        park.cancel_wait();
        break;
      }
      // Only a thread above core_threads may time out; when none is (now), sleep untimed: a
      // thread started later has its own keep_alive and will be the one to go.
      if (!shrinks || threads.load(std::memory_order_relaxed) <= core_threads) {
        park.wait(epoch);
        continue;
      }
      const std::int64_t left = idle_since + keep_alive_ns - now_ns();
      if (left > 0) {
        park.wait_for(epoch, std::chrono::nanoseconds(left));
        continue;
      }
      park.cancel_wait();
      if (retire()) {
        s.state.store(slot_exited, std::memory_order_release);
        return;
      }
      idle_since = now_ns();  // a core thread, or work arrived: idle for another period
    }
    threads.fetch_sub(1, std::memory_order_seq_cst);
    s.state.store(slot_exited, std::memory_order_release);
  }

  // An idle worker whose keep_alive ran out: true if it un-counted itself and must exit.
  bool retire() noexcept {
    if (threads.load(std::memory_order_relaxed) <= core_threads) return false;
    if (reserve_mode && !reserve_idle()) return false;  // its token backs a reserved entry
    unsigned n = threads.load(std::memory_order_relaxed);
    do {
      if (n <= core_threads) {
        if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
        return false;
      }
    } while (!threads.compare_exchange_weak(n, n - 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    std::atomic_thread_fence(std::memory_order_seq_cst);  // see keep_one_thread()
    if (!has_work()) return true;
    n = threads.load(std::memory_order_relaxed);
    do {
      if (n >= max_threads) return true;  // others are there to take it
    } while (!threads.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
    return false;
  }

  // ---- lifecycle ----------------------------------------------------------------------------

  void start() {
    std::lock_guard lock(shutdown_mu);
    if (shut) throw std::logic_error(cat("thread pool '", name, "': start() after shutdown_and_join()"));
    if (started) return;
    if (!ring) {
      std::size_t capacity = unbounded_ring_capacity;
      if (hand_off) {
        capacity = 2 * static_cast<std::size_t>(max_threads);
      } else if (!unbounded) {
        capacity = static_cast<std::size_t>(opts.queue);
      }
      ring.emplace(capacity);
      if (!hand_off && !unbounded) over_share.emplace(capacity);
    }
    if (unbounded) {
      std::fprintf(stderr, "ringrpc: pool '%s' has an unbounded queue; memory is its only limit\n",
                   name.c_str());
    }
    const unsigned initial = opts.kind == pool_kind::fixed ? max_threads : core_threads;
    for (unsigned i = 0; i < initial; ++i) {
      threads.fetch_add(1, std::memory_order_seq_cst);
      if (!start_thread(nullptr)) {
        stop_and_join();
        shut = true;
        throw std::runtime_error(
            cat("thread pool '", name, "': could not start thread ", i + 1, " of ", initial));
      }
      bump_largest(i + 1);
    }
    started = true;
    closed.store(false, std::memory_order_seq_cst);
  }

  std::size_t run_queued_here() noexcept {
    // Reserving pools keep nothing waiting that no idle worker has claimed: leave them alone.
    if (!ring || reserve_mode) return 0;
    std::size_t n = 0;
    entry e = 0;
    while (pop(e)) {
      auto* t = reinterpret_cast<pool_task*>(e & ~tag_bits);
      if (exact_count && (e & tag_bits) == 0) queued_count.fetch_sub(1, std::memory_order_relaxed);
      t->run(t);
      ++n;
    }
    if (n != 0) hook();
    return n;
  }

  void shutdown_and_join() {
    if (current == this) {
      throw std::logic_error(
          cat("thread pool '", name, "': shutdown_and_join() called from one of its own workers"));
    }
    std::lock_guard lock(shutdown_mu);
    if (shut) return;
    shut = true;
    closed.store(true, std::memory_order_seq_cst);
    stop_and_join();
  }

  void stop_and_join() {
    // `closed` is set. Submitters that read it as false are announced; wait them out, so the
    // queue only shrinks from here on.
    if (asymmetric) {
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    for (auto& a : announce) {
      while (a.inside.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
    for (auto& g : gate) {
      while (g.inside.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    }
    stopping.store(true, std::memory_order_seq_cst);
    park.wake_all();
    std::lock_guard lock(lifecycle_mu);
    for (unsigned i = 0; i < max_threads; ++i) {
      if (slots[i].thread.joinable()) slots[i].thread.join();
      slots[i].state.store(slot_free, std::memory_order_relaxed);
    }
  }

  // ---- introspection ------------------------------------------------------------------------

  unsigned count_active() const noexcept {
    unsigned n = 0;
    for (unsigned i = 0; i < max_threads; ++i) {
      if (slots[i].started_ns.load(std::memory_order_relaxed) != 0) ++n;
    }
    return n;
  }

  std::uint64_t count_queued() const noexcept {
    if (!ring) return 0;
    const auto extra = over_share_count.load(std::memory_order_relaxed);
    const std::uint64_t over = extra > 0 ? static_cast<std::uint64_t>(extra) : 0;
    if (exact_count) {
      const auto q = queued_count.load(std::memory_order_relaxed);
      return (q > 0 ? static_cast<std::uint64_t>(q) : 0) + over;
    }
    return ring->size_approx() + overflow_size.load(std::memory_order_relaxed) + over;
  }

  pool_stats stats() const {
    pool_stats s;
    s.name = name;
    s.kind = opts.kind;
    s.threads = threads.load(std::memory_order_relaxed);
    s.active = count_active();
    s.max_threads = max_threads;
    s.largest = largest.load(std::memory_order_relaxed);
    s.queued = count_queued();
    s.queue_capacity = opts.queue;
    for (unsigned i = 0; i < max_threads; ++i) s.completed += slots[i].completed.get();
    s.rejected = rejected.load(std::memory_order_relaxed);
    return s;
  }

  std::string describe() const {
    const pool_stats st = stats();
    std::string out = cat("pool '", name, "' (", to_string(opts.kind), ")",
                          st.rejected != 0 ? " refused work: " : ": ", st.active, "/", st.threads,
                          " threads busy");
    if (st.threads != max_threads) out += cat(" (max ", max_threads, ")");
    out += ", ";
    if (hand_off) {
      out += "hand-off (no queue)";
    } else if (unbounded) {
      out += cat(st.queued, " queued (unbounded)");
    } else {
      out += cat(st.queued, "/", opts.queue, " queued");
    }
    out += cat(", ", st.rejected, " refused so far; busy:");
    constexpr unsigned max_listed = 32;
    unsigned listed = 0, more = 0;
    const std::int64_t now = coarse_now_ns();
    for (unsigned i = 0; i < max_threads; ++i) {
      const worker_slot& s = slots[i];
      const char* data = nullptr;
      std::size_t size = 0;
      std::int64_t started_at = 0;
      bool consistent = false;
      for (int attempt = 0; attempt < 64 && !consistent; ++attempt) {
        const std::uint32_t s1 = s.seq.load(std::memory_order_acquire);
        if (s1 & 1u) {
          std::this_thread::yield();
          continue;
        }
        data = s.label_data.load(std::memory_order_relaxed);
        size = s.label_size.load(std::memory_order_relaxed);
        started_at = s.started_ns.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        consistent = s.seq.load(std::memory_order_relaxed) == s1;
      }
      if (!consistent || started_at == 0) continue;
      if (listed == max_listed) {
        ++more;
        continue;
      }
      out += cat(listed == 0 ? " [" : ", [", i, "] ");
      if (size == 0) {
        out += "(unlabelled)";
      } else {
        out.append(data, size);
      }
      out += ' ';
      out += format_duration(std::max<std::int64_t>(0, now - started_at));
      ++listed;
    }
    if (listed == 0) out += " none";
    if (more != 0) out += cat(", and ", more, " more");
    return out;
  }
};

thread_local const thread_pool::impl* thread_pool::impl::current = nullptr;

thread_pool::thread_pool(std::string name, pool_options options, pool_burst_hook after_burst,
                         pool_report_sink report, std::chrono::milliseconds report_interval)
    : _impl(new impl(std::move(name), options, std::move(after_burst), std::move(report),
                     report_interval)) {}

thread_pool::~thread_pool() {
  shutdown_and_join();
  delete _impl;
}

void thread_pool::start() { _impl->start(); }

bool thread_pool::try_submit(pool_task* t) noexcept {
  impl& p = *_impl;
  if (t == nullptr) return false;
  const std::uint32_t id = submitter_id();
  bool ok = false;
  if (id <= announce_slots) {
    // Dekker with an asymmetric barrier; see the comment at the top.
    auto& inside = p.announce[id - 1].inside;
    inside.store(1, std::memory_order_relaxed);
    if (p.asymmetric) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    if (p.closed.load(std::memory_order_relaxed)) {
      inside.store(0, std::memory_order_release);
      return false;  // not started, or shut down: not a saturation refusal, not counted
    }
    ok = p.admit(t);
    inside.store(0, std::memory_order_release);
  } else {
    auto& inside = p.gate[id % gate_shards].inside;
    inside.fetch_add(1, std::memory_order_seq_cst);
    if (p.closed.load(std::memory_order_seq_cst)) {
      inside.fetch_sub(1, std::memory_order_release);
      return false;
    }
    ok = p.admit(t);
    inside.fetch_sub(1, std::memory_order_release);
  }
  if (!ok) p.refused();
  return ok;
}

void thread_pool::wake(unsigned n) noexcept {
  if (n == 0) return;
  _impl->park.wake(n > static_cast<unsigned>(INT32_MAX) ? INT32_MAX : static_cast<int>(n));
}

bool thread_pool::submit_now(pool_task* t) noexcept {
  if (!try_submit(t)) return false;
  wake(1);
  return true;
}

void thread_pool::shutdown_and_join() { _impl->shutdown_and_join(); }
std::size_t thread_pool::run_queued_here() noexcept { return _impl->run_queued_here(); }

const std::string& thread_pool::name() const noexcept { return _impl->name; }

const pool_options& thread_pool::options() const noexcept { return _impl->opts; }

pool_stats thread_pool::stats() const { return _impl->stats(); }

std::string thread_pool::describe() const { return _impl->describe(); }

}  // namespace ringrpc::detail

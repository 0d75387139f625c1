#pragma once
// Where a thread pool's accepted work waits (worker_pool.hpp): the main queue, its unbounded
// overflow, and the over-share queue that keeps one caller's backlog out of the others' way.
// Internal to the pool's .cpp files; every operation is inline because each task pays one push
// and one pop.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <mutex>
#include <optional>

#include "base/mpmc_queue.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

/// A task pointer with tag bits: whether the submitter reserved an idle worker for it (see
/// worker_pool_impl.hpp, "hand-off"), whether it waited in an over-share queue, and whether it
/// runs as heavy work (then the worker gives its heavy slot back with heavy_done()).
using pool_entry = std::uintptr_t;
constexpr pool_entry reserved_bit = 1;
constexpr pool_entry over_share_bit = 2;
constexpr pool_entry heavy_bit = 4;
constexpr pool_entry tag_bits = reserved_bit | over_share_bit | heavy_bit;

inline pool_task* task_of(pool_entry e) noexcept { return reinterpret_cast<pool_task*>(e & ~tag_bits); }

/// Queue. Accepted work waits in one bounded Vyukov ring (mpmc_queue) of entries. queue > 0
/// sizes the ring; when that size is not a power of two (the ring rounds up) an extra counter
/// keeps the bound exact. queue < 0 adds an intrusive overflow list (pool_task::next) under a
/// mutex, used only while the ring is full or the list is non-empty (so the ring drains before
/// the list: roughly FIFO, and the list cannot starve). queue == 0 sizes the ring for reserved
/// entries only.
///
/// Fair share (docs/execution.md): a bounded queue has a second ring of the same capacity for
/// tasks marked pool_task::over_share. A pop takes from it first one time in
/// `over_share_every`, and whenever the main queue is empty, so callers within their share are
/// served ahead of a caller's backlog while the backlog still drains with whatever capacity is
/// spare (and never starves).
///
/// By cost: one pop of a 100 ms call is worth 10,000 pops of a 10 us one, so counting pops is
/// not enough. An over-share task whose caller's calls are slow (pool_task::cost_hint at or
/// above heavy_task_ticks: 5 ms) is heavy. A pop that meets one in the over-share ring runs it only if
/// it may go ahead now (the worker's heavy_budget is paid and fewer than `heavy_busy_cap`
/// workers run heavy work); otherwise it moves it to a third ring, the heavy ring, and looks
/// further, so cheap backlogs are not stuck behind slow ones. The heavy ring is served ahead
/// of the rest only under those same conditions, and otherwise when nothing else waits, by at
/// most `heavy_spare_cap` workers at once (all but one, at least one): one worker stays free
/// for whatever arrives next. Moving happens once per heavy task, on the worker; the heavy
/// slot count is touched only by heavy tasks (each worth 5 ms or more of a handler).
class pool_queue {
 public:
  static constexpr unsigned over_share_every = 4;
  static constexpr std::size_t unbounded_ring_capacity = 1024;
  static constexpr unsigned queue_every = 4;  // see push_singleton()

  explicit pool_queue(int queue) noexcept
      : _bound(queue),
        _hand_off(queue == 0),
        _unbounded(queue < 0),
        _exact_count(queue == 1 || (queue > 1 && !std::has_single_bit(static_cast<unsigned>(queue)))) {}
  pool_queue(const pool_queue&) = delete;
  pool_queue& operator=(const pool_queue&) = delete;

  /// Allocates the rings (at the pool's start: a pool made only to validate its options
  /// allocates nothing). A hand-off ring holds reserved entries only, 2 x max_threads of them:
  /// more than reservations can ever occupy.
  void create(unsigned max_threads) {
    if (_ring) return;
    _heavy_busy_cap = std::max(1u, max_threads / over_share_every);
    _heavy_spare_cap = std::max(1u, max_threads - 1);
    std::size_t capacity = unbounded_ring_capacity;
    if (_hand_off) {
      capacity = 2 * static_cast<std::size_t>(max_threads);
    } else if (!_unbounded) {
      capacity = static_cast<std::size_t>(_bound);
    }
    _ring.emplace(capacity);
    if (!_hand_off && !_unbounded) {
      _over_share.emplace(capacity);
      _heavy.emplace(capacity);
    }
  }
  bool created() const noexcept { return _ring.has_value(); }
  bool unbounded() const noexcept { return _unbounded; }

  /// An entry for an idle worker that was reserved for it: the ring only. False when the ring
  /// is full (possible with a queue: eager), and the caller undoes its reservation.
  bool push_reserved(pool_task* t) noexcept { return _ring->try_push(reinterpret_cast<pool_entry>(t) | reserved_bit); }

  /// An unreserved entry, within the bound (over-share tasks within the over-share queue's).
  bool push(pool_task* t) noexcept {
    const pool_entry e = reinterpret_cast<pool_entry>(t);
    if (t->over_share && _over_share) {
      // A caller beyond its share waits in a queue of its own, as large as the main one: it
      // can never take a slot from callers within their share.
      if (_over_share_count.fetch_add(1, std::memory_order_relaxed) >= _bound) {
        _over_share_count.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
      if (_over_share->try_push(e | over_share_bit)) return true;
      _over_share_count.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    if (_unbounded) {
      if (_overflow_size.load(std::memory_order_relaxed) == 0 && _ring->try_push(e)) return true;
      std::lock_guard lock(_overflow_mu);
      t->next = nullptr;
      if (_overflow_tail) {
        _overflow_tail->next = t;
      } else {
        _overflow_head = t;
      }
      _overflow_tail = t;
      _overflow_size.store(_overflow_size.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return true;
    }
    if (_exact_count) {
      if (_queued_count.fetch_add(1, std::memory_order_relaxed) >= _bound) {
        _queued_count.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
      if (_ring->try_push(e)) return true;
      _queued_count.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return _ring->try_push(e);
  }

  /// A singleton task (thread_pool::submit_singleton): no bound, it waits in an intrusive list
  /// (pool_task::next) that pop() serves ahead of the queues, except one pop in
  /// `queue_every`, so a stream of singletons (a connection storm's event lanes) cannot starve
  /// the calls. Rare (per connection event, not per call), so a mutex is fine; a pop pays one
  /// relaxed load while the list is empty.
  void push_singleton(pool_task* t) noexcept {
    std::lock_guard lock(_singleton_mu);
    t->next = nullptr;
    if (_singleton_tail) {
      _singleton_tail->next = t;
    } else {
      _singleton_head = t;
    }
    _singleton_tail = t;
    _singletons.store(_singletons.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// The next entry, un-counted from the bound it was counted in: a singleton, else from the
  /// queues (the queues first one pop in `queue_every`). `heavy_may_go_ahead`: the worker's
  /// heavy_budget is paid. An entry with heavy_bit holds a heavy slot: heavy_done() after it.
  bool pop(pool_entry& e, bool heavy_may_go_ahead) noexcept {
    if (_singletons.load(std::memory_order_relaxed) == 0) return pop_queued(e, heavy_may_go_ahead);
    thread_local unsigned pops = 0;
    if (++pops % queue_every == 0 && pop_queued(e, heavy_may_go_ahead)) return true;
    return pop_singleton(e) || pop_queued(e, heavy_may_go_ahead);
  }

  /// The next entry of the queues proper, leaving singletons where they are.
  bool pop_queued(pool_entry& e, bool heavy_may_go_ahead) noexcept {
    if (!_over_share) return pop_main(e);
    thread_local unsigned pops = 0;
    const unsigned ahead_cap = heavy_may_go_ahead ? _heavy_busy_cap : 0;
    if (++pops % over_share_every == 0) {
      if (pop_heavy(e, ahead_cap) || pop_over_share(e, ahead_cap)) return true;
    }
    if (pop_main(e)) return true;
    if (pop_over_share(e, ahead_cap)) return true;
    return pop_heavy(e, _heavy_spare_cap);  // nothing else waits
  }

  /// Everything, in any order and ignoring the heavy caps (run_queued_here: the pool is
  /// stopping and the caller runs what waits itself). Never sets heavy_bit.
  bool pop_any(pool_entry& e) noexcept {
    if (pop_main(e)) return true;
    if (!_over_share) return false;
    if (_over_share->try_pop(e) || _heavy->try_pop(e)) {
      _over_share_count.fetch_sub(1, std::memory_order_relaxed);
      e &= ~heavy_bit;
      return true;
    }
    return false;
  }

  /// A task popped with heavy_bit ended. True when heavy work waits: wake a worker for it (a
  /// parked one may have skipped it while the slots were taken).
  bool heavy_done() noexcept {
    _heavy_running.fetch_sub(1, std::memory_order_relaxed);
    return !_heavy->empty_approx();
  }

  /// Work a pop could take now: heavy work counts only while a heavy slot is free, so a worker
  /// does not spin on work it may not take (the worker that frees a slot wakes one).
  bool has_work() const noexcept {
    return _singletons.load(std::memory_order_relaxed) != 0 || !_ring->empty_approx() || (_unbounded && _overflow_size.load(std::memory_order_relaxed) != 0) ||
           (_over_share && (!_over_share->empty_approx() ||
                            (!_heavy->empty_approx() && _heavy_running.load(std::memory_order_relaxed) < _heavy_spare_cap)));
  }

  unsigned heavy_running() const noexcept { return _heavy_running.load(std::memory_order_relaxed); }

  /// Tasks waiting now (approximate while they move).
  std::uint64_t size() const noexcept {
    if (!_ring) return 0;
    const auto extra = _over_share_count.load(std::memory_order_relaxed);
    const std::uint64_t over = extra > 0 ? static_cast<std::uint64_t>(extra) : 0;
    if (_exact_count) {
      const auto q = _queued_count.load(std::memory_order_relaxed);
      return (q > 0 ? static_cast<std::uint64_t>(q) : 0) + over + _singletons.load(std::memory_order_relaxed);
    }
    return _ring->size_approx() + _overflow_size.load(std::memory_order_relaxed) + over +
           _singletons.load(std::memory_order_relaxed);
  }

 private:
  bool pop_singleton(pool_entry& e) noexcept {
    std::lock_guard lock(_singleton_mu);
    pool_task* t = _singleton_head;
    if (!t) return false;
    _singleton_head = t->next;
    if (!_singleton_head) _singleton_tail = nullptr;
    _singletons.store(_singletons.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    e = reinterpret_cast<pool_entry>(t);
    return true;
  }

  static bool is_heavy(pool_entry e) noexcept {
    const std::atomic<std::uint16_t>* hint = task_of(e)->cost_hint;
    return hint != nullptr && hint->load(std::memory_order_relaxed) >= heavy_task_ticks;
  }

  /// A heavy slot, if fewer than `cap` are taken.
  bool claim_heavy(unsigned cap) noexcept {
    unsigned n = _heavy_running.load(std::memory_order_relaxed);
    do {
      if (n >= cap) return false;
    } while (!_heavy_running.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
  }

  /// The next cheap over-share entry; a heavy one met on the way runs only if it gets a heavy
  /// slot under `heavy_cap`, else it moves to the heavy ring (it stays counted in the bound, so
  /// the heavy ring, as large as the bound, always has room).
  bool pop_over_share(pool_entry& e, unsigned heavy_cap) noexcept {
    while (_over_share->try_pop(e)) {
      if (is_heavy(e)) {
        // The push fails only for an instant, while a pop of the ring's oldest entry is
        // finishing: then run it rather than lose it.
        if (!claim_heavy(heavy_cap)) {
          if (_heavy->try_push(e)) continue;
          _heavy_running.fetch_add(1, std::memory_order_relaxed);
        }
        e |= heavy_bit;
      }
      _over_share_count.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  bool pop_heavy(pool_entry& e, unsigned cap) noexcept {
    if (_heavy->empty_approx() || !claim_heavy(cap)) return false;
    if (!_heavy->try_pop(e)) {
      _heavy_running.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    _over_share_count.fetch_sub(1, std::memory_order_relaxed);
    e |= heavy_bit;
    return true;
  }

  bool pop_main(pool_entry& e) noexcept {
    if (_ring->try_pop(e)) {
      if (_exact_count && (e & tag_bits) == 0) _queued_count.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    if (!_unbounded || _overflow_size.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard lock(_overflow_mu);
    pool_task* t = _overflow_head;
    if (!t) return false;
    _overflow_head = t->next;
    if (!_overflow_head) _overflow_tail = nullptr;
    _overflow_size.store(_overflow_size.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    e = reinterpret_cast<pool_entry>(t);
    return true;
  }

  const int _bound;
  const bool _hand_off;
  const bool _unbounded;
  const bool _exact_count;  // bounded queue whose size the ring cannot express exactly

  std::optional<mpmc_queue<pool_entry>> _ring;
  std::optional<mpmc_queue<pool_entry>> _over_share;  // bounded queues: tasks beyond a caller's share
  std::optional<mpmc_queue<pool_entry>> _heavy;       // heavy over-share tasks that could not run yet
  unsigned _heavy_busy_cap = 1;   // heavy slots while other work waits
  unsigned _heavy_spare_cap = 1;  // heavy slots when nothing else does
  alignas(64) std::atomic<std::int64_t> _queued_count{0};      // exact_count only
  alignas(64) std::atomic<std::int64_t> _over_share_count{0};  // exact bound of _over_share and _heavy
  alignas(64) std::atomic<unsigned> _heavy_running{0};        // workers running heavy tasks

  // Unbounded overflow (queue < 0).
  alignas(64) std::atomic<std::size_t> _overflow_size{0};
  std::mutex _overflow_mu;
  pool_task* _overflow_head = nullptr;
  pool_task* _overflow_tail = nullptr;

  // Singletons (thread_pool::submit_singleton).
  alignas(64) std::atomic<std::size_t> _singletons{0};
  std::mutex _singleton_mu;
  pool_task* _singleton_head = nullptr;
  pool_task* _singleton_tail = nullptr;
};

}  // namespace ringrpc::detail

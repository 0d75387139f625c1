#pragma once
// Where a thread pool's accepted work waits (worker_pool.hpp): the main queue, its unbounded
// overflow, and the over-share queue that keeps one caller's backlog out of the others' way.
// Internal to the pool's .cpp files; every operation is inline because each task pays one push
// and one pop.

#include <atomic>
#include <bit>
#include <cstdint>
#include <mutex>
#include <optional>

#include "base/mpmc_queue.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

/// A task pointer with tag bits: whether the submitter reserved an idle worker for it (see
/// worker_pool_impl.hpp, "hand-off"), and whether it waits in the over-share queue.
using pool_entry = std::uintptr_t;
constexpr pool_entry reserved_bit = 1;
constexpr pool_entry over_share_bit = 2;
constexpr pool_entry tag_bits = reserved_bit | over_share_bit;

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
    std::size_t capacity = unbounded_ring_capacity;
    if (_hand_off) {
      capacity = 2 * static_cast<std::size_t>(max_threads);
    } else if (!_unbounded) {
      capacity = static_cast<std::size_t>(_bound);
    }
    _ring.emplace(capacity);
    if (!_hand_off && !_unbounded) _over_share.emplace(capacity);
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
  /// queues (the queues first one pop in `queue_every`).
  bool pop(pool_entry& e) noexcept {
    if (_singletons.load(std::memory_order_relaxed) == 0) return pop_queued(e);
    thread_local unsigned pops = 0;
    if (++pops % queue_every == 0 && pop_queued(e)) return true;
    return pop_singleton(e) || pop_queued(e);
  }

  /// The next entry of the queues proper, leaving singletons where they are.
  bool pop_queued(pool_entry& e) noexcept {
    thread_local unsigned pops = 0;
    if (_over_share && ++pops % over_share_every == 0 && pop_over_share(e)) return true;
    if (pop_main(e)) return true;
    return pop_over_share(e);
  }

  bool has_work() const noexcept {
    return _singletons.load(std::memory_order_relaxed) != 0 || !_ring->empty_approx() || (_unbounded && _overflow_size.load(std::memory_order_relaxed) != 0) ||
           (_over_share && !_over_share->empty_approx());
  }

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

  bool pop_over_share(pool_entry& e) noexcept {
    if (!_over_share || !_over_share->try_pop(e)) return false;
    _over_share_count.fetch_sub(1, std::memory_order_relaxed);
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
  alignas(64) std::atomic<std::int64_t> _queued_count{0};      // exact_count only
  alignas(64) std::atomic<std::int64_t> _over_share_count{0};  // exact bound of _over_share

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

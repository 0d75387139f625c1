// Bounded multi-producer multi-consumer queue (per-cell sequence numbers,
// after Dmitry Vyukov's bounded MPMC design). Header-only.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace ringrpc::detail {

/// Bounded, fixed-capacity FIFO queue for any number of producer and consumer
/// threads.
///
/// Contract:
/// - Construction and destruction are not thread-safe: the queue must be fully
///   constructed before any thread uses it, and no thread may be inside a
///   member function when it is destroyed. Elements still queued at
///   destruction are destroyed then.
/// - `try_push`, `try_pop`, `capacity`, `size_approx` and `empty_approx` may
///   be called concurrently from any number of threads. A thread may both
///   push and pop.
/// - Order: every element is popped exactly once. Elements are handed out in
///   the order in which producers claimed slots, so two pushes made by one
///   thread are popped in that order; and any single consumer sees each
///   producer's elements in that producer's push order.
/// - "Full": `try_push` returns false when the slot it would write is still
///   occupied, i.e. `capacity()` elements are queued, or the consumer that
///   took the oldest element has not finished moving it out yet. Because
///   `value` is taken by value, a rejected element is destroyed with the
///   parameter: a caller that wants to retry a move-only `T` must not
///   `std::move` its only copy in (cheap handles such as pointers are fine).
/// - "Empty": `try_pop` returns false (and leaves `out` untouched) when the
///   next element in FIFO order is not available, i.e. nothing is queued, or
///   the producer that claimed that slot has not finished writing it yet.
///   A false return may therefore be transient; callers retry or back off.
/// - Progress: no locks and no system calls, but not strictly lock-free: a
///   thread suspended between claiming a slot and publishing it holds up that
///   one slot (and everything behind it in FIFO order) until it resumes.
/// - No allocation after construction; `try_push`/`try_pop` are noexcept and
///   require `T` to be nothrow move-constructible, move-assignable and
///   destructible.
template <class T>
class mpmc_queue {
    static_assert(std::is_nothrow_move_constructible_v<T>,
                  "mpmc_queue<T> requires a nothrow move constructor");
    static_assert(std::is_nothrow_move_assignable_v<T>,
                  "mpmc_queue<T> requires a nothrow move assignment");
    static_assert(std::is_nothrow_destructible_v<T>,
                  "mpmc_queue<T> requires a nothrow destructor");

public:
    /// Rounds `capacity` up to a power of two (at least 2). Throws
    /// std::invalid_argument for 0 or a capacity that cannot be rounded up,
    /// std::bad_alloc if the cells cannot be allocated.
    explicit mpmc_queue(std::size_t capacity)
        : _mask(round_capacity(capacity) - 1),
          _cells(std::make_unique<cell[]>(_mask + 1)) {
        // Cell i starts out "free for the producer of position i".
        for (std::size_t i = 0; i <= _mask; ++i) {
            _cells[i].sequence.store(i, std::memory_order_relaxed);
        }
        // No fence needed: handing the queue to other threads (thread start,
        // a mutex, a release store of a pointer...) already publishes these.
    }

    mpmc_queue(const mpmc_queue&) = delete;
    mpmc_queue& operator=(const mpmc_queue&) = delete;

    ~mpmc_queue() {
        if constexpr (!std::is_trivially_destructible_v<T>) {
            // Single-threaded by contract, so every position between the two
            // counters holds a fully constructed element.
            const std::size_t tail = _enqueue_pos.load(std::memory_order_relaxed);
            for (std::size_t pos = _dequeue_pos.load(std::memory_order_relaxed);
                 pos != tail; ++pos) {
                std::destroy_at(_cells[pos & _mask].value_ptr());
            }
        }
    }

    /// Moves `value` into the queue. Returns false if the queue is full (see
    /// the class comment); `value` is then destroyed with the parameter.
    bool try_push(T value) noexcept {
        std::size_t pos = _enqueue_pos.load(std::memory_order_relaxed);
        cell* c;
        for (;;) {
            c = &_cells[pos & _mask];
            // Acquire pairs with the consumer's release in try_pop: once we
            // see the slot marked free for `pos`, that consumer's move-out and
            // destruction of the previous element happen-before our write.
            const std::size_t seq = c->sequence.load(std::memory_order_acquire);
            const auto diff = to_signed(seq - pos);
            if (diff == 0) {
                // Relaxed is enough: the counter only arbitrates which
                // producer owns `pos`; the element data is published through
                // the cell's sequence, not through this counter. A weak CAS
                // is fine because a spurious failure just retries.
                if (_enqueue_pos.compare_exchange_weak(pos, pos + 1,
                                                       std::memory_order_relaxed,
                                                       std::memory_order_relaxed)) {
                    break;
                }
                // On failure `pos` was reloaded; retry with the new position.
            } else if (diff < 0) {
                // The slot still holds the element from one lap ago: full.
                return false;
            } else {
                // Another producer already claimed `pos`; catch up.
                pos = _enqueue_pos.load(std::memory_order_relaxed);
            }
        }
        ::new (static_cast<void*>(c->storage)) T(std::move(value));
        // Release so that a consumer whose acquire load sees pos + 1 also sees
        // the element fully constructed.
        c->sequence.store(pos + 1, std::memory_order_release);
        return true;
    }

    /// Moves the oldest available element into `out`. Returns false if the
    /// queue is empty (see the class comment); `out` is then untouched.
    bool try_pop(T& out) noexcept {
        std::size_t pos = _dequeue_pos.load(std::memory_order_relaxed);
        cell* c;
        for (;;) {
            c = &_cells[pos & _mask];
            // Acquire pairs with the producer's release in try_push: seeing
            // pos + 1 guarantees the element's construction is visible to us.
            const std::size_t seq = c->sequence.load(std::memory_order_acquire);
            const auto diff = to_signed(seq - (pos + 1));
            if (diff == 0) {
                // Relaxed for the same reason as in try_push: the counter only
                // decides ownership; data visibility comes from `sequence`.
                if (_dequeue_pos.compare_exchange_weak(pos, pos + 1,
                                                       std::memory_order_relaxed,
                                                       std::memory_order_relaxed)) {
                    break;
                }
            } else if (diff < 0) {
                // The producer for `pos` has not published yet: empty.
                return false;
            } else {
                // Another consumer already took `pos`; catch up.
                pos = _dequeue_pos.load(std::memory_order_relaxed);
            }
        }
        T* p = c->value_ptr();
        out = std::move(*p);
        std::destroy_at(p);
        // Release so that the producer that reuses this slot on the next lap
        // (pos + capacity) cannot start writing before our read and
        // destruction above are complete.
        c->sequence.store(pos + _mask + 1, std::memory_order_release);
        return true;
    }

    std::size_t capacity() const noexcept { return _mask + 1; }

    /// Number of claimed-but-not-yet-popped slots at some recent moment. May
    /// be stale by the time it returns; always in [0, capacity()].
    std::size_t size_approx() const noexcept {
        // The two loads are not a consistent snapshot, so the raw difference
        // can be "negative" (wrapped) or exceed the capacity; clamp both ends.
        const std::size_t head = _dequeue_pos.load(std::memory_order_relaxed);
        const std::size_t tail = _enqueue_pos.load(std::memory_order_relaxed);
        const auto diff = to_signed(tail - head);
        if (diff <= 0) {
            return 0;
        }
        const auto size = static_cast<std::size_t>(diff);
        return size > capacity() ? capacity() : size;
    }

    /// Same caveats as size_approx().
    bool empty_approx() const noexcept { return size_approx() == 0; }

private:
    static constexpr std::size_t cache_line_size = 64;

    struct cell {
        std::atomic<std::size_t> sequence{0};
        alignas(T) std::byte storage[sizeof(T)];

        T* value_ptr() noexcept {
            return std::launder(reinterpret_cast<T*>(storage));
        }
    };

    static std::size_t round_capacity(std::size_t requested) {
        if (requested == 0) {
            throw std::invalid_argument("mpmc_queue: capacity must be > 0");
        }
        constexpr std::size_t max_capacity =
            std::size_t{1} << (std::numeric_limits<std::size_t>::digits - 2);
        if (requested > max_capacity) {
            throw std::invalid_argument("mpmc_queue: capacity too large");
        }
        return requested < 2 ? 2 : std::bit_ceil(requested);
    }

    // Positions and sequences are free-running counters; their unsigned
    // difference reinterpreted as signed gives the right sign across wrap.
    static std::ptrdiff_t to_signed(std::size_t v) noexcept {
        return static_cast<std::ptrdiff_t>(v);
    }

    // Read-only after construction, shared by every thread.
    const std::size_t _mask;
    const std::unique_ptr<cell[]> _cells;

    // Each counter on its own cache line: producers hammer one, consumers the
    // other, and neither should invalidate the line holding _mask/_cells.
    alignas(cache_line_size) std::atomic<std::size_t> _enqueue_pos{0};
    alignas(cache_line_size) std::atomic<std::size_t> _dequeue_pos{0};
    // alignas also pads sizeof(mpmc_queue) to a multiple of 64, so whatever
    // follows the queue in memory does not share _dequeue_pos's line.
};

}  // namespace ringrpc::detail

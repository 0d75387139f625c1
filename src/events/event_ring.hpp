#pragma once
// The bounded ring under each event queue. Internal to src/events.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <utility>

#include "ringrpc/event_bus.hpp"

namespace ringrpc::detail {

using event_ptr = std::shared_ptr<const event>;

// One queue's bounded buffer: any number of posting threads, one dispatch thread. Each cell's
// sequence number says whose turn it is (Vyukov's bounded queue). The tail counter doubles as
// each event's position, which lifecycle events use to keep their place (see event_queue);
// mpmc_queue.hpp hides positions, hence this variant. The top bit of the tail closes the ring:
// once set, no position can be claimed, so the set of events to deliver before ending is fixed.
class event_ring {
 public:
  enum class push_result { ok, full, closed };

  explicit event_ring(std::size_t capacity)
      : _mask(std::bit_ceil(std::max<std::size_t>(capacity, 2)) - 1),
        _cells(std::make_unique<cell[]>(_mask + 1)) {
    for (std::size_t i = 0; i <= _mask; ++i) _cells[i].sequence.store(i, std::memory_order_relaxed);
  }

  std::size_t capacity() const noexcept { return _mask + 1; }

  // Any thread.
  push_result try_push(const event_ptr& e) noexcept {
    std::size_t pos = _tail.load(std::memory_order_relaxed);
    cell* c = nullptr;
    for (;;) {
      if ((pos & closed_bit) != 0) return push_result::closed;
      c = &_cells[pos & _mask];
      const auto diff = static_cast<std::ptrdiff_t>(c->sequence.load(std::memory_order_acquire) - pos);
      if (diff == 0) {
        // Relaxed: the tail only arbitrates ownership of `pos`; the event is published through
        // the cell's sequence. A failed CAS reloads `pos`, closed bit included.
        if (_tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
          break;
        }
      } else if (diff < 0) {
        return push_result::full;  // the cell still holds the event of one lap ago
      } else {
        pos = _tail.load(std::memory_order_relaxed);
      }
    }
    c->value = e;
    c->sequence.store(pos + 1, std::memory_order_release);
    return push_result::ok;
  }

  // Dispatch thread only.
  bool try_pop(event_ptr& out) noexcept {
    cell& c = _cells[_head & _mask];
    if (c.sequence.load(std::memory_order_acquire) != _head + 1) return false;
    out = std::move(c.value);
    c.sequence.store(_head + _mask + 1, std::memory_order_release);
    ++_head;
    return true;
  }
  bool ready() const noexcept {
    return _cells[_head & _mask].sequence.load(std::memory_order_acquire) == _head + 1;
  }
  std::size_t consumed() const noexcept { return _head; }

  // Any thread. Positions claimed so far, i.e. events accepted (some maybe still being written).
  std::size_t claimed() const noexcept {
    return _tail.load(std::memory_order_relaxed) & ~closed_bit;
  }
  // Returns the final number of positions; every one of them will be published.
  std::size_t close() noexcept {
    return _tail.fetch_or(closed_bit, std::memory_order_acq_rel) & ~closed_bit;
  }

 private:
  static constexpr std::size_t closed_bit = ~(~std::size_t{0} >> 1);

  struct cell {
    std::atomic<std::size_t> sequence{0};
    event_ptr value;
  };

  const std::size_t _mask;
  const std::unique_ptr<cell[]> _cells;
  alignas(64) std::atomic<std::size_t> _tail{0};
  alignas(64) std::size_t _head = 0;
};

}  // namespace ringrpc::detail

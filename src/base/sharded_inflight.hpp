#pragma once
// A count of work in flight that many threads enter and leave, each thread writing a cache line
// of its own: the admission count of an endpoint that every reader and pool worker touches on
// every call would otherwise be one line bouncing between all of them.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/thread_slot.hpp"

namespace ringrpc::detail {

/// enter() and leave() change the calling thread's slot (seq_cst); a unit of work may enter on
/// one thread and leave on another, so a slot can go negative and only the sum means anything.
/// total() sums the slots: with every change seq_cst, every enter() ordered before total()
/// began is counted, and a leave() racing with it may or may not be, so total() can over-count
/// but never reports zero while something that entered before it is still in flight. That is
/// exactly what "run on_stop once nothing is in flight" needs.
class sharded_inflight {
 public:
  void enter() noexcept { _slots[thread_slot()].v.fetch_add(1, std::memory_order_seq_cst); }
  void leave() noexcept { _slots[thread_slot()].v.fetch_sub(1, std::memory_order_seq_cst); }
  std::int64_t total() const noexcept {
    std::int64_t n = 0;
    for (const auto& s : _slots) n += s.v.load(std::memory_order_seq_cst);
    return n;
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::int64_t> v{0};
  };
  std::array<slot, thread_slots> _slots{};
};

}  // namespace ringrpc::detail

#pragma once
// A counter for threads that come and go (pool workers): each thread adds to a slot of its own
// cache line; reading sums the slots.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/thread_slot.hpp"

namespace ringrpc::detail {

/// A counter many threads add to (pool workers come and go): each thread writes its own
/// cache line, the reader sums them. A thread that holds one of the first thread_slots slots
/// alone (counter_slot()) adds with a load and a store: no locked instruction, which on the
/// call path cost as much as the rest of the call's counting. Threads beyond those share the
/// other slots, round robin, and add atomically.
class sharded_counter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    const counter_slot_claim& mine = counter_slot();
    std::atomic<std::uint64_t>& v = _slots[mine.index].v;
    if (mine.exclusive) {
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      v.fetch_add(n, std::memory_order_relaxed);
    }
  }
  std::uint64_t get() const noexcept {
    std::uint64_t n = 0;
    for (const auto& s : _slots) n += s.v.load(std::memory_order_relaxed);
    return n;
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> v{0};
  };
  std::array<slot, counter_slots> _slots{};
};

}  // namespace ringrpc::detail

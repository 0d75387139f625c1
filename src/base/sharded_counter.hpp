#pragma once
// A counter for threads that come and go (pool workers): each thread adds to a slot of its own
// cache line, chosen once per thread; reading sums the slots.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/thread_slot.hpp"

namespace ringrpc::detail {

/// A counter many threads add to (pool workers come and go): each thread writes its own
/// cache line, the reader sums them.
class sharded_counter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    _slots[thread_slot()].v.fetch_add(n, std::memory_order_relaxed);
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
  std::array<slot, thread_slots> _slots{};
};

}  // namespace ringrpc::detail

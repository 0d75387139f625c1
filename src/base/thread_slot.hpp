#pragma once
// Which of a sharded counter's slots the calling thread writes: chosen once per thread, round
// robin, so threads that come and go (pool workers) spread over the slots.

#include <atomic>
#include <cstddef>

namespace ringrpc::detail {

inline constexpr std::size_t thread_slots = 16;

inline std::size_t thread_slot() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed) % thread_slots;
  return mine;
}

}  // namespace ringrpc::detail

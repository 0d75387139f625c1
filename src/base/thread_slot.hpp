#pragma once
// Which of a sharded counter's slots the calling thread writes: chosen once per thread, round
// robin, so threads that come and go (pool workers) spread over the slots.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringrpc::detail {

inline constexpr std::size_t thread_slots = 16;

/// For counters every thread adds to atomically (sharded_inflight): slots shared round robin.
inline std::size_t thread_slot() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed) % thread_slots;
  return mine;
}

/// For sharded_counter: slots [0, thread_slots) each belong to one live thread at a time, which
/// may then add with a plain load and store; the slots after them are shared round robin by
/// the threads that found none free, which add atomically.
inline constexpr std::size_t counter_slots = 2 * thread_slots;

struct counter_slot_claim {
  std::size_t index = 0;
  bool exclusive = false;
};

/// This thread's counter slot, claimed on its first call and given back when the thread ends.
/// Out of line (thread_slot.cpp, in the core library), so there is one table of claims, not one
/// in every library that would inline it.
const counter_slot_claim& counter_slot() noexcept;

}  // namespace ringrpc::detail

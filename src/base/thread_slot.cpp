// The claims of sharded_counter's exclusive slots (thread_slot.hpp).

#include "base/thread_slot.hpp"

#include <bit>

namespace ringrpc::detail {

namespace {

// Bit i: slot i is a live thread's alone.
std::atomic<std::uint32_t> exclusive_taken{0};
static_assert(thread_slots <= 32);

struct owned_slot : counter_slot_claim {
  owned_slot() noexcept {
    constexpr std::uint32_t all = thread_slots == 32 ? ~0u : (1u << thread_slots) - 1;
    std::uint32_t taken = exclusive_taken.load(std::memory_order_relaxed);
    while (taken != all) {
      const auto i = static_cast<std::size_t>(std::countr_one(taken));
      // Acquire: the slot's last owner's stores (released below) come before ours.
      if (exclusive_taken.compare_exchange_weak(taken, taken | (1u << i), std::memory_order_acquire,
                                                std::memory_order_relaxed)) {
        index = i;
        exclusive = true;
        return;
      }
    }
    index = shared_slot();
  }
  ~owned_slot() {
    if (!exclusive) return;
    const std::size_t mine = index;
    // A counter added to later in this thread's exit (another thread_local's destructor) goes
    // to a shared slot, atomically: the slot given back may have a new owner by then.
    exclusive = false;
    index = shared_slot();
    exclusive_taken.fetch_and(~(1u << mine), std::memory_order_release);
  }
  owned_slot(const owned_slot&) = delete;
  owned_slot& operator=(const owned_slot&) = delete;

  static std::size_t shared_slot() noexcept {
    static std::atomic<std::size_t> next{0};
    return thread_slots + next.fetch_add(1, std::memory_order_relaxed) % (counter_slots - thread_slots);
  }
};

}  // namespace

const counter_slot_claim& counter_slot() noexcept {
  thread_local owned_slot mine;
  return mine;
}

}  // namespace ringrpc::detail

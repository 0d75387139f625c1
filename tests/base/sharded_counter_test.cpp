// Tests for ringrpc::detail::sharded_counter and its slots: the first threads to count hold a
// slot alone (and add without a locked instruction), later ones share the rest; a slot given
// back by a thread that ended passes to the next thread with its count intact; the sum is
// exact whatever the mix.
#include "base/sharded_counter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <thread>
#include <vector>

namespace ringrpc::detail {
namespace {

// Runs `n` threads that each claim a slot, wait until all have, then run `body(claim)`.
template <class F>
void with_threads(int n, F body) {
  std::barrier all_claimed(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      const counter_slot_claim& mine = counter_slot();
      all_claimed.arrive_and_wait();  // every thread holds its slot at once
      body(mine);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(sharded_counter, the_first_threads_hold_slots_alone_and_the_rest_share) {
  // The test's own main thread has not counted: up to thread_slots threads find a free slot.
  std::atomic<int> alone{0}, shared{0}, bad_index{0};
  std::vector<std::atomic<int>> holders(counter_slots);
  with_threads(static_cast<int>(thread_slots) + 8, [&](const counter_slot_claim& c) {
    (c.exclusive ? alone : shared).fetch_add(1);
    if (c.exclusive != (c.index < thread_slots) || c.index >= counter_slots) bad_index.fetch_add(1);
    holders[c.index].fetch_add(1);
  });
  EXPECT_EQ(alone.load(), static_cast<int>(thread_slots));
  EXPECT_EQ(shared.load(), 8);
  EXPECT_EQ(bad_index.load(), 0);
  for (std::size_t i = 0; i < thread_slots; ++i) EXPECT_EQ(holders[i].load(), 1) << "slot " << i;
}

TEST(sharded_counter, slots_given_back_by_ended_threads_are_claimed_again) {
  // The previous waves' threads have ended: a new thread holds a slot alone again.
  for (int wave = 0; wave < 3; ++wave) {
    std::atomic<int> alone{0};
    with_threads(4, [&](const counter_slot_claim& c) { alone.fetch_add(c.exclusive ? 1 : 0); });
    EXPECT_EQ(alone.load(), 4) << "wave " << wave;
  }
}

TEST(sharded_counter, the_sum_is_exact_across_threads_that_come_and_go) {
  sharded_counter counter;
  constexpr int per_thread = 20'000;
  constexpr auto amount = [](int i) -> std::uint64_t { return i % 3 == 0 ? 2 : 1; };
  constexpr std::uint64_t per_thread_sum = [&] {
    std::uint64_t sum = 0;
    for (int i = 0; i < per_thread; ++i) sum += amount(i);
    return sum;
  }();
  std::uint64_t expected = 0;
  // Waves of more threads than exclusive slots, adding at once: each wave's threads take over
  // the slots the last wave gave back, on top of the counts left in them.
  for (int wave = 0; wave < 5; ++wave) {
    const int n = static_cast<int>(thread_slots) + 4 + wave;
    with_threads(n, [&](const counter_slot_claim&) {
      for (int i = 0; i < per_thread; ++i) counter.add(amount(i));
    });
    expected += static_cast<std::uint64_t>(n) * per_thread_sum;
    EXPECT_EQ(counter.get(), expected) << "after wave " << wave;
  }
}

}  // namespace
}  // namespace ringrpc::detail

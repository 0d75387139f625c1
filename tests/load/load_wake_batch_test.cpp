// wake_batch: how many replies a closed-loop turn waits for before the kernel wakes it.
#include "wake_batch.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using ringrpc::load::wake_batch;

constexpr std::int64_t ms = 1'000'000;

// Feeds `per_ms` replies in each of `n` milliseconds, in turns of a tenth of a millisecond.
void feed(wake_batch& w, std::int64_t& now, unsigned per_ms, int n) {
  for (int i = 0; i < n * 10; ++i) {
    now += ms / 10;
    w.completed(per_ms / 10, now);
  }
}

TEST(WakeBatch, StartsAtOneAndFollowsTheRate) {
  wake_batch w(64, 4);  // 32 us window
  EXPECT_EQ(w.target(), 1u) << "nothing measured yet: wake on every reply";
  std::int64_t now = 1000 * ms;
  feed(w, now, 100, 2);  // 100 replies per ms: 3.2 in a window
  EXPECT_EQ(w.target(), 3u);
  feed(w, now, 1000, 2);  // 32 in a window, capped at 4
  EXPECT_EQ(w.target(), 4u);
  feed(w, now, 20, 2);  // 0.64 in a window: no batching
  EXPECT_EQ(w.target(), 1u);
}

TEST(WakeBatch, NeverMoreThanAnEighthOfTheCallsInFlight) {
  std::int64_t now = 1000 * ms;
  wake_batch few(16, 4);
  feed(few, now, 1000, 2);
  EXPECT_EQ(few.target(), 2u);
  wake_batch one_connection(1, 4);
  feed(one_connection, now, 1000, 2);
  EXPECT_EQ(one_connection.target(), 1u) << "ping-pong latency is measured reply by reply";
}

TEST(WakeBatch, MaxOfOneTurnsItOff) {
  std::int64_t now = 1000 * ms;
  wake_batch w(1024, 1);
  feed(w, now, 1000, 3);
  EXPECT_EQ(w.target(), 1u);
}

TEST(WakeBatch, ACutOffWaitFallsBackToOneUntilMeasuredAgain) {
  std::int64_t now = 1000 * ms;
  wake_batch w(64, 4);
  feed(w, now, 1000, 2);
  ASSERT_EQ(w.target(), 4u);
  now += wake_batch::bound_ns;
  w.timed_out(now);
  EXPECT_EQ(w.target(), 1u);
  // Replies counted before the cut-off do not carry over into the next estimate.
  now += ms / 2;
  w.completed(1, now);
  EXPECT_EQ(w.target(), 1u);
  now += ms / 2;
  w.completed(1, now);
  EXPECT_EQ(w.target(), 1u) << "2 replies in a millisecond is no batch";
  feed(w, now, 1000, 2);
  EXPECT_EQ(w.target(), 4u);
}

TEST(WakeBatch, TheCutOffIsPastTheNextSchedulerTick) {
  // At HZ 250 (Debian's) ticks are 4 ms apart; a shorter cut-off reprograms the timer per wait.
  EXPECT_GE(wake_batch::bound_ns, 4 * ms);
}

}  // namespace

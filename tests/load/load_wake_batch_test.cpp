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

// --conn-ramp down: once connections stop, a batch sized for all of them would wait for more
// replies than are in flight, each turn then sitting out the cut-off.
TEST(WakeBatch, ShrinksWithTheCallsThatRampedDown) {
  std::int64_t now = 1000 * ms;
  wake_batch w(64, 8);
  feed(w, now, 1000, 2);
  ASSERT_EQ(w.target(), 8u);
  w.drop_calls(48);  // 16 left
  EXPECT_EQ(w.target(), 2u) << "at once, not after the next measurement";
  feed(w, now, 1000, 2);
  EXPECT_EQ(w.target(), 2u);
  w.drop_calls(100);  // more than are left: none
  EXPECT_EQ(w.target(), 1u);
  feed(w, now, 1000, 2);
  EXPECT_EQ(w.target(), 1u);
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

// Replies are gathered in batches when they come fast (wake_batch.hpp); a reply that arrives
// alone after the server has gone quiet is not held for the rest of a batch beyond the cut-off.
// What the loop asks io_uring_enter for decides that, so that is what is checked: with the
// batch at its largest, a turn still ends within bound_ns, however far off the loop's own next
// wake-up is; a turn that was cut off, or the end of issuing, goes back to waking on each reply.
TEST(WakeBatch, ALoneReplyIsNotHeldForABatch) {
  constexpr std::int64_t t0 = 1'000 * ms;
  wake_batch wake(64, 16, 1'000'000'000);  // a 1 s window: any rate fills the batch
  EXPECT_EQ(wake.plan(t0, t0 + 100 * ms, 0, 4096, true).wait_nr, 1u) << "no batch before a rate is measured";
  wake.completed(1, t0);
  wake.completed(64, t0 + ms);
  ASSERT_EQ(wake.target(), 8u) << "the batch is capped at an eighth of the calls in flight";

  const std::int64_t now = t0 + 2 * ms;
  const auto w = wake.plan(now, now + 100 * ms, 3, 4096, true);
  EXPECT_TRUE(w.batched);
  EXPECT_EQ(w.wait_nr, 3u + 8u) << "this turn's sends complete first";
  EXPECT_EQ(w.deadline, now + wake_batch::bound_ns) << "a batched wait is cut off, not left to housekeeping";
  EXPECT_LE(wake_batch::bound_ns, 5 * ms);
  EXPECT_EQ(wake.plan(now, now + ms, 3, 4096, true).deadline, now + ms) << "an earlier wake-up still counts";
  EXPECT_EQ(wake.plan(now, now + 100 * ms, 5000, 4096, true).wait_nr, 2048u) << "at most half the CQ";

  const auto draining = wake.plan(now, now + 100 * ms, 3, 4096, false);
  EXPECT_FALSE(draining.batched);
  EXPECT_EQ(draining.wait_nr, 1u) << "once no call is issued, each reply wakes the loop";

  wake.timed_out(now + 5 * ms);
  const auto after = wake.plan(now + 5 * ms, now + 105 * ms, 3, 4096, true);
  EXPECT_EQ(after.wait_nr, 1u) << "after a cut-off turn, every reply wakes the loop";
  EXPECT_EQ(after.deadline, now + 105 * ms);
  // A quiet millisecond measures no rate at all: still one.
  wake.completed(0, now + 6 * ms);
  EXPECT_EQ(wake.target(), 1u);
}

}  // namespace

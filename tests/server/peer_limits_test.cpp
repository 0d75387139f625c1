// peer_limits (src/server/peer_limits.hpp): connections per address and the per-address accept rate,
// on a synthetic clock.
#include "server/peer_limits.hpp"

#include <gtest/gtest.h>

namespace {

using ringrpc::detail::peer_limits;
using verdict = peer_limits::verdict;
constexpr std::int64_t ms = 1'000'000;

TEST(PeerLimits, CapsConnectionsPerAddressAndFreesOnRelease) {
  peer_limits p(2, 0, 0);
  EXPECT_EQ(p.admit("10.0.0.1", 0), verdict::admitted);
  EXPECT_EQ(p.admit("10.0.0.1", 0), verdict::admitted);
  EXPECT_EQ(p.admit("10.0.0.1", 0), verdict::too_many);
  EXPECT_EQ(p.admit("10.0.0.2", 0), verdict::admitted) << "another host has its own count";
  EXPECT_EQ(p.open_from("10.0.0.1"), 2u);
  p.release("10.0.0.1");
  EXPECT_EQ(p.admit("10.0.0.1", 0), verdict::admitted);
  p.release("10.0.0.9");  // never admitted: ignored
  EXPECT_EQ(p.open_from("10.0.0.9"), 0u);
}

TEST(PeerLimits, RateIsATokenBucketThatSurvivesCloses) {
  peer_limits p(0, 10, 10);  // 10 a second, a burst of 10
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(p.admit("h", 0), verdict::admitted) << i;
    p.release("h");  // a connect-close loop must not reset the bucket
  }
  EXPECT_EQ(p.admit("h", 0), verdict::too_fast);
  EXPECT_EQ(p.admit("h", 50 * ms), verdict::too_fast) << "half a token";
  EXPECT_EQ(p.admit("h", 100 * ms), verdict::admitted) << "one token after 100 ms";
  EXPECT_EQ(p.admit("h", 100 * ms), verdict::too_fast);
  EXPECT_EQ(p.admit("other", 100 * ms), verdict::admitted);
}

TEST(PeerLimits, OffCostsNothingAndAdmitsAll) {
  peer_limits p(0, 0, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(p.admit("h", 0), verdict::admitted);
  EXPECT_EQ(p.open_from("h"), 0u) << "nothing is tracked when both limits are off";
}

}  // namespace

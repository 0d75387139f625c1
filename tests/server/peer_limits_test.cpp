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

namespace {

using handshake = peer_limits::handshake_verdict;

TEST(PeerLimits, HandshakesPerAddressAreCappedAndGivenBack) {
  peer_limits p(0, 0, 0, 2);  // connections uncounted, two handshakes per address
  EXPECT_EQ(p.admit_handshake("10.0.0.1", 0), handshake::counted);
  EXPECT_EQ(p.admit_handshake("10.0.0.1", 0), handshake::counted);
  EXPECT_EQ(p.admit_handshake("10.0.0.1", 0), handshake::refused) << "the address's share is taken";
  EXPECT_EQ(p.admit_handshake("10.0.0.2", 0), handshake::counted) << "another host has its own share";
  EXPECT_EQ(p.handshakes_from("10.0.0.1"), 2u);
  p.end_handshake("10.0.0.1");
  EXPECT_EQ(p.admit_handshake("10.0.0.1", 0), handshake::counted) << "a finished handshake frees its slot";
  p.end_handshake("10.0.0.9");  // never admitted: ignored
  p.end_handshake("10.0.0.2");
  EXPECT_EQ(p.handshakes_from("10.0.0.2"), 0u);
}

TEST(PeerLimits, HandshakesAndConnectionsShareAnEntryWithoutResettingEachOther) {
  peer_limits p(3, 0, 0, 1);
  ASSERT_EQ(p.admit("h", 0), verdict::admitted);
  ASSERT_EQ(p.admit_handshake("h", 0), handshake::counted);
  p.release("h");  // the connection count reaches 0 while a handshake is counted: kept
  EXPECT_EQ(p.admit_handshake("h", 0), handshake::refused);
  p.end_handshake("h");
  EXPECT_EQ(p.handshakes_from("h"), 0u);
  EXPECT_EQ(p.open_from("h"), 0u);
  EXPECT_EQ(p.admit_handshake("h", 0), handshake::counted);
}

TEST(PeerLimits, HandshakesUncountedWhenOff) {
  peer_limits p(2, 0, 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(p.admit_handshake("h", 0), handshake::uncounted);
  EXPECT_EQ(p.handshakes_from("h"), 0u);
}

}  // namespace

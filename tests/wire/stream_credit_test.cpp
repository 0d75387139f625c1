// The credit rules of streams (docs/design/streams.md, "Credit"), as both sides apply them.
#include "wire/stream_credit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

namespace ringrpc::detail {
namespace {

TEST(SendCredit, SpendsMessagesAndBytesAndStopsAtEither) {
  send_credit c(2, 100);
  ASSERT_TRUE(c.can_send());
  c.spend(40);
  ASSERT_TRUE(c.can_send());
  c.spend(40);
  EXPECT_FALSE(c.can_send()) << "no message of credit left";
  send_credit b(10, 100);
  b.spend(100);
  EXPECT_FALSE(b.can_send()) << "the byte credit is used up";
}

// A message larger than the whole window goes once the window is free, leaving the byte credit
// negative until grants cover it: no fragmentation, and the receiver's bound is window + one.
TEST(SendCredit, OneMessageMayOverdrawTheBytes) {
  send_credit c(16, 1000);
  ASSERT_TRUE(c.can_send());
  c.spend(5000);
  EXPECT_EQ(c.bytes(), -4000);
  EXPECT_FALSE(c.can_send());
  ASSERT_TRUE(c.grant(1, 4000));
  EXPECT_FALSE(c.can_send()) << "zero bytes of credit is none";
  ASSERT_TRUE(c.grant(0, 1));
  EXPECT_TRUE(c.can_send());
}

TEST(SendCredit, GrantsThatWouldOverflowAreRefusedAndChangeNothing) {
  send_credit c(16, 1000);
  EXPECT_FALSE(c.grant(UINT32_MAX, 0));
  EXPECT_FALSE(c.grant(0, UINT64_MAX));
  EXPECT_FALSE(c.grant(0, std::uint64_t{1} << 62));
  EXPECT_EQ(c.messages(), 16u);
  EXPECT_EQ(c.bytes(), 1000);
  // Up to the maxima is fine, one more is not: the sums are checked before they are added.
  ASSERT_TRUE(c.grant(static_cast<std::uint32_t>(max_stream_credit_messages - 16), 0));
  EXPECT_FALSE(c.grant(1, 0));
  ASSERT_TRUE(c.grant(0, static_cast<std::uint64_t>(max_stream_credit_bytes) - 1000));
  EXPECT_FALSE(c.grant(0, 1));
  EXPECT_EQ(c.messages(), max_stream_credit_messages);
  EXPECT_EQ(c.bytes(), max_stream_credit_bytes);
}

TEST(SendCredit, AWindowNamedByThePeerIsHeldToTheMaxima) {
  const send_credit c(UINT32_MAX, UINT64_MAX);
  EXPECT_EQ(c.messages(), max_stream_credit_messages);
  EXPECT_EQ(c.bytes(), max_stream_credit_bytes);
}

TEST(ReceiveCredit, ZeroMeansTheProtocolDefault) {
  const receive_credit r(0, 0);
  EXPECT_EQ(r.window_messages(), default_stream_window_messages);
  EXPECT_EQ(r.window_bytes(), default_stream_window_bytes);
}

// A window past the maxima (a StreamOpen may name any) is held to them as the sender's credit
// is. Unclamped, half of a 2^64 - 1 byte window is more than a sender held to 2^62 bytes can
// ever spend: a sender that used its byte credit up in few messages would wait for a grant that
// never comes. (Messages of 2^60 bytes stand for many of the largest frames.)
TEST(ReceiveCredit, AWindowPastTheMaximaIsHeldToThemSoGrantsStillCome) {
  receive_credit r(UINT32_MAX, UINT64_MAX);
  send_credit peer(UINT32_MAX, UINT64_MAX);
  EXPECT_EQ(r.window_messages(), max_stream_credit_messages);
  EXPECT_EQ(r.window_bytes(), static_cast<std::uint64_t>(max_stream_credit_bytes));
  const std::size_t big = std::size_t{1} << 60;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(peer.can_send()) << i;
    peer.spend(big);
    ASSERT_TRUE(r.arrive(big)) << i;
  }
  ASSERT_FALSE(peer.can_send());
  for (int i = 0; i < 4; ++i) {
    if (const auto g = r.consumed(big)) {
      ASSERT_TRUE(peer.grant(g.messages, g.bytes));
    }
  }
  EXPECT_TRUE(peer.can_send()) << "everything was read, and the sender still has no credit";
}

TEST(ReceiveCredit, ArrivalsBeyondTheGrantedCreditAreRefused) {
  receive_credit r(4, 1 << 20);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.arrive(10)) << i;
  EXPECT_FALSE(r.arrive(10)) << "a fifth message with a window of four";
}

// Grants go back in batches: nothing until half the window is consumed, then all of it; and the
// peer's credit as the receiver tracks it comes back with them.
TEST(ReceiveCredit, GrantsBackWhatWasConsumedInHalfWindowBatches) {
  receive_credit r(4, 1 << 20);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.arrive(100));
  EXPECT_FALSE(r.consumed(100));
  const auto g = r.consumed(100);
  ASSERT_TRUE(g);
  EXPECT_EQ(g.messages, 2u);
  EXPECT_EQ(g.bytes, 200u);
  EXPECT_TRUE(r.arrive(100));
  EXPECT_TRUE(r.arrive(100));
  EXPECT_FALSE(r.arrive(100)) << "only the two messages granted back";
}

TEST(ReceiveCredit, HalfTheBytesAlsoTriggersAGrant) {
  receive_credit r(100, 1000);
  ASSERT_TRUE(r.arrive(600));
  const auto g = r.consumed(600);
  ASSERT_TRUE(g);
  EXPECT_EQ(g.messages, 1u);
  EXPECT_EQ(g.bytes, 600u);
}

// The receiver's bound: a peer that follows the rules never makes it hold more than the window
// plus one message, whatever the sizes, and never stalls for good.
TEST(ReceiveCredit, ARuleFollowingPeerStaysWithinTheWindowPlusOneMessage) {
  receive_credit r(8, 1000);
  send_credit peer(8, 1000);
  std::deque<std::size_t> held;  // arrived, not consumed yet
  std::uint64_t held_bytes = 0;
  std::uint64_t max_held = 0;
  for (unsigned i = 0; i < 10'000; ++i) {
    const std::size_t size = (i * 7919u) % 1500;  // some larger than the window
    while (!peer.can_send()) {
      ASSERT_FALSE(held.empty()) << "the peer stalled with nothing left to consume at " << i;
      const std::size_t oldest = held.front();
      held.pop_front();
      held_bytes -= oldest;
      if (const auto g = r.consumed(oldest)) {
        ASSERT_TRUE(peer.grant(g.messages, g.bytes));
      }
    }
    peer.spend(size);
    ASSERT_TRUE(r.arrive(size)) << i;
    held.push_back(size);
    held_bytes += size;
    max_held = std::max(max_held, held_bytes);
  }
  EXPECT_LE(max_held, 1000u + 1500u);
}

}  // namespace
}  // namespace ringrpc::detail

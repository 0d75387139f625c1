// A server stream's receive credit split between the shard's thread (arrivals) and the lane
// (consumption and grants): the same rules as receive_credit, and no false refusal when the two
// run on their own threads (tests/meson.build runs this under ThreadSanitizer too).
#include "server/stream_receive_credit.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

#include "wire/stream_credit.hpp"

namespace ringrpc::detail {
namespace {

TEST(StreamReceiveCredit, RefusesArrivalsPastTheDefaultWindow) {
  stream_receive_credit c;
  for (std::uint32_t i = 0; i < default_stream_window_messages; ++i) ASSERT_TRUE(c.arrive(10)) << i;
  EXPECT_FALSE(c.arrive(10)) << "the peer has no message of credit left";
}

TEST(StreamReceiveCredit, OneMessageMayTakeTheBytesBelowZeroAndThenNoMore) {
  stream_receive_credit c;
  ASSERT_TRUE(c.arrive(default_stream_window_bytes + 5000)) << "a message larger than the window goes whole";
  EXPECT_FALSE(c.arrive(1)) << "nothing more until grants cover it";
}

TEST(StreamReceiveCredit, GrantsWhatWasConsumedInHalfWindowBatches) {
  stream_receive_credit c;
  const std::uint32_t half = default_stream_window_messages / 2;
  for (std::uint32_t i = 0; i < default_stream_window_messages; ++i) ASSERT_TRUE(c.arrive(3));
  for (std::uint32_t i = 1; i < half; ++i) EXPECT_FALSE(c.consumed(3)) << "no grant before half the window";
  const receive_credit::grant g = c.consumed(3);
  EXPECT_EQ(g.messages, half);
  EXPECT_EQ(g.bytes, 3u * half);
  for (std::uint32_t i = 0; i < half; ++i) EXPECT_TRUE(c.arrive(3)) << "the grant is credit again: " << i;
  EXPECT_FALSE(c.arrive(3));
}

TEST(StreamReceiveCredit, HalfTheBytesAlsoTriggersAGrant) {
  stream_receive_credit c;
  ASSERT_TRUE(c.arrive(default_stream_window_bytes / 2));
  const receive_credit::grant g = c.consumed(default_stream_window_bytes / 2);
  EXPECT_EQ(g.messages, 1u);
  EXPECT_EQ(g.bytes, default_stream_window_bytes / 2);
}

// The shard's thread plays the peer too: it sends only on credit it has been granted (grants
// reach it through a queue, as grant frames reach the peer only after the lane posted them),
// and every arrival must be accepted. The lane consumes and grants on its own thread.
TEST(StreamReceiveCredit, ARuleFollowingPeerIsNeverRefusedAcrossThreads) {
  constexpr int total = 200'000;
  stream_receive_credit c;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::size_t> to_lane;               // arrived messages' sizes
  std::deque<receive_credit::grant> to_peer;     // grants, as frames the peer reads
  std::thread lane([&] {
    for (int done = 0; done < total; ++done) {
      std::size_t bytes = 0;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return !to_lane.empty(); });
        bytes = to_lane.front();
        to_lane.pop_front();
      }
      if (const receive_credit::grant g = c.consumed(bytes)) {
        std::lock_guard lock(mu);
        to_peer.push_back(g);
        cv.notify_all();
      }
    }
  });
  send_credit peer(default_stream_window_messages, default_stream_window_bytes);
  int refused = 0;
  for (int sent = 0; sent < total;) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return peer.can_send() || !to_peer.empty(); });
      while (!to_peer.empty()) {
        EXPECT_TRUE(peer.grant(to_peer.front().messages, to_peer.front().bytes));
        to_peer.pop_front();
      }
    }
    while (peer.can_send() && sent < total) {
      const std::size_t bytes = static_cast<std::size_t>(sent % 7) * 1000;
      peer.spend(bytes);
      if (!c.arrive(bytes)) ++refused;
      ++sent;
      std::lock_guard lock(mu);
      to_lane.push_back(bytes);
      cv.notify_all();
    }
  }
  lane.join();
  EXPECT_EQ(refused, 0);
}

}  // namespace
}  // namespace ringrpc::detail

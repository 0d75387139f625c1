// Units of the shard's bookkeeping: the write slots it lends, its call cache, peer addresses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

#include "server/call.hpp"
#include "server/connection.hpp"
#include "base/peer_address.hpp"
#include "server/write_slots.hpp"

namespace ringrpc::detail {
namespace {

TEST(WriteSlots, ReusesWhatWasGivenBackAndTrimsWhatNoTurnNeeded) {
  write_slots slots;
  auto* a = slots.take(nullptr);
  auto* b = slots.take(nullptr);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->in_flight = a->dirty = true;
  slots.give_back(a);
  slots.give_back(b);
  // The most recently given back comes first, reset for its new connection.
  auto* c = slots.take(nullptr);
  EXPECT_EQ(c, b);
  auto* d = slots.take(nullptr);
  EXPECT_EQ(d, a);
  EXPECT_FALSE(d->in_flight);
  EXPECT_FALSE(d->dirty);
  slots.give_back(c);
  slots.give_back(d);
  EXPECT_EQ(slots.idle(), 2u);
  // Both were needed since the last trim (none was free at one point): the first trim keeps
  // them; the second, with nothing taken in between, frees them.
  slots.trim();
  EXPECT_EQ(slots.idle(), 2u);
  auto* e = slots.take(nullptr);  // one of the two is needed again
  slots.give_back(e);
  slots.trim();
  EXPECT_EQ(slots.idle(), 1u);
  slots.trim();
  EXPECT_EQ(slots.idle(), 0u);
}

TEST(CallCache, RecyclesOnItsThreadAndOverflowsToTheSharedPool) {
  call_pool shared(8);
  std::vector<call*> taken;
  {
    call_cache cache(shared);
    call* a = cache.get();
    a->request.assign(100, std::byte{1});
    a->share_counted = true;
    cache.put(a);
    call* b = cache.get();
    EXPECT_EQ(a, b);  // straight back from the cache
    EXPECT_FALSE(b->share_counted);  // cleaned for reuse
    EXPECT_EQ(b->wq_next, nullptr);
    cache.put(b);
  }
  // The cache's calls went back to the shared pool when it went away.
  call* c = shared.get();
  EXPECT_NE(c, nullptr);
  shared.put(c);
}

TEST(PeerAddress, FormatsBothFamiliesAndUnknown) {
  peer_address none;
  EXPECT_EQ(none.text(), "unknown");
  EXPECT_EQ(none.host(), "");

  peer_address v4;
  v4.family = AF_INET;
  const in_addr a{htonl(0x7f000001)};
  std::memcpy(v4.bytes.data(), &a, 4);
  v4.port = 4242;
  EXPECT_EQ(v4.text(), "127.0.0.1:4242");
  EXPECT_EQ(v4.host(), "127.0.0.1");

  peer_address v6;
  v6.family = AF_INET6;
  v6.bytes[15] = 1;
  v6.port = 80;
  EXPECT_EQ(v6.text(), "[::1]:80");
  EXPECT_EQ(v6.host(), "::1");
}

TEST(PeerAddress, ReadsAConnectedSocketsPeer) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  // Not an IP socket: the address is unknown, and nothing fails.
  EXPECT_EQ(peer_address::of_socket(fds[0]).text(), "unknown");
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(peer_address::of_socket(-1).family, 0);
}

}  // namespace
}  // namespace ringrpc::detail

// Tests for write_queue (src/base/write_queue.hpp): gathering, partial writes, release order.
#include "base/write_queue.hpp"

#include <gtest/gtest.h>

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace {

using ringrpc::detail::write_queue;

struct item {
  item* wq_next = nullptr;
  std::vector<std::byte> bytes;
  std::span<const std::byte> wq_bytes() const noexcept { return bytes; }
};

std::unique_ptr<item> make_item(std::size_t n, std::uint8_t first) {
  auto it = std::make_unique<item>();
  it->bytes.resize(n);
  for (std::size_t i = 0; i < n; ++i) it->bytes[i] = static_cast<std::byte>(first + i);
  return it;
}

struct fixture {
  std::vector<std::unique_ptr<item>> owned;
  write_queue<item> q;
  std::vector<item*> released;

  item* add(std::size_t n) {
    owned.push_back(make_item(n, static_cast<std::uint8_t>(owned.size() * 16)));
    q.push_back(owned.back().get());
    return owned.back().get();
  }
  bool consume(std::size_t n) {
    return q.consume(n, [this](item* it) { released.push_back(it); });
  }
};

TEST(WriteQueue, EmptyQueue) {
  write_queue<item> q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_EQ(q.items(), 0u);
  EXPECT_EQ(q.front(), nullptr);
  iovec iov[4];
  EXPECT_EQ(q.gather(iov, 4), 0u);
  int calls = 0;
  EXPECT_FALSE(q.consume(0, [&](item*) { ++calls; }));
  q.clear([&](item*) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(WriteQueue, GatherFillsInOrderAndRespectsMax) {
  fixture f;
  item* a = f.add(10);
  item* b = f.add(20);
  item* c = f.add(30);
  EXPECT_EQ(f.q.items(), 3u);
  EXPECT_EQ(f.q.bytes(), 60u);
  EXPECT_EQ(f.q.front(), a);

  iovec iov[8];
  ASSERT_EQ(f.q.gather(iov, 8), 3u);
  EXPECT_EQ(iov[0].iov_base, a->bytes.data());
  EXPECT_EQ(iov[0].iov_len, 10u);
  EXPECT_EQ(iov[1].iov_base, b->bytes.data());
  EXPECT_EQ(iov[1].iov_len, 20u);
  EXPECT_EQ(iov[2].iov_base, c->bytes.data());
  EXPECT_EQ(iov[2].iov_len, 30u);

  iovec small[2] = {};
  iovec sentinel{reinterpret_cast<void*>(0x1), 12345};
  iovec with_guard[3] = {{}, {}, sentinel};
  ASSERT_EQ(f.q.gather(with_guard, 2), 2u);
  EXPECT_EQ(with_guard[0].iov_base, a->bytes.data());
  EXPECT_EQ(with_guard[1].iov_base, b->bytes.data());
  EXPECT_EQ(with_guard[2].iov_base, sentinel.iov_base);  // untouched
  EXPECT_EQ(with_guard[2].iov_len, sentinel.iov_len);
  ASSERT_EQ(f.q.gather(small, 1), 1u);
  EXPECT_EQ(small[0].iov_base, a->bytes.data());
  EXPECT_EQ(f.q.gather(small, 0), 0u);

  // gather() is const: nothing changed.
  EXPECT_EQ(f.q.items(), 3u);
  EXPECT_EQ(f.q.bytes(), 60u);
}

TEST(WriteQueue, ConsumeExactItemSizesReleasesInOrder) {
  fixture f;
  item* a = f.add(10);
  item* b = f.add(20);
  item* c = f.add(30);
  EXPECT_FALSE(f.consume(10));
  ASSERT_EQ(f.released.size(), 1u);
  EXPECT_EQ(f.released[0], a);
  EXPECT_EQ(f.q.front(), b);
  EXPECT_EQ(f.q.bytes(), 50u);
  EXPECT_EQ(f.q.items(), 2u);

  EXPECT_FALSE(f.consume(50));  // b and c exactly
  ASSERT_EQ(f.released.size(), 3u);
  EXPECT_EQ(f.released[1], b);
  EXPECT_EQ(f.released[2], c);
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.q.bytes(), 0u);
  EXPECT_EQ(f.q.items(), 0u);
  EXPECT_EQ(f.q.front(), nullptr);

  // The queue is reusable after running empty (tail reset correctly).
  item* d = f.add(5);
  item* e = f.add(6);
  iovec iov[4];
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, d->bytes.data());
  EXPECT_EQ(iov[1].iov_base, e->bytes.data());
  EXPECT_FALSE(f.consume(11));
  EXPECT_TRUE(f.q.empty());
}

TEST(WriteQueue, ConsumeZeroIsNoOp) {
  fixture f;
  f.add(10);
  EXPECT_FALSE(f.consume(0));
  EXPECT_TRUE(f.released.empty());
  EXPECT_EQ(f.q.bytes(), 10u);
}

// The rest of a reply someone else began to write goes ahead of what was queued meanwhile,
// from its first unwritten byte; an empty queue takes it as its only item.
TEST(WriteQueue, PushFrontResumesAnItemWrittenInPartElsewhere) {
  fixture f;
  item* b = f.add(20);
  auto a_owned = make_item(10, 200);
  item* a = a_owned.get();
  f.q.push_front(a, 7);
  EXPECT_EQ(f.q.front(), a);
  EXPECT_EQ(f.q.bytes(), 23u);  // a's last 3 bytes and b
  EXPECT_EQ(f.q.items(), 2u);
  iovec iov[4];
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, a->bytes.data() + 7);
  EXPECT_EQ(iov[0].iov_len, 3u);
  EXPECT_EQ(iov[1].iov_base, b->bytes.data());
  EXPECT_FALSE(f.consume(23));
  ASSERT_EQ(f.released.size(), 2u);
  EXPECT_EQ(f.released[0], a);
  EXPECT_EQ(f.released[1], b);
  EXPECT_TRUE(f.q.empty());

  auto c_owned = make_item(5, 100);
  f.q.push_front(c_owned.get(), 0);
  EXPECT_EQ(f.q.bytes(), 5u);
  f.add(4);  // behind it
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, c_owned->bytes.data());
  EXPECT_FALSE(f.consume(9));
  EXPECT_EQ(f.released.size(), 4u);
  EXPECT_TRUE(f.q.empty());
}

TEST(WriteQueue, PartialConsumeLeavesRemainderAtHead) {
  fixture f;
  item* a = f.add(10);
  item* b = f.add(20);
  EXPECT_TRUE(f.consume(4));
  EXPECT_TRUE(f.released.empty());
  EXPECT_EQ(f.q.front(), a);
  EXPECT_EQ(f.q.bytes(), 26u);
  EXPECT_EQ(f.q.items(), 2u);

  iovec iov[4];
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, a->bytes.data() + 4);
  EXPECT_EQ(iov[0].iov_len, 6u);
  EXPECT_EQ(iov[1].iov_base, b->bytes.data());
  EXPECT_EQ(iov[1].iov_len, 20u);

  // A second partial write inside the same item accumulates.
  EXPECT_TRUE(f.consume(5));
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, a->bytes.data() + 9);
  EXPECT_EQ(iov[0].iov_len, 1u);
  EXPECT_EQ(f.q.bytes(), 21u);

  // Finishing the head exactly releases it and the next gather starts at b's first byte.
  EXPECT_FALSE(f.consume(1));
  ASSERT_EQ(f.released.size(), 1u);
  EXPECT_EQ(f.released[0], a);
  ASSERT_EQ(f.q.gather(iov, 4), 1u);
  EXPECT_EQ(iov[0].iov_base, b->bytes.data());
  EXPECT_EQ(iov[0].iov_len, 20u);
  EXPECT_EQ(f.q.bytes(), 20u);
}

TEST(WriteQueue, PartialInsideSecondOfThree) {
  fixture f;
  item* a = f.add(10);
  item* b = f.add(20);
  item* c = f.add(30);
  EXPECT_TRUE(f.consume(10 + 7));
  ASSERT_EQ(f.released.size(), 1u);
  EXPECT_EQ(f.released[0], a);
  EXPECT_EQ(f.q.front(), b);
  EXPECT_EQ(f.q.items(), 2u);
  EXPECT_EQ(f.q.bytes(), 43u);

  iovec iov[4];
  ASSERT_EQ(f.q.gather(iov, 4), 2u);
  EXPECT_EQ(iov[0].iov_base, b->bytes.data() + 7);
  EXPECT_EQ(iov[0].iov_len, 13u);
  EXPECT_EQ(iov[1].iov_base, c->bytes.data());
  EXPECT_EQ(iov[1].iov_len, 30u);

  // Finish b and half of c.
  EXPECT_TRUE(f.consume(13 + 15));
  ASSERT_EQ(f.released.size(), 2u);
  EXPECT_EQ(f.released[1], b);
  ASSERT_EQ(f.q.gather(iov, 4), 1u);
  EXPECT_EQ(iov[0].iov_base, c->bytes.data() + 15);
  EXPECT_EQ(iov[0].iov_len, 15u);
  EXPECT_EQ(f.q.bytes(), 15u);
  EXPECT_FALSE(f.consume(15));
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.released.back(), c);
}

TEST(WriteQueue, ConsumeAcrossManyItems) {
  fixture f;
  std::size_t total = 0;
  for (std::size_t i = 0; i < 100; ++i) {
    f.add(i + 1);
    total += i + 1;
  }
  EXPECT_EQ(f.q.items(), 100u);
  EXPECT_EQ(f.q.bytes(), total);
  // Items 1..50 are 1275 bytes; write 1275 + 3 so the remainder lands 3 bytes into item 51.
  EXPECT_TRUE(f.consume(1275 + 3));
  ASSERT_EQ(f.released.size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(f.released[i], f.owned[i].get());
  EXPECT_EQ(f.q.front(), f.owned[50].get());
  EXPECT_EQ(f.q.items(), 50u);
  EXPECT_EQ(f.q.bytes(), total - 1278);
  iovec iov[1];
  ASSERT_EQ(f.q.gather(iov, 1), 1u);
  EXPECT_EQ(iov[0].iov_base, f.owned[50]->bytes.data() + 3);
  EXPECT_EQ(iov[0].iov_len, 51u - 3u);

  EXPECT_FALSE(f.consume(total - 1278));
  EXPECT_EQ(f.released.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(f.released[i], f.owned[i].get());
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.q.bytes(), 0u);
}

TEST(WriteQueue, ClearHandsEveryItemToCallback) {
  fixture f;
  for (int i = 0; i < 5; ++i) f.add(8);
  EXPECT_TRUE(f.consume(3));  // a partial write in flight
  std::vector<item*> cleared;
  f.q.clear([&](item* it) { cleared.push_back(it); });
  ASSERT_EQ(cleared.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cleared[i], f.owned[i].get());
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.q.bytes(), 0u);
  EXPECT_EQ(f.q.items(), 0u);
  EXPECT_EQ(f.q.front(), nullptr);

  // Usable after clear, with no stale head offset.
  item* n = f.add(4);
  iovec iov[2];
  ASSERT_EQ(f.q.gather(iov, 2), 1u);
  EXPECT_EQ(iov[0].iov_base, n->bytes.data());
  EXPECT_EQ(iov[0].iov_len, 4u);
  EXPECT_EQ(f.q.bytes(), 4u);
}

TEST(WriteQueue, ClearCallbackMayDestroyItem) {
  write_queue<item> q;
  for (int i = 0; i < 4; ++i) q.push_back(make_item(3, 0).release());
  int n = 0;
  q.clear([&](item* it) {
    ++n;
    delete it;
  });
  EXPECT_EQ(n, 4);
  EXPECT_TRUE(q.empty());
}

TEST(WriteQueue, ConsumeCallbackMayDestroyItem) {
  write_queue<item> q;
  for (int i = 0; i < 4; ++i) q.push_back(make_item(3, 0).release());
  int n = 0;
  EXPECT_TRUE(q.consume(7, [&](item* it) {
    ++n;
    delete it;
  }));
  EXPECT_EQ(n, 2);
  EXPECT_EQ(q.bytes(), 5u);
  q.clear([&](item* it) { delete it; });
}

TEST(WriteQueue, RandomizedWritesReproduceTheStream) {
  std::mt19937 rng(77);
  for (int round = 0; round < 300; ++round) {
    fixture f;
    std::vector<std::byte> expected;
    std::vector<std::byte> written;
    std::size_t next_release = 0;
    std::size_t pushed = 0;
    const std::size_t total_items = 1 + rng() % 60;
    auto push_some = [&] {
      const std::size_t k = rng() % 5;
      for (std::size_t i = 0; i < k && pushed < total_items; ++i, ++pushed) {
        const std::size_t sz = (rng() % 10 == 0) ? 0 : 1 + rng() % 300;
        item* it = f.add(sz);
        for (auto& b : it->bytes) b = static_cast<std::byte>(rng());
        expected.insert(expected.end(), it->bytes.begin(), it->bytes.end());
      }
    };
    push_some();
    for (int guard = 0; guard < 100000; ++guard) {
      if (pushed == total_items && f.q.empty()) break;
      push_some();
      if (f.q.empty()) continue;
      iovec iov[8];
      const std::size_t max = 1 + rng() % 8;
      const std::size_t n = f.q.gather(iov, max);
      ASSERT_GE(n, 1u);
      ASSERT_LE(n, max);
      std::size_t avail = 0;
      for (std::size_t i = 0; i < n; ++i) avail += iov[i].iov_len;
      ASSERT_LE(avail, f.q.bytes());
      // The "kernel" takes a random prefix of what was offered (possibly all, possibly 0).
      const std::size_t take = avail == 0 ? 0 : rng() % (avail + 1);
      std::size_t left = take;
      for (std::size_t i = 0; i < n && left > 0; ++i) {
        const std::size_t k = std::min(left, iov[i].iov_len);
        const auto* p = static_cast<const std::byte*>(iov[i].iov_base);
        written.insert(written.end(), p, p + k);
        left -= k;
      }
      const std::size_t before = f.q.bytes();
      const bool partial = f.consume(take);
      ASSERT_EQ(f.q.bytes(), before - take);
      // Items are released strictly in push order.
      while (next_release < f.released.size()) {
        ASSERT_EQ(f.released[next_release], f.owned[next_release].get());
        ++next_release;
      }
      ASSERT_EQ(f.q.items(), pushed - f.released.size());
      // partial == the write ended inside an item.
      if (take > 0 && !f.q.empty()) {
        std::size_t released_bytes = 0;
        for (std::size_t i = 0; i < f.released.size(); ++i) released_bytes += f.owned[i]->bytes.size();
        ASSERT_EQ(partial, written.size() != released_bytes);
      }
    }
    ASSERT_TRUE(f.q.empty());
    ASSERT_EQ(written, expected) << "round " << round;
  }
}

// gathered_writer: the one sendmsg in flight of the client's and ringrpc-load's connections.
TEST(GatheredWriter, OneWriteInFlightAndAPartialOneContinuesAtTheHead) {
  ringrpc::detail::gathered_writer<item, 2> w;
  auto a = make_item(10, 0);
  auto b = make_item(5, 100);
  auto c = make_item(7, 200);
  EXPECT_EQ(w.next(), nullptr) << "nothing queued";
  w.queue().push_back(a.get());
  w.queue().push_back(b.get());
  w.queue().push_back(c.get());
  msghdr* m = w.next();
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(w.in_flight());
  EXPECT_EQ(m->msg_iovlen, 2u) << "at most MaxIov items per write";
  EXPECT_EQ(w.next(), nullptr) << "one write at a time";
  std::vector<item*> done;
  auto keep = [&](item* it) { done.push_back(it); };
  EXPECT_TRUE(w.completed(12, false, keep));  // a whole, 2 bytes of b
  EXPECT_FALSE(w.in_flight());
  ASSERT_EQ(done, std::vector<item*>{a.get()});
  m = w.next();
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->msg_iovlen, 2u);
  EXPECT_EQ(m->msg_iov[0].iov_base, b->bytes.data() + 2);
  EXPECT_EQ(m->msg_iov[0].iov_len, 3u);
  EXPECT_FALSE(w.completed(10, false, keep));
  EXPECT_EQ(done.size(), 3u);
  EXPECT_TRUE(w.queue().empty());
}

TEST(GatheredWriter, AnErrorOrADeadConnectionLetsGoOfEverything) {
  for (const bool dead : {false, true}) {
    ringrpc::detail::gathered_writer<item> w;
    auto a = make_item(10, 0);
    auto b = make_item(5, 100);
    w.queue().push_back(a.get());
    w.queue().push_back(b.get());
    ASSERT_NE(w.next(), nullptr);
    std::size_t released = 0;
    EXPECT_FALSE(w.completed(dead ? 3 : -32, dead, [&](item*) { ++released; }));
    EXPECT_EQ(released, 2u);
    EXPECT_TRUE(w.queue().empty());
    EXPECT_FALSE(w.in_flight());
  }
}

}  // namespace

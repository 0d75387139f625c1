// Tests for mpsc_queue (src/base/mpsc_queue.hpp) and parking (src/base/parking.hpp).
#include "base/mpsc_queue.hpp"
#include "base/parking.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "test_support.hpp"  // RINGRPC_TEST_TSAN

namespace {

using ringrpc::detail::mpsc_node;
using ringrpc::detail::mpsc_queue;
using ringrpc::detail::parking;

#if defined(RINGRPC_TEST_TSAN)
constexpr std::uint32_t nodes_per_producer = 10'000;
constexpr int park_rounds = 2'000;
#else
constexpr std::uint32_t nodes_per_producer = 100'000;
constexpr int park_rounds = 10'000;
#endif

struct node : mpsc_node {
  std::uint32_t producer = 0;
  std::uint32_t seq = 0;
};

node* as_node(mpsc_node* n) { return static_cast<node*>(n); }

TEST(MpscQueue, EmptyQueue) {
  mpsc_queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(MpscQueue, SingleThreadFifo) {
  mpsc_queue q;
  std::vector<node> nodes(100);
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    nodes[i].seq = i;
    q.push(&nodes[i]);
    EXPECT_FALSE(q.empty());
  }
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    mpsc_node* n = q.pop();
    ASSERT_NE(n, nullptr) << i;
    EXPECT_EQ(n, &nodes[i]);
    EXPECT_EQ(as_node(n)->seq, i);
  }
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(MpscQueue, SingleElementRepeatedly) {
  // The one-element case goes through the stub re-insertion path every time.
  mpsc_queue q;
  node a;
  node b;
  for (int i = 0; i < 1000; ++i) {
    q.push(&a);
    EXPECT_FALSE(q.empty());
    ASSERT_EQ(q.pop(), &a);
    EXPECT_TRUE(q.empty());
    ASSERT_EQ(q.pop(), nullptr);
    q.push(&a);
    q.push(&b);
    ASSERT_EQ(q.pop(), &a);
    ASSERT_EQ(q.pop(), &b);
    EXPECT_TRUE(q.empty());
  }
}

// empty() must stay false while a pushed node has not been popped, including the state where
// the consumer's tail already points at that last real node (two pushed, one popped).
TEST(MpscQueue, EmptyIsFalseWhileOneNodeRemains) {
  mpsc_queue q;
  node a;
  node b;
  q.push(&a);
  q.push(&b);
  ASSERT_EQ(q.pop(), &a);
  EXPECT_FALSE(q.empty()) << "b is still queued";
  ASSERT_EQ(q.pop(), &b);
  EXPECT_TRUE(q.empty());

  node c;
  q.push(&a);
  q.push(&b);
  q.push(&c);
  ASSERT_EQ(q.pop(), &a);
  EXPECT_FALSE(q.empty());
  ASSERT_EQ(q.pop(), &b);
  EXPECT_FALSE(q.empty()) << "c is still queued";
  ASSERT_EQ(q.pop(), &c);
  EXPECT_TRUE(q.empty());
}

TEST(MpscQueue, InterleavedPushPop) {
  mpsc_queue q;
  std::vector<node> nodes(1000);
  std::uint32_t pushed = 0;
  std::uint32_t popped = 0;
  while (popped < nodes.size()) {
    for (int k = 0; k < 3 && pushed < nodes.size(); ++k, ++pushed) {
      nodes[pushed].seq = pushed;
      q.push(&nodes[pushed]);
    }
    for (int k = 0; k < 2; ++k) {
      mpsc_node* n = q.pop();
      if (n == nullptr) break;
      ASSERT_EQ(as_node(n)->seq, popped);
      ++popped;
    }
  }
  EXPECT_TRUE(q.empty());
  // A node may be pushed again once popped.
  q.push(&nodes[5]);
  EXPECT_EQ(q.pop(), &nodes[5]);
}

TEST(MpscQueue, ManyProducersOneConsumer) {
  constexpr std::uint32_t producers = 4;
  mpsc_queue q;
  std::vector<std::unique_ptr<node[]>> nodes;
  for (std::uint32_t p = 0; p < producers; ++p) {
    nodes.emplace_back(new node[nodes_per_producer]);
    for (std::uint32_t i = 0; i < nodes_per_producer; ++i) {
      nodes[p][i].producer = p;
      nodes[p][i].seq = i;
    }
  }
  std::atomic<bool> start{false};
  std::vector<std::thread> threads;
  for (std::uint32_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!start.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::uint32_t i = 0; i < nodes_per_producer; ++i) q.push(&nodes[p][i]);
    });
  }
  start.store(true, std::memory_order_release);

  std::vector<std::uint32_t> next(producers, 0);
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(producers) * nodes_per_producer, 0);
  const std::uint64_t total = static_cast<std::uint64_t>(producers) * nodes_per_producer;
  std::uint64_t popped = 0;
  bool order_ok = true;
  bool dup = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (popped < total) {
    mpsc_node* n = q.pop();
    if (n == nullptr) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
      continue;
    }
    const node* x = as_node(n);
    ASSERT_LT(x->producer, producers);
    ASSERT_LT(x->seq, nodes_per_producer);
    auto& s = seen[static_cast<std::size_t>(x->producer) * nodes_per_producer + x->seq];
    if (s != 0) dup = true;
    s = 1;
    if (x->seq != next[x->producer]) order_ok = false;
    next[x->producer] = x->seq + 1;
    ++popped;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(popped, total);
  EXPECT_TRUE(order_ok) << "per-producer FIFO order broken";
  EXPECT_FALSE(dup) << "a node was popped twice";
  for (std::uint32_t p = 0; p < producers; ++p) EXPECT_EQ(next[p], nodes_per_producer);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

// --- parking -----------------------------------------------------------------------------------

TEST(Parking, WakeWithoutWaitersIsCheap) {
  parking p;
  p.wake(1);  // nobody waits: must not block or crash
  p.wake_all();
  // A stale epoch makes wait() return at once.
  const auto e = p.prepare_wait();
  p.wake_all();
  p.wait(e);
  SUCCEED();
}

TEST(Parking, WaitReturnsImmediatelyIfEpochMoved) {
  parking p;
  const auto e = p.prepare_wait();
  p.wake(1);  // a waiter is registered, so the epoch moves
  const auto t0 = std::chrono::steady_clock::now();
  p.wait(e);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // Balanced: a later wake with no waiters does not touch the epoch path.
  const auto e2 = p.prepare_wait();
  EXPECT_NE(e2, e);
  p.cancel_wait();
}

// One producer hands a sequence number to one consumer, round after round; the consumer sleeps
// through prepare_wait / re-check / wait. A lost wake-up would leave the consumer asleep with
// work pending, which the producer detects with a deadline (and then rescues with wake_all()).
TEST(Parking, NoLostWakeupOverManyRounds) {
  parking p;
  std::atomic<int> posted{0};
  std::atomic<int> taken{0};
  std::atomic<bool> stop{false};
  std::atomic<int> sleeps{0};

  std::thread consumer([&] {
    int have = 0;
    for (;;) {
      const int now = posted.load(std::memory_order_seq_cst);
      if (now > have) {
        have = now;
        taken.store(have, std::memory_order_seq_cst);
        continue;
      }
      if (stop.load(std::memory_order_seq_cst)) return;
      const auto epoch = p.prepare_wait();
      if (posted.load(std::memory_order_seq_cst) > have || stop.load(std::memory_order_seq_cst)) {
        p.cancel_wait();
        continue;
      }
      sleeps.fetch_add(1, std::memory_order_relaxed);
      p.wait(epoch);
    }
  });

  int lost = 0;
  for (int round = 1; round <= park_rounds; ++round) {
    posted.store(round, std::memory_order_seq_cst);
    p.wake(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (taken.load(std::memory_order_seq_cst) < round) {
      if (std::chrono::steady_clock::now() > deadline) {
        ++lost;
        p.wake_all();  // rescue, so one failure does not hang the test
        break;
      }
      // Give the consumer time to fall asleep in some rounds, race it in others.
      if (round % 3 == 0) std::this_thread::yield();
    }
    if (round % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  stop.store(true, std::memory_order_seq_cst);
  p.wake_all();
  consumer.join();
  EXPECT_EQ(lost, 0) << "lost wake-ups";
  EXPECT_EQ(taken.load(), park_rounds);
  EXPECT_GT(sleeps.load(), 0) << "the consumer never slept; the test proved nothing";
}

// The same, with the work travelling through an mpsc_queue and the consumer re-checking with
// empty() after prepare_wait().
TEST(Parking, MpscConsumerParksAndIsWoken) {
  parking p;
  mpsc_queue q;
  std::vector<node> nodes(static_cast<std::size_t>(park_rounds));
  std::atomic<int> taken{0};
  std::atomic<bool> stop{false};

  std::thread consumer([&] {
    int expect = 0;
    for (;;) {
      bool got = false;
      while (mpsc_node* n = q.pop()) {
        if (as_node(n)->seq != static_cast<std::uint32_t>(expect)) {
          ADD_FAILURE() << "out of order: " << as_node(n)->seq << " != " << expect;
        }
        ++expect;
        taken.store(expect, std::memory_order_seq_cst);
        got = true;
      }
      if (got) continue;
      if (stop.load(std::memory_order_seq_cst) && q.empty()) return;
      const auto epoch = p.prepare_wait();
      if (!q.empty() || stop.load(std::memory_order_seq_cst)) {
        p.cancel_wait();
        continue;
      }
      p.wait(epoch);
    }
  });

  int lost = 0;
  for (int round = 0; round < park_rounds; ++round) {
    nodes[round].seq = static_cast<std::uint32_t>(round);
    q.push(&nodes[round]);
    p.wake(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (taken.load(std::memory_order_seq_cst) <= round) {
      if (std::chrono::steady_clock::now() > deadline) {
        ++lost;
        p.wake_all();
        break;
      }
      if (round % 2 == 0) std::this_thread::yield();
    }
  }
  stop.store(true, std::memory_order_seq_cst);
  p.wake_all();
  consumer.join();
  EXPECT_EQ(lost, 0) << "lost wake-ups";
  EXPECT_EQ(taken.load(), park_rounds);
}

TEST(Parking, WakeAllReleasesEverySleeper) {
  parking p;
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      while (!go.load(std::memory_order_seq_cst)) {
        const auto e = p.prepare_wait();
        if (go.load(std::memory_order_seq_cst)) {
          p.cancel_wait();
          break;
        }
        p.wait(e);
      }
      done.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  go.store(true, std::memory_order_seq_cst);
  p.wake_all();
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), 4);
}

}  // namespace

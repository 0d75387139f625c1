// The balancing policies and the retry budget, without connections.

#include "channel/balancer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "channel/call_state_pool.hpp"
#include "channel/host_port.hpp"
#include "channel/retry_budget.hpp"
#include "channel/snapshot_cell.hpp"

namespace {

using ringrpc::balancing_policy;
using ringrpc::detail::pick_member;
using ringrpc::detail::pick_state;

TEST(balancer, round_robin_takes_each_member_in_turn) {
  pick_state st;
  std::vector<int> count(3);
  const auto load = [](std::size_t) { return std::uint64_t{0}; };
  for (int i = 0; i < 300; ++i) ++count[pick_member(balancing_policy::round_robin, 3, load, st)];
  EXPECT_EQ(count, (std::vector<int>{100, 100, 100}));
}

TEST(balancer, least_outstanding_picks_the_least_loaded_and_rotates_ties) {
  pick_state st;
  std::vector<std::uint64_t> loads{5, 1, 7};
  const auto load = [&](std::size_t i) { return loads[i]; };
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick_member(balancing_policy::least_outstanding, 3, load, st), 1u);
  loads = {0, 0, 0};
  std::vector<int> count(3);
  for (int i = 0; i < 300; ++i) ++count[pick_member(balancing_policy::least_outstanding, 3, load, st)];
  EXPECT_EQ(count, (std::vector<int>{100, 100, 100}));
}

TEST(balancer, least_outstanding_balances_when_calls_stay_in_flight) {
  pick_state st;
  std::vector<std::uint64_t> loads(4);
  const auto load = [&](std::size_t i) { return loads[i]; };
  for (int i = 0; i < 400; ++i) ++loads[pick_member(balancing_policy::least_outstanding, 4, load, st)];
  for (auto l : loads) EXPECT_EQ(l, 100u);
}

TEST(balancer, p2c_never_picks_the_busier_of_its_two_and_spreads) {
  pick_state st;
  std::vector<std::uint64_t> loads{0, 1000, 1000};
  const auto load = [&](std::size_t i) { return loads[i]; };
  // Member 0 is among the two choices two times in three; then it always wins.
  int zero = 0;
  for (int i = 0; i < 3000; ++i) zero += pick_member(balancing_policy::power_of_two_choices, 3, load, st) == 0;
  EXPECT_NEAR(zero, 2000, 150);
  // Calls that stay in flight: no member above 1.5x the mean.
  std::vector<std::uint64_t> held(5);
  const auto held_load = [&](std::size_t i) { return held[i]; };
  for (int i = 0; i < 5000; ++i) ++held[pick_member(balancing_policy::power_of_two_choices, 5, held_load, st)];
  for (auto h : held) EXPECT_LE(h, 1500u);
  for (auto h : held) EXPECT_GE(h, 500u);
}

TEST(balancer, one_member_is_always_picked) {
  pick_state st;
  const auto load = [](std::size_t) { return std::uint64_t{9}; };
  for (auto p : {balancing_policy::round_robin, balancing_policy::least_outstanding,
                 balancing_policy::power_of_two_choices}) {
    EXPECT_EQ(pick_member(p, 1, load, st), 0u);
  }
}

TEST(retry_budget, retries_stop_below_half_and_resume_with_successes) {
  ringrpc::detail::retry_budget b(10, 0.1);
  EXPECT_TRUE(b.retry_allowed());
  for (int i = 0; i < 4; ++i) b.on_failure();
  EXPECT_TRUE(b.retry_allowed());  // 6 > 5
  b.on_failure();
  EXPECT_FALSE(b.retry_allowed());  // 5 is not more than half
  for (int i = 0; i < 20; ++i) b.on_failure();
  EXPECT_DOUBLE_EQ(b.tokens(), 0);  // never below zero
  for (int i = 0; i < 50; ++i) b.on_success();
  EXPECT_DOUBLE_EQ(b.tokens(), 5);
  EXPECT_FALSE(b.retry_allowed());
  b.on_success();
  EXPECT_TRUE(b.retry_allowed());
  for (int i = 0; i < 1000; ++i) b.on_success();
  EXPECT_DOUBLE_EQ(b.tokens(), 10);  // never above max
}

TEST(retry_budget, concurrent_updates_keep_it_within_bounds) {
  ringrpc::detail::retry_budget b(10, 0.5);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        if ((i + t) % 3 == 0) {
          b.on_failure();
        } else {
          b.on_success();
        }
        const double v = b.tokens();
        ASSERT_GE(v, 0);
        ASSERT_LE(v, 10);
      }
    });
  }
  for (auto& th : ts) th.join();
}

// Readers never see a freed or half-built object while the writer replaces it (ASan and TSan
// catch what this cannot see).
TEST(snapshot_cell, readers_see_whole_objects_while_the_writer_replaces_them) {
  ringrpc::detail::snapshot_cell<std::vector<int>> cell(std::make_unique<const std::vector<int>>(8, 0));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto r = cell.read();
        const int first = (*r)[0];
        for (int v : *r) ASSERT_EQ(v, first);
        ++reads;
      }
    });
  }
  while (reads.load() == 0) std::this_thread::yield();  // the readers are running
  // 300 replacements: each waits for a grace period, and with three readers spinning on two
  // CPUs a preempted reader ends one only at the next tick (2,000 took 24 s here).
  constexpr int replacements = 300;
  for (int i = 1; i <= replacements; ++i) cell.publish(std::make_unique<const std::vector<int>>(8, i));
  const auto before = reads.load();
  while (reads.load() < before + 100) std::this_thread::yield();  // and read the last one too
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ((*cell.read())[0], replacements);
  EXPECT_GT(reads.load(), 0u);
}

TEST(host_port, parses_members_and_refuses_the_rest) {
  auto m = ringrpc::detail::parse_host_port("10.0.0.5:7000");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->host, "10.0.0.5");
  EXPECT_EQ(m->port, 7000);
  m = ringrpc::detail::parse_host_port("[::1]:80");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->host, "::1");
  for (const char* bad : {"", "host", ":80", "host:", "host:0", "host:65536", "::1:80", "h:8x", "[]:1"}) {
    EXPECT_FALSE(ringrpc::detail::parse_host_port(bad)) << bad;
  }
}

TEST(static_resolver, lists_and_errors) {
  EXPECT_NO_THROW(ringrpc::make_static_resolver("a:1,b:2"));
  EXPECT_THROW(ringrpc::make_static_resolver("a:1,,b:2"), std::invalid_argument);
  EXPECT_THROW(ringrpc::make_static_resolver("etcd://x:1/s"), std::invalid_argument);
  EXPECT_EQ(ringrpc::parse_balancing_policy("p2c"), balancing_policy::power_of_two_choices);
  EXPECT_THROW(ringrpc::parse_balancing_policy("random"), std::invalid_argument);
}

// The channel's call-state pool: objects made on one thread and given back on another (a
// call made by the caller, finished on the I/O thread) come back to the maker through the
// depot, so the pool stops allocating once warm, and no object is handed out twice.
struct pooled {
  pooled* next_free = nullptr;
  std::atomic<int> users{0};
  int recycled = 0;
  void recycle() noexcept { ++recycled; }
};

TEST(recycling_pool, objects_freed_on_another_thread_come_back_and_are_never_shared) {
  using pool = ringrpc::detail::recycling_pool<pooled>;
  constexpr int in_flight = 200, rounds = 50;
  std::vector<pooled*> handoff(in_flight);
  std::atomic<int> phase{0};  // even: maker's turn; odd: freer's turn
  std::thread freer([&] {
    for (int r = 0; r < rounds; ++r) {
      while (phase.load(std::memory_order_acquire) != 2 * r + 1) std::this_thread::yield();
      for (pooled* p : handoff) {
        EXPECT_EQ(p->users.fetch_sub(1), 1);
        pool::put(p);
      }
      phase.store(2 * r + 2, std::memory_order_release);
    }
  });
  std::vector<int> made_after_round;
  for (int r = 0; r < rounds; ++r) {
    while (phase.load(std::memory_order_acquire) != 2 * r) std::this_thread::yield();
    for (auto& p : handoff) {
      p = pool::get();
      EXPECT_EQ(p->users.fetch_add(1), 0) << "an object handed out twice";
    }
    std::sort(handoff.begin(), handoff.end());
    EXPECT_EQ(std::adjacent_find(handoff.begin(), handoff.end()), handoff.end());
    int fresh = 0;
    for (pooled* p : handoff) fresh += p->recycled == 0 ? 1 : 0;
    made_after_round.push_back(fresh);
    phase.store(2 * r + 1, std::memory_order_release);
  }
  freer.join();
  // The first round makes everything; later rounds reuse what the other thread gave back
  // (all but what stays in its own list, at most two batches).
  EXPECT_EQ(made_after_round.front(), in_flight);
  EXPECT_LE(made_after_round.back(), 128);
  EXPECT_LT(made_after_round.back(), in_flight);
}

}  // namespace

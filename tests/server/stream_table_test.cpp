// A connection's stream table: the map of open streams against a reference under churn, and the
// memory of recently ended ids that decides whether a stray frame is an error.
#include "server/stream_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace ringrpc::detail {
namespace {

struct stream_stub {
  std::uint64_t id;
};

TEST(StreamTable, InsertFindEraseAndNoDuplicateIds) {
  stream_table<stream_stub> t;
  stream_stub a{1}, b{2};
  EXPECT_EQ(t.find(1), nullptr) << "an empty table allocates nothing and finds nothing";
  ASSERT_TRUE(t.insert(1, &a));
  ASSERT_TRUE(t.insert(2, &b));
  EXPECT_FALSE(t.insert(1, &b)) << "an id that is open already";
  EXPECT_EQ(t.find(1), &a);
  EXPECT_EQ(t.find(2), &b);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.erase(1), &a);
  EXPECT_EQ(t.erase(1), nullptr);
  EXPECT_EQ(t.find(1), nullptr);
  EXPECT_EQ(t.find(2), &b);
  EXPECT_EQ(t.size(), 1u);
}

// Random opens and ends, ids both dense (1, 2, 3...) and scattered: the table agrees with a
// reference map after every step, so backward-shift deletion never loses or strands an entry.
TEST(StreamTable, AgreesWithAReferenceUnderChurn) {
  std::mt19937_64 rng(12345);
  for (const bool dense : {true, false}) {
    stream_table<stream_stub> t;
    std::unordered_map<std::uint64_t, stream_stub*> ref;
    std::vector<stream_stub> stubs(512);
    for (std::size_t i = 0; i < stubs.size(); ++i) stubs[i].id = dense ? i + 1 : rng() | 1;
    for (int step = 0; step < 200'000; ++step) {
      stream_stub& s = stubs[rng() % stubs.size()];
      if (rng() % 2 == 0) {
        const bool fresh = !ref.contains(s.id);
        ASSERT_EQ(t.insert(s.id, &s), fresh) << step;
        ref.emplace(s.id, &s);
      } else {
        const auto it = ref.find(s.id);
        ASSERT_EQ(t.erase(s.id), it == ref.end() ? nullptr : it->second) << step;
        if (it != ref.end()) ref.erase(it);
      }
      ASSERT_EQ(t.size(), ref.size());
      if (step % 1000 == 0) {
        for (const stream_stub& probe : stubs) {
          const auto it = ref.find(probe.id);
          ASSERT_EQ(t.find(probe.id), it == ref.end() ? nullptr : it->second) << step;
        }
        std::size_t seen = 0;
        t.for_each([&](std::uint64_t id, stream_stub* v) {
          ++seen;
          EXPECT_EQ(ref.at(id), v);
        });
        ASSERT_EQ(seen, ref.size());
      }
    }
  }
}

TEST(StreamTable, RemembersTheLastEndedIdsOnly) {
  constexpr std::uint64_t n = 300;
  constexpr std::uint64_t ended = 200;
  constexpr std::uint64_t kept = stream_table<stream_stub>::remembered_ends;
  static_assert(kept < ended, "the test must end more ids than are remembered");
  stream_table<stream_stub> t;
  std::vector<stream_stub> stubs(n);
  for (std::uint64_t id = 1; id <= n; ++id) {
    stubs[id - 1].id = id;
    ASSERT_TRUE(t.insert(id, &stubs[id - 1]));
  }
  EXPECT_FALSE(t.recently_ended(5)) << "open, never ended";
  for (std::uint64_t id = 1; id <= ended; ++id) ASSERT_NE(t.erase(id), nullptr);
  for (std::uint64_t id = ended - kept + 1; id <= ended; ++id) {
    EXPECT_TRUE(t.recently_ended(id)) << id;
  }
  EXPECT_FALSE(t.recently_ended(ended - kept)) << "forgotten";
  EXPECT_FALSE(t.recently_ended(1));
  EXPECT_FALSE(t.recently_ended(250)) << "still open";
  EXPECT_FALSE(t.recently_ended(999)) << "never opened";
  ASSERT_NE(t.forget(250), nullptr);
  EXPECT_FALSE(t.recently_ended(250)) << "forgotten at once: it was never open for the peer";
  EXPECT_EQ(t.find(250), nullptr);
}

}  // namespace
}  // namespace ringrpc::detail

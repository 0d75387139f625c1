// Tests for rate_schedule: when each call of an open-loop run is due. Pure arithmetic, so the
// clock is just a start time and nothing sleeps.

#include "schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace {

using ringrpc::load::rate_schedule;
using ringrpc::load::rate_step;

constexpr std::int64_t s_ns = 1'000'000'000;
constexpr std::int64_t start = 123'456'789;  // arbitrary, not a round number

// Every due time of every connection, in call order per connection.
std::vector<std::vector<std::int64_t>> all_due(const rate_schedule& s, unsigned connections) {
  std::vector<std::vector<std::int64_t>> out(connections);
  for (unsigned c = 0; c < connections; ++c) {
    for (std::uint64_t n = 0;; ++n) {
      const std::int64_t t = s.due_ns(c, n);
      if (t < 0) break;
      out[c].push_back(t);
    }
  }
  return out;
}

class aggregate_rate : public ::testing::TestWithParam<std::tuple<double, unsigned>> {};

TEST_P(aggregate_rate, TenSecondsHoldExactlyRateTimesTenCallsEvenlySpaced) {
  const auto [rate, connections] = GetParam();
  const rate_schedule s({{rate, 10 * s_ns}}, connections, start);
  const auto due = all_due(s, connections);

  std::vector<std::int64_t> merged;
  for (const auto& d : due) merged.insert(merged.end(), d.begin(), d.end());
  std::sort(merged.begin(), merged.end());
  ASSERT_EQ(merged.size(), static_cast<std::size_t>(std::llround(rate * 10)));

  // Together the connections produce the smooth sequence floor(j / rate), with no two calls at
  // the same instant and no gap larger than one period.
  const double period_ns = 1e9 / rate;
  for (std::size_t j = 0; j < merged.size(); ++j) {
    EXPECT_NEAR(static_cast<double>(merged[j] - start), static_cast<double>(j) * period_ns, 1.0)
        << "call " << j;
    ASSERT_LT(merged[j], start + 10 * s_ns);
  }
  // The per-connection shares differ by at most one call.
  std::size_t lo = merged.size(), hi = 0;
  for (const auto& d : due) {
    lo = std::min(lo, d.size());
    hi = std::max(hi, d.size());
  }
  EXPECT_LE(hi - lo, 1u);
}

INSTANTIATE_TEST_SUITE_P(rates, aggregate_rate,
                         ::testing::Values(std::make_tuple(1000.0, 1u), std::make_tuple(1000.0, 7u),
                                           std::make_tuple(100000.0, 64u), std::make_tuple(333.0, 4u),
                                           std::make_tuple(12345.5, 10u), std::make_tuple(10.0, 64u),
                                           std::make_tuple(2.5, 3u)));

TEST(rate_schedule, EachConnectionIsEvenlySpacedWithItsPhaseOffset) {
  // 1000 calls/s over 4 connections: each sends every 4 ms, connection c offset by c ms.
  const rate_schedule s({{1000, s_ns}}, 4, start);
  for (unsigned c = 0; c < 4; ++c) {
    for (std::uint64_t n = 0; n < 250; ++n) {
      ASSERT_EQ(s.due_ns(c, n), start + static_cast<std::int64_t>(c) * 1'000'000 +
                                    static_cast<std::int64_t>(n) * 4'000'000)
          << "c=" << c << " n=" << n;
    }
    EXPECT_EQ(s.due_ns(c, 250), -1);
  }
}

TEST(rate_schedule, StepsSwitchAtTheRightTimesAndNumberingContinues) {
  const std::vector<rate_step> steps{{1000, 2 * s_ns}, {4000, 1 * s_ns}, {500, 3 * s_ns}};
  const unsigned connections = 3;
  const rate_schedule s(steps, connections, start);
  EXPECT_EQ(s.end_ns(), start + 6 * s_ns);
  ASSERT_EQ(s.steps().size(), 3u);
  EXPECT_EQ(s.steps()[1].rate, 4000);

  EXPECT_EQ(s.step_at(start), 0u);
  EXPECT_EQ(s.step_at(start + 2 * s_ns - 1), 0u);
  EXPECT_EQ(s.step_at(start + 2 * s_ns), 1u);
  EXPECT_EQ(s.step_at(start + 3 * s_ns - 1), 1u);
  EXPECT_EQ(s.step_at(start + 3 * s_ns), 2u);
  EXPECT_EQ(s.step_at(start + 6 * s_ns - 1), 2u);
  EXPECT_EQ(s.step_at(start + 6 * s_ns), 3u);
  EXPECT_EQ(s.step_at(std::numeric_limits<std::int64_t>::max()), 3u);

  std::vector<std::size_t> per_step(4, 0);
  for (const auto& d : all_due(s, connections)) {
    ASSERT_TRUE(std::is_sorted(d.begin(), d.end()));
    for (const std::int64_t t : d) ++per_step[s.step_at(t)];
  }
  EXPECT_EQ(per_step[0], 2000u);
  EXPECT_EQ(per_step[1], 4000u);
  EXPECT_EQ(per_step[2], 1500u);
  EXPECT_EQ(per_step[3], 0u);

  // Connection 0 owns slots 0, 3, ..., 1998 of step 1 (667 calls); its call 667 opens step 2
  // exactly at the step boundary, and connection 1 follows one step-2 period (250 us) later.
  EXPECT_EQ(s.due_ns(0, 666), start + 1998 * 1'000'000);
  EXPECT_EQ(s.due_ns(0, 667), start + 2 * s_ns);
  EXPECT_EQ(s.due_ns(1, 667), start + 2 * s_ns + 250'000);
  // Connection 2 has only 666 calls in step 1 (slots 2 .. 1997).
  EXPECT_EQ(s.due_ns(2, 665), start + 1997 * 1'000'000);
  EXPECT_EQ(s.due_ns(2, 666), start + 2 * s_ns + 500'000);
}

TEST(rate_schedule, DueIsMinusOneAfterTheEndAndForUnknownConnections) {
  const rate_schedule s({{100, s_ns}}, 2, start);
  EXPECT_EQ(s.due_ns(0, 49), start + 98 * 10'000'000);
  EXPECT_EQ(s.due_ns(0, 50), -1);
  EXPECT_EQ(s.due_ns(1, 50), -1);
  EXPECT_EQ(s.due_ns(0, std::numeric_limits<std::uint64_t>::max()), -1);
  EXPECT_EQ(s.due_ns(2, 0), -1);
  EXPECT_EQ(s.step_at(start + s_ns), 1u);
}

TEST(rate_schedule, MoreConnectionsThanCallsLeavesSomeIdle) {
  const rate_schedule s({{2, s_ns}}, 8, start);
  EXPECT_EQ(s.due_ns(0, 0), start);
  EXPECT_EQ(s.due_ns(1, 0), start + s_ns / 2);
  EXPECT_EQ(s.due_ns(0, 1), -1);
  for (unsigned c = 2; c < 8; ++c) EXPECT_EQ(s.due_ns(c, 0), -1);
}

TEST(rate_schedule, NoDriftAtOneMillionCallsPerSecondOverAnHour) {
  const std::int64_t hour = 3600 * s_ns;
  const unsigned connections = 8;
  const rate_schedule s({{1e6, hour}}, connections, start);
  const std::uint64_t per_connection = 3'600'000'000ull / connections;
  for (unsigned c = 0; c < connections; ++c) {
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, per_connection / 2, per_connection - 2,
                                  per_connection - 1}) {
      const std::int64_t closed_form = start + static_cast<std::int64_t>((n * connections + c) * 1000);
      ASSERT_EQ(s.due_ns(c, n), closed_form) << "c=" << c << " n=" << n;
    }
    EXPECT_EQ(s.due_ns(c, per_connection), -1);
  }
}

TEST(rate_schedule, NoDriftWithAFractionalPeriodOverAnHour) {
  // 1.5M calls/s: the aggregate slot j is due at floor(j * 2000 / 3) ns, a period of 666.67 ns
  // that floating-point accumulation would get wrong by microseconds after an hour.
  const std::int64_t hour = 3600 * s_ns;
  const unsigned connections = 7;
  const rate_schedule s({{1.5e6, hour}}, connections, start);
  const std::uint64_t slots = 5'400'000'000ull;
  for (const std::uint64_t j : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, slots / 3 + 1,
                                slots - 7, slots - 1}) {
    const auto c = static_cast<unsigned>(j % connections);
    const std::uint64_t n = j / connections;
    ASSERT_EQ(s.due_ns(c, n), start + static_cast<std::int64_t>(j * 2000 / 3)) << "slot " << j;
  }
  EXPECT_EQ(s.due_ns(static_cast<unsigned>(slots % connections), slots / connections), -1);
}

TEST(rate_schedule, NoDriftAcrossManyStepsLaterInTheRun) {
  // Step starts are exact sums of durations, so the 100th step begins exactly where it should.
  std::vector<rate_step> steps;
  for (int i = 0; i < 100; ++i) steps.push_back({1e6 / 3, 3 * s_ns + 7});
  const rate_schedule s(steps, 1, start);
  EXPECT_EQ(s.end_ns(), start + 100 * (3 * s_ns + 7));
  EXPECT_EQ(s.step_at(start + 99 * (3 * s_ns + 7)), 99u);
  EXPECT_EQ(s.step_at(start + 99 * (3 * s_ns + 7) - 1), 98u);
}

TEST(rate_schedule, InvalidInputThrows) {
  EXPECT_THROW(rate_schedule({}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{0, s_ns}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{-5, s_ns}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{std::nan(""), s_ns}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{std::numeric_limits<double>::infinity(), s_ns}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{1000, 0}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{1000, -s_ns}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{1000, s_ns}, {1000, 0}}, 1, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{1000, s_ns}}, 0, 0), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{1000, std::numeric_limits<std::int64_t>::max()}}, 1, 1), std::invalid_argument);
}

}  // namespace

// What the kept-up verdict counts against: each connection's share of a step adds up to the
// step's calls, and the calls due before a time are exactly those whose due time is earlier.
TEST(rate_schedule, CallsInStepAndDueBeforeMatchTheDueTimes) {
  const unsigned conns = 7;
  const rate_schedule s({{1000, s_ns / 2}, {333.3, s_ns}, {5000, s_ns / 10}}, conns, start);
  const auto due = all_due(s, conns);
  for (std::size_t k = 0; k < 3; ++k) {
    const std::int64_t from = s.step_start_ns(k), to = s.step_start_ns(k + 1);
    std::uint64_t in_step = 0, shares = 0;
    for (unsigned c = 0; c < conns; ++c) {
      const auto n = static_cast<std::uint64_t>(
          std::count_if(due[c].begin(), due[c].end(), [&](std::int64_t t) { return t >= from && t < to; }));
      EXPECT_EQ(s.calls_in_step(c, k), n) << "step " << k << " connection " << c;
      in_step += n;
      shares += s.calls_in_step(c, k);
    }
    EXPECT_EQ(s.due_before(k, to), in_step) << k;
    EXPECT_EQ(shares, in_step) << k;
    for (const std::int64_t until : {from, from + 1, from + (to - from) / 3, to - 1, to + s_ns}) {
      std::uint64_t before = 0;
      for (const auto& d : due) {
        before += static_cast<std::uint64_t>(
            std::count_if(d.begin(), d.end(), [&](std::int64_t t) { return t >= from && t < std::min(until, to); }));
      }
      EXPECT_EQ(s.due_before(k, until), before) << "step " << k << " until " << until - from;
    }
  }
  EXPECT_EQ(s.calls_in_step(0, 3), 0u);
  EXPECT_EQ(s.calls_in_step(conns, 0), 0u);
  EXPECT_EQ(s.due_before(3, s.end_ns()), 0u);
  EXPECT_EQ(s.step_start_ns(3), s.end_ns());
}

// A ramp from FROM to TO over D schedules (FROM + TO) / 2 * D calls (the integral of its rate),
// within one call, spread so that the calls due by any time t are the integral up to t.
class ramp_integral : public ::testing::TestWithParam<std::tuple<double, double, std::int64_t, unsigned>> {};

TEST_P(ramp_integral, CumulativeSendsMatchTheIntegral) {
  const auto [from, to, duration_ns, conns] = GetParam();
  const rate_schedule s({{from, duration_ns, to}}, conns, start);
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  std::vector<std::int64_t> every;
  for (const auto& d : all_due(s, conns)) {
    ASSERT_TRUE(std::is_sorted(d.begin(), d.end()));
    every.insert(every.end(), d.begin(), d.end());
  }
  std::sort(every.begin(), every.end());
  const double integral = (from + to) / 2 * seconds;
  EXPECT_LE(std::abs(static_cast<double>(every.size()) - integral), 1.0) << every.size() << " vs " << integral;
  ASSERT_FALSE(every.empty());
  EXPECT_GE(every.front(), start);
  EXPECT_LT(every.back(), s.end_ns());
  EXPECT_EQ(s.due_before(0, s.end_ns()), every.size());
  // At each tenth of the ramp: the calls due so far are the integral so far, within one call.
  const double slope = (to - from) / seconds;
  for (int tenth = 1; tenth <= 10; ++tenth) {
    const std::int64_t t = duration_ns * tenth / 10;
    const double ts = static_cast<double>(t) / 1e9;
    const auto so_far = static_cast<double>(std::lower_bound(every.begin(), every.end(), start + t) - every.begin());
    EXPECT_LE(std::abs(so_far - (from * ts + slope * ts * ts / 2)), 1.0) << "at " << ts << " s";
    EXPECT_EQ(s.due_before(0, start + t), static_cast<std::uint64_t>(so_far)) << "at " << ts << " s";
  }
  std::uint64_t shares = 0;
  for (unsigned c = 0; c < conns; ++c) shares += s.calls_in_step(c, 0);
  EXPECT_EQ(shares, every.size());
}

INSTANTIATE_TEST_SUITE_P(rate_schedule, ramp_integral,
                         ::testing::Values(std::make_tuple(0.0, 10'000.0, 3 * s_ns, 4u),
                                           std::make_tuple(10'000.0, 0.0, 2 * s_ns, 3u),
                                           std::make_tuple(1'000.0, 5'000.0, s_ns + 333, 7u),
                                           std::make_tuple(5'000.0, 5'000.0, s_ns, 2u),
                                           std::make_tuple(0.0, 3.0, 10 * s_ns, 2u)));

TEST(rate_schedule, RampsAndStepsRunBackToBack) {
  // 1000/s for 1 s, then a ramp 1000 -> 3000 over 2 s (4000 calls), then a ramp down to 0 (1500).
  const rate_schedule s({{1000, s_ns}, {1000, 2 * s_ns, 3000}, {3000, s_ns, 0}}, 5, start);
  EXPECT_EQ(s.end_ns(), start + 4 * s_ns);
  std::vector<std::size_t> per_step(4, 0);
  for (const auto& d : all_due(s, 5)) {
    for (const std::int64_t t : d) ++per_step[s.step_at(t)];
  }
  EXPECT_EQ(per_step[0], 1000u);
  EXPECT_EQ(per_step[1], 4000u);
  EXPECT_EQ(per_step[2], 1500u);
  EXPECT_EQ(s.steps()[1].mean_rate(), 2000);
}

TEST(rate_schedule, AWholeIntegralIsExactlyThatManyCalls) {
  for (const auto& [from, to, ns, calls] : {std::make_tuple(200.0, 1000.0, s_ns / 2, 300u),
                                            std::make_tuple(0.0, 10'000.0, 30 * s_ns, 150'000u),
                                            std::make_tuple(1000.0, 200.0, s_ns / 2, 300u),
                                            std::make_tuple(3.0, 7.0, 3 * s_ns, 15u)}) {
    const rate_schedule s({{from, ns, to}}, 3, start);
    EXPECT_EQ(s.due_before(0, s.end_ns()), calls) << from << ":" << to;
  }
}

TEST(rate_schedule, RejectsNegativeRampRatesAndZeroDurations) {
  EXPECT_THROW(rate_schedule({{-1, s_ns, 10}}, 1, start), std::invalid_argument);
  EXPECT_THROW(rate_schedule({{10, 0, 20}}, 1, start), std::invalid_argument);
  // 0 to 0 is a pause: valid, and no call is due in it.
  const rate_schedule pause({{0, s_ns, 0}, {100, s_ns}}, 1, start);
  EXPECT_EQ(pause.due_ns(0, 0), start + s_ns);
}

// --arrival poisson: a connection's gaps are exponential with the mean the rate gives it, so
// their variance is the mean squared. Deterministic from the seed: the same numbers every run.
TEST(poisson_arrivals, GapsHaveTheMeanAndVarianceOfAnExponential) {
  const unsigned conns = 4;
  const double rate = 20'000;  // all connections: 5000/s each, a mean gap of 200 us
  const rate_schedule s({{rate, 3600 * s_ns}}, conns, start);
  ringrpc::load::poisson_arrivals a;
  s.first_arrival(a, 42, 1);
  const int n = 100'000;
  double sum = 0, sum_sq = 0;
  std::int64_t prev = a.due;
  EXPECT_GE(prev, start);
  for (int i = 0; i < n; ++i) {
    s.next_arrival(a);
    ASSERT_GE(a.due, prev);
    const double gap = static_cast<double>(a.due - prev);
    sum += gap;
    sum_sq += gap * gap;
    prev = a.due;
  }
  const double mean = sum / n, variance = sum_sq / n - mean * mean;
  const double expected = conns / rate * 1e9;
  EXPECT_NEAR(mean, expected, 0.02 * expected);
  EXPECT_NEAR(variance, expected * expected, 0.05 * expected * expected);
}

TEST(poisson_arrivals, SameSeedSameArrivalsOtherConnectionOthers) {
  const rate_schedule s({{1000, 10 * s_ns}}, 2, start);
  ringrpc::load::poisson_arrivals a, b, c;
  s.first_arrival(a, 7, 0);
  s.first_arrival(b, 7, 0);
  s.first_arrival(c, 7, 1);
  int same_as_other = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.due, b.due);
    same_as_other += a.due == c.due;
    s.next_arrival(a);
    s.next_arrival(b);
    s.next_arrival(c);
  }
  EXPECT_LT(same_as_other, 5);
}

// Over steps and ramps the arrivals follow the schedule's rate: each step holds its integral's
// worth of calls, within a few standard deviations (sqrt of the count), and none is past the end.
TEST(poisson_arrivals, FollowStepsAndRampsAndEnd) {
  const unsigned conns = 8;
  const rate_schedule s({{2000, s_ns}, {0, 2 * s_ns, 8000}, {0, s_ns, 0}, {4000, s_ns, 0}}, conns, start);
  const std::vector<double> expected{2000, 8000, 0, 2000};
  std::vector<double> per_step(5, 0);
  for (unsigned c = 0; c < conns; ++c) {
    ringrpc::load::poisson_arrivals a;
    s.first_arrival(a, 1234, c);
    while (a.due >= 0) {
      ASSERT_LT(a.due, s.end_ns());
      ASSERT_EQ(s.step_at(a.due), a.step);
      ++per_step[a.step];
      s.next_arrival(a);
    }
  }
  for (std::size_t k = 0; k < expected.size(); ++k) {
    EXPECT_NEAR(per_step[k], expected[k], 4 * std::sqrt(expected[k]) + 1e-9) << "step " << k;
  }
}

// --fail-if: what each expression means, what is refused before a run, and each verdict.

#include "thresholds.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using namespace ringrpc::load;

run_result sample_run(std::uint64_t ok, std::uint64_t errors, std::uint64_t latency_ns) {
  run_result r;
  r.measured_s = 10;
  r.calls_ok = ok;
  if (errors > 0) r.errors["timeout"] = errors;
  for (std::uint64_t i = 0; i < ok; ++i) r.latency_ns.record(latency_ns);
  return r;
}

std::string error_of(const char* text) {
  try {
    parse_threshold(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(parse_threshold, ReadsMetricComparisonAndValue) {
  auto t = parse_threshold("p99>2ms");
  EXPECT_EQ(t.what, threshold::metric::percentile);
  EXPECT_DOUBLE_EQ(t.percentile, 99);
  EXPECT_EQ(t.op, threshold::comparison::greater);
  EXPECT_DOUBLE_EQ(t.limit, 2000);  // microseconds
  t = parse_threshold(" p99.9 >= 250us ");
  EXPECT_DOUBLE_EQ(t.percentile, 99.9);
  EXPECT_EQ(t.op, threshold::comparison::greater_equal);
  EXPECT_DOUBLE_EQ(t.limit, 250);
  EXPECT_EQ(t.expression, "p99.9 >= 250us");
  t = parse_threshold("errors>0.1%");
  EXPECT_EQ(t.what, threshold::metric::errors);
  EXPECT_TRUE(t.relative);
  EXPECT_DOUBLE_EQ(t.limit, 0.1);
  t = parse_threshold("errors>0");
  EXPECT_FALSE(t.relative);
  t = parse_threshold("rate<90%");
  EXPECT_EQ(t.what, threshold::metric::rate);
  EXPECT_EQ(t.op, threshold::comparison::less);
  EXPECT_TRUE(t.relative);
  t = parse_threshold("rate<=50k");
  EXPECT_EQ(t.op, threshold::comparison::less_equal);
  EXPECT_FALSE(t.relative);
  EXPECT_DOUBLE_EQ(t.limit, 50000);
  EXPECT_DOUBLE_EQ(parse_threshold("mean>1s").limit, 1e6);
  EXPECT_DOUBLE_EQ(parse_threshold("p50>500ns").limit, 0.5);
  EXPECT_EQ(parse_threshold("max>1s").what, threshold::metric::max);
}

TEST(parse_threshold, RefusesWhatItCannotMeanWithTheText) {
  EXPECT_NE(error_of("p99").find("expected METRIC>VALUE"), std::string::npos);
  EXPECT_NE(error_of("p99>2").find("unit"), std::string::npos) << "a bare latency is ambiguous";
  EXPECT_NE(error_of("p99>2%").find("time unit"), std::string::npos);
  EXPECT_NE(error_of("p101>2ms").find("(0, 100]"), std::string::npos);
  EXPECT_NE(error_of("latency>2ms").find("unknown metric 'latency'"), std::string::npos);
  EXPECT_NE(error_of("errors>x").find("not a non-negative number"), std::string::npos);
  EXPECT_NE(error_of("rate<fast").find("not a rate"), std::string::npos);
  EXPECT_NE(error_of("p99>").find("no value"), std::string::npos);
  EXPECT_NE(error_of("p99>2parsecs").find("'p99>2parsecs'"), std::string::npos);
}

TEST(check_threshold_applies, RateShareNeedsAnOpenLoop) {
  EXPECT_THROW(check_threshold_applies(parse_threshold("rate<90%"), false), std::invalid_argument);
  EXPECT_NO_THROW(check_threshold_applies(parse_threshold("rate<90%"), true));
  EXPECT_NO_THROW(check_threshold_applies(parse_threshold("rate<50k"), false));
  try {
    check_threshold_applies(parse_threshold("rate<90%"), false);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("closed loop"), std::string::npos) << e.what();
  }
}

TEST(evaluate_threshold, FailsExactlyWhenTheConditionHolds) {
  const run_result r = sample_run(1000, 2, 1'500'000);  // 1.5 ms each, 2 errors of 1002
  auto v = evaluate_threshold(parse_threshold("p99>2ms"), r);
  EXPECT_FALSE(v.failed);
  EXPECT_NEAR(v.observed_value, 1500, 2);
  EXPECT_EQ(v.unit, "us");
  EXPECT_TRUE(evaluate_threshold(parse_threshold("p99>1ms"), r).failed);
  EXPECT_TRUE(evaluate_threshold(parse_threshold("mean>=1ms"), r).failed);

  v = evaluate_threshold(parse_threshold("errors>0.1%"), r);
  EXPECT_TRUE(v.failed);  // 0.2 %
  EXPECT_NEAR(v.observed_value, 100.0 * 2 / 1002, 1e-9);
  EXPECT_FALSE(evaluate_threshold(parse_threshold("errors>0.5%"), r).failed);
  EXPECT_TRUE(evaluate_threshold(parse_threshold("errors>0"), r).failed);
  EXPECT_FALSE(evaluate_threshold(parse_threshold("errors>2"), r).failed);
  EXPECT_TRUE(evaluate_threshold(parse_threshold("errors>=2"), r).failed);

  // 1000 calls in 10 s = 100 calls/s.
  EXPECT_TRUE(evaluate_threshold(parse_threshold("rate<101"), r).failed);
  EXPECT_FALSE(evaluate_threshold(parse_threshold("rate<100"), r).failed);
  run_result open = r;
  open.open_loop = true;
  open.requested_rate = 125;  // answered 80 % of the schedule
  open.answered_rate = 100;
  v = evaluate_threshold(parse_threshold("rate<90%"), open);
  EXPECT_TRUE(v.failed);
  EXPECT_NEAR(v.observed_value, 80, 1e-9);
  EXPECT_FALSE(evaluate_threshold(parse_threshold("rate<75%"), open).failed);
}

TEST(evaluate_threshold, LatencyWithoutSuccessfulCallsFails) {
  const run_result r = sample_run(0, 5, 0);
  const auto v = evaluate_threshold(parse_threshold("p99>2ms"), r);
  EXPECT_TRUE(v.failed) << "a run with no successful call must not pass a latency limit";
  EXPECT_FALSE(v.note.empty());
}

}  // namespace

namespace {

std::string list_error_of(const char* text) {
  try {
    parse_thresholds(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

// k6 lists conditions with commas; so may --fail-if.
TEST(parse_thresholds, CommaSeparatedConditions) {
  const auto ts = parse_thresholds("p99>2ms,errors>0, rate<90%");
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].expression, "p99>2ms");
  EXPECT_EQ(ts[0].what, threshold::metric::percentile);
  EXPECT_DOUBLE_EQ(ts[0].limit, 2000);
  EXPECT_EQ(ts[1].expression, "errors>0");
  EXPECT_EQ(ts[2].expression, "rate<90%");
  EXPECT_TRUE(ts[2].relative);
  EXPECT_EQ(parse_thresholds("p99>2ms").size(), 1u);
  EXPECT_NE(list_error_of("p99>2ms,,errors>0").find("empty condition"), std::string::npos) << list_error_of("p99>2ms,,errors>0");
  EXPECT_NE(list_error_of("p99>2ms,").find("empty condition"), std::string::npos);
  EXPECT_NE(list_error_of("p99>2ms,p99>2").find("unit"), std::string::npos) << list_error_of("p99>2ms,p99>2");
}

// An open loop's rate is the answered share of its schedule: a backlog answered late inside
// the window must not make it look above 100 %.
TEST(evaluate_threshold, OpenLoopRateIsTheAnsweredRate) {
  run_result r = sample_run(12000, 0, 1000);  // 1200 calls/s completed in the window
  r.open_loop = true;
  r.requested_rate = 1000;
  r.answered_rate = 900;
  const auto v = evaluate_threshold(parse_threshold("rate<95%"), r);
  EXPECT_DOUBLE_EQ(v.observed_value, 90);
  EXPECT_TRUE(v.failed);
  EXPECT_DOUBLE_EQ(evaluate_threshold(parse_threshold("rate<1k"), r).observed_value, 900);
}

// Tests for the command-line unit parsers of ringrpc-load.

#include "units.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace ringrpc::load;

// The message of the std::invalid_argument that `f` throws, or "" if it throws nothing.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(parse_duration, AcceptsEveryUnitAndBareSeconds) {
  const std::pair<const char*, std::chrono::nanoseconds> cases[] = {
      {"250us", 250us}, {"10ms", 10ms},     {"30s", 30s},     {"1m", 1min}, {"2h", 2h},
      {"5", 5s},        {"1.5s", 1500ms}, {"0.5ms", 500us}, {"0", 0s},    {"1.5us", 1500ns}};
  for (const auto& [text, want] : cases) EXPECT_EQ(parse_duration(text), want) << text;
}

TEST(parse_duration, RejectsOthersNamingTextAndUnits) {
  EXPECT_EQ(error_of([] { parse_duration("10q"); }),
            "bad duration '10q': use a number with us, ms, s, m or h");
  for (const char* bad : {"", "s", "ms", "-1s", "+1s", " 1s", "1s ", "1 s", "10S", "1sec", "nan", "inf",
                          "1e400s", "0x10s", "10ns"}) {
    EXPECT_THROW(parse_duration(bad), std::invalid_argument) << "'" << bad << "'";
  }
  EXPECT_NE(error_of([] { parse_duration("999999999h"); }), "");
}

TEST(parse_size, BinaryMultiples) {
  const std::pair<const char*, std::uint64_t> cases[] = {
      {"64", 64},      {"0", 0},        {"4k", 4096},       {"4K", 4096},
      {"1m", 1048576}, {"1M", 1048576}, {"2g", 2147483648}, {"1.5k", 1536}};
  for (const auto& [text, want] : cases) EXPECT_EQ(parse_size(text), want) << text;
}

TEST(parse_size, RejectsBadText) {
  const std::string msg = error_of([] { parse_size("12x"); });
  EXPECT_NE(msg.find("'12x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("k, m or g"), std::string::npos) << msg;
  for (const char* bad : {"", "k", "-1", "1.5", "0.3k", "4kb", "4 k", "1e30g"}) {
    EXPECT_THROW(parse_size(bad), std::invalid_argument) << "'" << bad << "'";
  }
}

TEST(parse_rate, DecimalMultiples) {
  EXPECT_EQ(parse_rate("500"), 500);
  EXPECT_EQ(parse_rate("10k"), 10000);
  EXPECT_EQ(parse_rate("10K"), 10000);
  EXPECT_EQ(parse_rate("1.5M"), 1.5e6);
  EXPECT_EQ(parse_rate("2m"), 2e6);
  EXPECT_EQ(parse_rate("0.5"), 0.5);
  EXPECT_EQ(parse_rate("10k/s"), 10000);
}

TEST(parse_rate, RejectsNonPositiveAndBadText) {
  const std::string msg = error_of([] { parse_rate("fast"); });
  EXPECT_NE(msg.find("bad rate 'fast'"), std::string::npos) << msg;
  for (const char* bad : {"", "0", "0k", "-10", "10x", "k", "1e999", "nan"}) {
    EXPECT_THROW(parse_rate(bad), std::invalid_argument) << "'" << bad << "'";
  }
}

TEST(parse_percentiles, ListInRange) {
  EXPECT_EQ(parse_percentiles("50,99,99.9"), (std::vector<double>{50, 99, 99.9}));
  EXPECT_EQ(parse_percentiles("100"), (std::vector<double>{100}));
  EXPECT_EQ(parse_percentiles("99.99, 50"), (std::vector<double>{50, 99.99}));
  EXPECT_EQ(parse_percentiles("p50,p99,99"), (std::vector<double>{50, 99}));
  EXPECT_EQ(parse_percentiles("0.1"), (std::vector<double>{0.1}));
}

TEST(parse_percentiles, RejectsOutOfRangeAndEmpty) {
  const std::string msg = error_of([] { parse_percentiles("50,101"); });
  EXPECT_NE(msg.find("'101'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(0, 100]"), std::string::npos) << msg;
  for (const char* bad : {"", "0", "-1", "100.5", "50,", ",50", "50,,99", "abc", "50%", "nan"}) {
    EXPECT_THROW(parse_percentiles(bad), std::invalid_argument) << "'" << bad << "'";
  }
}

TEST(parse_rate_list, ListOfRates) {
  EXPECT_EQ(parse_rate_list("10k,20k,40k"), (std::vector<double>{10000, 20000, 40000}));
  EXPECT_EQ(parse_rate_list("500"), (std::vector<double>{500}));
  // Order is the run order, so it is kept.
  EXPECT_EQ(parse_rate_list("40k, 10k"), (std::vector<double>{40000, 10000}));
}

TEST(parse_rate_list, RejectsBadItems) {
  for (const char* bad : {"", "10k,", "10k,,20k", "10k,0", "10k,x"}) {
    EXPECT_THROW(parse_rate_list(bad), std::invalid_argument) << "'" << bad << "'";
  }
}

TEST(parse_rate_ramps, SegmentsInOrder) {
  const auto r = parse_rate_ramps("0:10k:30s, 10k:10k:1m,5k:0:500ms");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].from, 0);
  EXPECT_EQ(r[0].to, 10000);
  EXPECT_EQ(r[0].duration, 30s);
  EXPECT_EQ(r[1].duration, 60s);
  EXPECT_EQ(r[2].to, 0);
  EXPECT_EQ(r[2].duration, 500ms);
}

TEST(parse_rate_ramps, ClearMessagesForBadSegments) {
  EXPECT_NE(error_of([] { parse_rate_ramps("10k:20k"); }).find("use FROM:TO:DURATION"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("1:2:3:4"); }).find("use FROM:TO:DURATION"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("-5:10:1s"); }).find("'-5:10:1s'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("5:-10:1s"); }).find("positive number of calls/s"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("5:10:0s"); }).find("duration must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("5:10:soon"); }).find("'5:10:soon'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("0:0:1s"); }).find("cannot both be 0"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rate_ramps("1:2:1s,"); }).find("use FROM:TO:DURATION"), std::string::npos);
}

}  // namespace

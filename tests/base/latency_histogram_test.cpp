// Tests for latency_histogram, its HdrHistogram V2 encoding and the interval log reader/writer.

#include "base/latency_histogram.hpp"
#include "hdr_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ringrpc::detail;

using bucket = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;

std::vector<bucket> buckets_of(const latency_histogram& h) {
  std::vector<bucket> out;
  h.for_each_bucket([&](std::uint64_t low, std::uint64_t high, std::uint64_t n) {
    out.emplace_back(low, high, n);
  });
  return out;
}

// Log-uniform values, so every power-of-two bucket gets exercised.
std::uint64_t log_uniform(std::mt19937_64& rng, double low, double high) {
  std::uniform_real_distribution<double> exponent(std::log(low), std::log(high));
  return static_cast<std::uint64_t>(std::exp(exponent(rng)));
}

std::string fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// From HdrHistogram's own test resources (jHiccup-2.0.7S.logV2.hlog, written by the Java
// implementation): the third column is the histogram's max in ms, which pins our layout and
// max() semantics to theirs.
constexpr const char* java_log =
    "#[Logged with jHiccup version 2.0.7-SNAPSHOT]\n"
    "#[Histogram log format version 1.2]\n"
    "#[StartTime: 1441753532.570 (seconds since epoch), Tue Sep 08 16:05:32 PDT 2015]\n"
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
    "0.126,1.007,1.933,HISTFAAAAEB42pNpmSzMwMAgywABTBDKT4GBgdnNYMcCBvsPEBEjDT0FMTUxMT05LgEhPq"
    "mIeWxtTAKMTNxM6xmZmAAjcgjc\n"
    "7.134,1.515,960.496,HISTFAAAAJV42pNpmSzMwMDUwAABTBDKT4GBgdnNYMcCBvsPEBEWLi4eNkY2PiYOPhYO"
    "LgGOLuZjTGLrGZnKgTCYyZrJEoh1mWSZpMFQFkpyM/GCMTKJzOdkYoVCZjgLmc1MhDwzEyMQggl0SH1BbEJIgIUJ"
    "C2AhUoxchSwsLGwsMIBgYRUkQyFBaQ4g4EIl0PlcpKtB4wMAh5wT+Q==\n"
    "35.133,0.999,8.716,HISTFAAAAEx42pNpmSzMwMCgzQABTBDKT4GBgdnNYMcCBvsPEBE+CQUJAQEOAQkFEQ4BI"
    "R6xD0xPWCcwcsizNDMylQNhOJM1kyUQ6zMxAQC4Hwtg\n";

// ----- layout ------------------------------------------------------------------------------

TEST(LatencyHistogramLayout, MatchesHdrHistogramDefinitions) {
  const latency_histogram h;
  EXPECT_EQ(h.lowest_discernible(), 1000u);
  EXPECT_EQ(h.highest_trackable(), 60'000'000'000u);
  EXPECT_EQ(h.significant_digits(), 3);
  EXPECT_EQ(h.unit_magnitude(), 9);          // floor(log2(1000))
  EXPECT_EQ(h.sub_bucket_count(), 2048u);    // 2^ceil(log2(2 * 10^3))
  EXPECT_EQ(h.bucket_count(), 17);           // 2048 << 9 << 16 > 60e9
  EXPECT_EQ(h.counts_length(), 18u * 1024u);

  // HdrHistogram's documented example: 1 µs .. 1 hour in µs, 3 digits.
  const latency_histogram hour(1, 3'600'000'000, 3);
  EXPECT_EQ(hour.unit_magnitude(), 0);
  EXPECT_EQ(hour.bucket_count(), 22);
  EXPECT_EQ(hour.counts_length(), 23552u);

  EXPECT_EQ(latency_histogram(1, 1000, 2).sub_bucket_count(), 256u);
  EXPECT_EQ(latency_histogram(1, 1000, 0).sub_bucket_count(), 2u);
}

TEST(LatencyHistogramLayout, IndexAndValueMappingsAreInverseAndContiguous) {
  for (const int digits : {0, 1, 2, 3, 4}) {
    for (const std::uint64_t lowest : {1u, 1000u, 1024u, 12345u}) {
      const latency_histogram h(lowest, 10'000'000'000, digits);
      ASSERT_LT(h.index_of(h.highest_trackable()), h.counts_length());
      for (std::size_t i = 0; i < h.counts_length(); ++i) {
        const std::uint64_t low = h.value_at_index(i);
        const std::uint64_t high = h.highest_equivalent_value(low);
        ASSERT_EQ(h.index_of(low), i) << "digits=" << digits << " lowest=" << lowest;
        ASSERT_EQ(h.index_of(high), i);
        ASSERT_EQ(h.lowest_equivalent_value(high), low);
        if (i > 0) {
          ASSERT_EQ(h.highest_equivalent_value(h.value_at_index(i - 1)) + 1, low);
        }
      }
    }
  }
}

TEST(LatencyHistogramLayout, RejectsInvalidParameters) {
  EXPECT_THROW(latency_histogram(0, 100, 3), std::invalid_argument);
  EXPECT_THROW(latency_histogram(1000, 1999, 3), std::invalid_argument);
  EXPECT_THROW(latency_histogram(1, 100, 6), std::invalid_argument);
  EXPECT_THROW(latency_histogram(1, 100, -1), std::invalid_argument);
  EXPECT_THROW(latency_histogram(1, std::numeric_limits<std::uint64_t>::max(), 3),
               std::invalid_argument);
  EXPECT_NO_THROW(latency_histogram(1000, 2000, 3));
  EXPECT_NO_THROW(latency_histogram(1, std::numeric_limits<std::int64_t>::max(), 3));
}

// ----- precision and statistics ------------------------------------------------------------

TEST(LatencyHistogramPrecision, HighestEquivalentWithinTenthOfAPercent) {
  latency_histogram h;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200'000; ++i) {
    // At and above lowest * 10^3 the relative precision holds.
    const std::uint64_t v = log_uniform(rng, 1e6, 60e9);
    const std::uint64_t high = h.highest_equivalent_value(v);
    ASSERT_GE(high, v);
    ASSERT_LT(static_cast<double>(high - v), static_cast<double>(v) * 0.001) << v;
    ASSERT_LE(h.lowest_equivalent_value(v), v);
  }
  for (int i = 0; i < 20'000; ++i) {
    // Below, buckets are 2^unit_magnitude (<= lowest_discernible) wide.
    const std::uint64_t v = log_uniform(rng, 1, 1e6);
    ASSERT_GE(h.highest_equivalent_value(v), v);
    ASSERT_LT(h.highest_equivalent_value(v) - v, 512u);
  }
  for (int i = 0; i < 500; ++i) {  // and what a recording reports back agrees
    const std::uint64_t v = log_uniform(rng, 1e6, 60e9);
    h.reset();
    h.record(v);
    ASSERT_EQ(h.max(), h.highest_equivalent_value(v));
    ASSERT_EQ(h.value_at_percentile(50), h.max());
    ASSERT_EQ(h.min(), h.lowest_equivalent_value(v));
  }
}

TEST(LatencyHistogramPercentiles, UniformMicroseconds) {
  latency_histogram h;
  for (std::uint64_t us = 1; us <= 100'000; ++us) h.record(us * 1000);
  ASSERT_EQ(h.count(), 100'000u);
  const auto expect_near = [&](double percentile, double want_ns) {
    const auto got = static_cast<double>(h.value_at_percentile(percentile));
    EXPECT_GE(got, want_ns) << "p" << percentile;
    EXPECT_LE(got, want_ns * 1.001) << "p" << percentile;
  };
  expect_near(50, 50'000'000);
  expect_near(25, 25'000'000);
  expect_near(99, 99'000'000);
  expect_near(99.9, 99'900'000);
  expect_near(100, 100'000'000);
  EXPECT_EQ(h.value_at_percentile(100), h.max());
  EXPECT_EQ(h.value_at_percentile(0), h.min());
  EXPECT_LE(h.min(), 1000u);
  EXPECT_GT(h.min(), 1000u - 512u);
  EXPECT_NEAR(h.mean(), 50'000'500.0, 50'000'500.0 * 0.001);
}

TEST(LatencyHistogramPercentiles, RankSemanticsAndClamping) {
  latency_histogram h(1, 1'000'000, 3);  // single-unit buckets below 2048
  for (std::uint64_t v = 1; v <= 10; ++v) h.record(v);
  EXPECT_EQ(h.value_at_percentile(10), 1u);
  EXPECT_EQ(h.value_at_percentile(50), 5u);
  EXPECT_EQ(h.value_at_percentile(50.0001), 6u);
  EXPECT_EQ(h.value_at_percentile(100), 10u);
  EXPECT_EQ(h.value_at_percentile(0), 1u);
  EXPECT_EQ(h.value_at_percentile(-3), 1u);
  EXPECT_EQ(h.value_at_percentile(250), 10u);
  EXPECT_EQ(h.value_at_percentile(std::nan("")), 1u);
}

TEST(LatencyHistogramStatistics, MatchExactComputations) {
  latency_histogram h;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(5e6), 1.0);  // median 5 ms
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 200'000; ++i) {
    values.push_back(std::clamp<std::uint64_t>(static_cast<std::uint64_t>(dist(rng)), 1'000'000,
                                               50'000'000'000));
    h.record(values.back());
  }
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  double sum = 0;
  for (const auto v : values) sum += static_cast<double>(v);
  const double mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (const auto v : values) sq += std::pow(static_cast<double>(v) - mean, 2);
  const double stddev = std::sqrt(sq / static_cast<double>(values.size()));

  EXPECT_EQ(h.count(), values.size());
  EXPECT_EQ(h.min(), h.lowest_equivalent_value(*lo));
  EXPECT_LE(h.min(), *lo);
  EXPECT_GE(static_cast<double>(h.min()), static_cast<double>(*lo) * 0.999);
  EXPECT_EQ(h.max(), h.highest_equivalent_value(*hi));
  EXPECT_GE(h.max(), *hi);
  EXPECT_LE(static_cast<double>(h.max()), static_cast<double>(*hi) * 1.001);
  EXPECT_NEAR(h.mean(), mean, mean * 0.001);
  EXPECT_NEAR(h.stddev(), stddev, stddev * 0.001);
}

TEST(LatencyHistogramBasics, EmptyHistogram) {
  const latency_histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.stddev(), 0.0);
  EXPECT_EQ(h.value_at_percentile(0), 0u);
  EXPECT_EQ(h.value_at_percentile(50), 0u);
  EXPECT_EQ(h.value_at_percentile(100), 0u);
  EXPECT_EQ(h.saturated(), 0u);
  EXPECT_TRUE(buckets_of(h).empty());
  const latency_histogram back = decode_compressed_base64(encode_compressed_base64(h));
  EXPECT_TRUE(back.same_layout(h));
  EXPECT_EQ(back.count(), 0u);
  EXPECT_EQ(back.max(), 0u);
}

TEST(LatencyHistogramBasics, SaturationClampsToHighestTrackable) {
  latency_histogram h;
  h.record(59'000'000'000);
  h.record(61'000'000'000);
  h.record(std::numeric_limits<std::uint64_t>::max());
  h.record_n(1'000'000'000'000, 5);
  h.record_n(2'000'000'000'000, 0);  // no-op
  EXPECT_EQ(h.count(), 8u);
  EXPECT_EQ(h.saturated(), 7u);
  EXPECT_EQ(h.max(), h.highest_equivalent_value(60'000'000'000));
  EXPECT_EQ(h.value_at_percentile(100), h.max());
  EXPECT_EQ(h.count_at_index(h.index_of(60'000'000'000)), 7u);
  h.reset();
  EXPECT_EQ(h.saturated(), 0u);
  EXPECT_EQ(h.count(), 0u);
  EXPECT_TRUE(buckets_of(h).empty());
}

TEST(LatencyHistogramMerge, EqualsRecordingEverythingInOne) {
  latency_histogram a, b, all;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50'000; ++i) {
    const std::uint64_t v = log_uniform(rng, 500, 90e9);  // some saturate
    (i % 3 == 0 ? a : b).record(v);
    all.record(v);
  }
  a.record_n(12'345'678, 1000);
  all.record_n(12'345'678, 1000);
  a.merge(b);
  EXPECT_EQ(buckets_of(a), buckets_of(all));
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.saturated(), all.saturated());
  EXPECT_GT(a.saturated(), 0u);
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  EXPECT_EQ(a.value_at_percentile(99.9), all.value_at_percentile(99.9));

  latency_histogram empty;
  empty.merge(all);
  EXPECT_EQ(buckets_of(empty), buckets_of(all));
  EXPECT_EQ(empty.min(), all.min());
}

TEST(LatencyHistogramMerge, DifferentLayoutsThrow) {
  latency_histogram a;
  a.record(5'000'000);
  const auto before = buckets_of(a);
  EXPECT_THROW(a.merge(latency_histogram(1, 60'000'000'000, 3)), std::invalid_argument);
  EXPECT_THROW(a.merge(latency_histogram(1000, 60'000'000'000, 2)), std::invalid_argument);
  EXPECT_THROW(a.merge(latency_histogram(1000, 120'000'000'000, 3)), std::invalid_argument);
  EXPECT_EQ(buckets_of(a), before);
  EXPECT_EQ(a.count(), 1u);
}

// ----- V2 encoding -------------------------------------------------------------------------

TEST(LatencyHistogramEncoding, RoundTripPreservesEveryBucketCount) {
  std::mt19937_64 rng(11);
  const std::vector<std::tuple<std::uint64_t, std::uint64_t, int>> layouts{
      {1000, 60'000'000'000, 3}, {1, 3'600'000'000, 2}, {1, 2, 0}, {7, 1'000'000'000'000, 5}};
  for (const auto& [lowest, highest, digits] : layouts) {
    latency_histogram h(lowest, highest, digits);
    h.record(0);
    h.record(1);
    h.record_n(highest, std::uint64_t{1} << 40);  // multi-byte LEB128 words
    for (int i = 0; i < 5000; ++i) h.record(log_uniform(rng, 1, static_cast<double>(highest)));
    // A lone empty bucket between two full ones is encoded as a plain 0, not a run.
    h.record(h.value_at_index(h.counts_length() / 2));
    h.record(h.value_at_index(h.counts_length() / 2 + 2));

    const std::string text = encode_compressed_base64(h);
    EXPECT_EQ(text.substr(0, 6), "HISTFA");  // compressed cookie 0x1c849314, as Java writes it
    const latency_histogram back = decode_compressed_base64(text);
    ASSERT_TRUE(back.same_layout(h));
    for (std::size_t i = 0; i < h.counts_length(); ++i) {
      ASSERT_EQ(back.count_at_index(i), h.count_at_index(i)) << "index " << i;
    }
    EXPECT_EQ(back.count(), h.count());
    EXPECT_EQ(back.min(), h.min());
    EXPECT_EQ(back.max(), h.max());
    EXPECT_EQ(encode_compressed_base64(back), text);
  }
}

TEST(LatencyHistogramEncoding, DecodesHistogramsWrittenByHdrHistogramJava) {
  std::istringstream in(java_log);
  interval_log_reader reader(in);
  const auto intervals = reader.read_all();
  ASSERT_EQ(intervals.size(), 3u);
  ASSERT_TRUE(reader.start_time_s().has_value());
  EXPECT_DOUBLE_EQ(*reader.start_time_s(), 1441753532.570);
  EXPECT_FALSE(reader.base_time_s().has_value());
  for (const auto& interval : intervals) {
    EXPECT_GT(interval.histogram.count(), 0u);
    EXPECT_EQ(fixed3(static_cast<double>(interval.histogram.max()) / 1e6),
              fixed3(interval.max_value));
    const auto again = decode_compressed_base64(encode_compressed_base64(interval.histogram));
    EXPECT_EQ(buckets_of(again), buckets_of(interval.histogram));
  }
  EXPECT_DOUBLE_EQ(intervals[1].start_s, 7.134);
  EXPECT_DOUBLE_EQ(intervals[1].interval_s, 1.515);
}

TEST(LatencyHistogramEncoding, RejectsMalformedInput) {
  latency_histogram h;
  h.record(123'456);
  const std::string good = encode_compressed_base64(h);
  EXPECT_THROW(decode_compressed_base64(""), std::invalid_argument);
  EXPECT_THROW(decode_compressed_base64("not base64!"), std::invalid_argument);
  EXPECT_THROW(decode_compressed_base64("AAAAAAAAAAAAAAAA"), std::invalid_argument);  // bad cookie
  EXPECT_THROW(decode_compressed_base64(good.substr(0, good.size() / 2)), std::invalid_argument);
  std::string corrupt = good;
  corrupt[20] = corrupt[20] == 'A' ? 'B' : 'A';
  EXPECT_THROW(decode_compressed_base64(corrupt), std::invalid_argument);
}

// ----- interval log ------------------------------------------------------------------------

TEST(IntervalLog, WriteReadRoundTrip) {
  std::mt19937_64 rng(5);
  std::vector<latency_histogram> histograms(3);
  for (auto& h : histograms) {
    for (int i = 0; i < 1000; ++i) h.record(log_uniform(rng, 1e4, 1e9));
  }
  std::stringstream log;
  interval_log_writer writer(log);
  writer.write_header(1700000000.25);
  writer.write_comment("ringrpc load test");
  writer.write_interval(0.0, 1.0, histograms[0], "get");
  writer.write_interval(1.0, 1.0, histograms[1], "put");
  writer.write_interval(2.0, 0.5, histograms[2]);

  const std::string text = log.str();
  EXPECT_NE(text.find("#[Histogram log format version 1.3]\n"), std::string::npos);
  EXPECT_NE(text.find("#[StartTime: 1700000000.250 (seconds since epoch), 2023-11-14T22:13:20Z]\n"),
            std::string::npos);
  EXPECT_NE(text.find("#[BaseTime: 1700000000.250 (seconds since epoch)]\n"), std::string::npos);
  EXPECT_NE(text.find("\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
                      "\"Interval_Compressed_Histogram\"\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nTag=get,0.000,1.000," +
                      fixed3(static_cast<double>(histograms[0].max()) / 1e6) + ",HISTFA"),
            std::string::npos);
  EXPECT_NE(text.find("\n2.000,0.500,"), std::string::npos);

  interval_log_reader reader(log);
  const auto intervals = reader.read_all();
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(*reader.start_time_s(), 1700000000.25);
  EXPECT_EQ(*reader.base_time_s(), 1700000000.25);
  const std::vector<std::string> tags{"get", "put", ""};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(intervals[i].tag, tags[i]);
    EXPECT_EQ(buckets_of(intervals[i].histogram), buckets_of(histograms[i]));
    EXPECT_NEAR(intervals[i].max_value, static_cast<double>(histograms[i].max()) / 1e6, 0.0005);
  }
  EXPECT_EQ(intervals[2].start_s, 2.0);
  EXPECT_EQ(intervals[2].interval_s, 0.5);
  EXPECT_FALSE(reader.next().has_value());
}

TEST(IntervalLog, MalformedLineReportsItsLineNumber) {
  latency_histogram h;
  h.record(42'000);
  const std::string hist = encode_compressed_base64(h);
  const std::string prefix = "#[Histogram log format version 1.3]\n"
                             "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
                             "\"Interval_Compressed_Histogram\"\n"
                             "\n"
                             "0.000,1.000,0.042," + hist + "\r\n";  // CRLF is tolerated
  const std::vector<std::pair<std::string, std::string>> bad_lines{
      {"1.000,1.000," + hist, "expected 4 comma-separated fields, got 3"},
      {"1.000,1.000,0.042," + hist + ",extra", "got 5"},
      {"1.000,abc,0.042," + hist, "bad interval length"},
      {"Tag=x", "Tag= without fields"},
      {"1.000,1.000,0.042,HISTFAAAA!!", "bad histogram"},
      {"#[BaseTime: soon (seconds since epoch)]", "bad time"},
  };
  for (const auto& [bad, why] : bad_lines) {
    std::istringstream in(prefix + bad + "\n2.000,1.000,0.042," + hist + "\n");
    interval_log_reader reader(in);
    ASSERT_TRUE(reader.next().has_value());
    try {
      (void)reader.next();
      ADD_FAILURE() << "no error for: " << bad;
    } catch (const interval_log_error& e) {
      EXPECT_EQ(e.line(), 5u) << bad;
      EXPECT_NE(std::string(e.what()).find("interval log line 5:"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(IntervalLog, WriterRejectsLineBreakingText) {
  std::ostringstream out;
  interval_log_writer writer(out);
  const latency_histogram h;
  EXPECT_THROW(writer.write_interval(0, 1, h, "a,b"), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(0, 1, h, "a b"), std::invalid_argument);
  EXPECT_THROW(writer.write_comment("two\nlines"), std::invalid_argument);
  EXPECT_TRUE(out.str().empty());
}

}  // namespace

#pragma once
// Command-line values with unit suffixes.

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ringrpc::load {

/// "250us", "10ms", "30s", "1m", "2h"; a bare number means seconds. Throws std::invalid_argument
/// naming the text and the accepted units.
std::chrono::nanoseconds parse_duration(std::string_view text);
/// "64", "4k", "1m" (binary: k = 1024).
std::uint64_t parse_size(std::string_view text);
/// "500", "10k", "1.5M" calls per second (decimal: k = 1000).
double parse_rate(std::string_view text);
/// "50,99,99.9" -> {50, 99, 99.9}; each in (0, 100].
std::vector<double> parse_percentiles(std::string_view text);
/// "10k,20k,40k" -> rates.
std::vector<double> parse_rate_list(std::string_view text);

/// One segment of --rate-ramp: calls/s going linearly from `from` to `to` over `duration`.
struct rate_ramp_segment {
  double from = 0, to = 0;
  std::chrono::nanoseconds duration{0};
};
/// "0:10k:30s,10k:10k:1m" -> segments run one after another. Each rate is >= 0 (0 allowed, not
/// at both ends), each duration positive; throws std::invalid_argument naming the bad segment.
std::vector<rate_ramp_segment> parse_rate_ramps(std::string_view text);

}  // namespace ringrpc::load

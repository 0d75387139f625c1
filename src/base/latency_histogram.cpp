// Log-linear latency histogram (HdrHistogram bucket layout). The V2 encoding and the interval
// log live with ringrpc-load (tools/load/hdr_log.cpp): only it needs zlib.

#include "base/latency_histogram.hpp"

#include <algorithm>
#include <cmath>

namespace ringrpc::detail {

namespace {

void require(bool ok, const char* message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

// ===== latency_histogram ===================================================================

latency_histogram::latency_histogram()
    : latency_histogram(default_lowest_discernible, default_highest_trackable,
                        default_significant_digits) {}

latency_histogram::latency_histogram(std::uint64_t lowest_discernible,
                                     std::uint64_t highest_trackable, int significant_digits)
    : _lowest_discernible(lowest_discernible),
      _highest_trackable(highest_trackable),
      _significant_digits(significant_digits) {
  require(lowest_discernible >= 1, "latency_histogram: lowest_discernible must be >= 1");
  require(significant_digits >= 0 && significant_digits <= 5,
          "latency_histogram: significant_digits must be in [0, 5]");
  // The encoding stores both bounds as signed 64-bit integers.
  require(highest_trackable <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
          "latency_histogram: highest_trackable must be <= INT64_MAX");
  require(highest_trackable / 2 >= lowest_discernible,
          "latency_histogram: highest_trackable must be >= 2 * lowest_discernible");

  // Values below this need single-unit resolution to keep `digits` significant digits; the
  // sub-bucket count is the next power of two so the mapping stays shift-and-mask.
  std::uint64_t single_unit_limit = 2;
  for (int i = 0; i < significant_digits; ++i) single_unit_limit *= 10;
  const auto sub_bucket_count_magnitude =
      static_cast<int>(std::bit_width(single_unit_limit - 1));  // ceil(log2)
  _sub_bucket_half_count_magnitude = std::max(sub_bucket_count_magnitude, 1) - 1;
  _unit_magnitude = static_cast<int>(std::bit_width(lowest_discernible)) - 1;  // floor(log2)
  require(_unit_magnitude + _sub_bucket_half_count_magnitude <= 61,
          "latency_histogram: significant_digits too high for lowest_discernible");
  _sub_bucket_count = std::uint64_t{1} << (_sub_bucket_half_count_magnitude + 1);
  _sub_bucket_mask = (_sub_bucket_count - 1) << _unit_magnitude;
  // clz of a value whose top bit is the top sub-bucket bit of bucket 0; each extra leading
  // bit position above it is one bucket further.
  _leading_zero_count_base = 64 - _unit_magnitude - (_sub_bucket_half_count_magnitude + 1);

  // Each further bucket doubles the covered range. highest_trackable < 2^63, so this cannot
  // overflow before it stops.
  _bucket_count = 1;
  for (auto limit = _sub_bucket_count << _unit_magnitude; limit <= highest_trackable; limit <<= 1) {
    ++_bucket_count;
  }
  _counts.assign(static_cast<std::size_t>(_bucket_count + 1) * (_sub_bucket_count / 2), 0);
}

void latency_histogram::merge(const latency_histogram& other) {
  require(same_layout(other), "latency_histogram::merge: histogram layouts differ");
  for (std::size_t i = 0; i < _counts.size(); ++i) _counts[i] += other._counts[i];
  _total_count += other._total_count;
  _saturated += other._saturated;
  _min_recorded = std::min(_min_recorded, other._min_recorded);
  _max_recorded = std::max(_max_recorded, other._max_recorded);
}

void latency_histogram::reset() noexcept {
  std::fill(_counts.begin(), _counts.end(), 0);
  _total_count = 0;
  _saturated = 0;
  _min_recorded = std::numeric_limits<std::uint64_t>::max();
  _max_recorded = 0;
}

double latency_histogram::mean() const noexcept {
  if (_total_count == 0) return 0;
  double sum = 0;
  for_each_bucket([&](std::uint64_t low, std::uint64_t, std::uint64_t n) {
    sum += static_cast<double>(n) * static_cast<double>(low + bucket_width(low) / 2);
  });
  return sum / static_cast<double>(_total_count);
}

double latency_histogram::stddev() const noexcept {
  if (_total_count == 0) return 0;
  const double m = mean();
  double sum_sq = 0;
  for_each_bucket([&](std::uint64_t low, std::uint64_t, std::uint64_t n) {
    const double d = static_cast<double>(low + bucket_width(low) / 2) - m;
    sum_sq += static_cast<double>(n) * d * d;
  });
  return std::sqrt(sum_sq / static_cast<double>(_total_count));
}

std::uint64_t latency_histogram::value_at_percentile(double percentile) const noexcept {
  if (_total_count == 0) return 0;
  double p = percentile;
  if (!(p > 0)) p = 0;  // also maps NaN to 0
  if (p > 100) p = 100;
  // Aim one ulp low so that e.g. 99% of 100000 yields 99000, not 99001 through rounding noise.
  const double total = static_cast<double>(_total_count);
  const double wanted = std::ceil(std::nextafter(p, 0.0) / 100.0 * total);
  const std::uint64_t target = wanted >= total ? _total_count
                                               : std::max(std::uint64_t{1},
                                                          static_cast<std::uint64_t>(wanted));
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < _counts.size(); ++i) {
    cumulative += _counts[i];
    if (cumulative >= target) {
      const std::uint64_t low = value_at_index(i);
      return p == 0 ? low : highest_equivalent_value(low);
    }
  }
  return max();  // unreachable while counts sum to _total_count
}

std::uint64_t latency_histogram::value_at_index(std::size_t index) const noexcept {
  const std::uint64_t half = _sub_bucket_count >> 1;
  int bucket = static_cast<int>(index >> _sub_bucket_half_count_magnitude) - 1;
  std::uint64_t sub_bucket = (index & (half - 1)) + half;
  if (bucket < 0) {  // the lower half of bucket 0, stored first
    sub_bucket -= half;
    bucket = 0;
  }
  return sub_bucket << (bucket + _unit_magnitude);
}

}  // namespace ringrpc::detail

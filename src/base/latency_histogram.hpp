#pragma once
// Log-linear (HdrHistogram-layout) latency histogram: exact to 3 digits, mergeable, one owner
// thread. Its V2 encoding and the interval log are ringrpc-load's (tools/load/hdr_log.hpp), so
// the core library does not need zlib.
//
// Why there are two histograms: this one is for reports (ringrpc-load, bench, prometheus text
// from a finished run): exact percentiles, merge() across threads, HdrHistogram-compatible
// buckets, ~144 KiB each. metric_histogram (src/base/metric_histogram.hpp) is the server's live
// one: ~2 KiB of relaxed atomics per thread per method, read by the metrics page while its
// owner writes, ~9% buckets. Neither can do the other's job at its cost.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>
#include "base/shared_internal.hpp"

namespace ringrpc::detail {

/// Log-linear histogram of non-negative integer values (we record nanoseconds) whose bucket
/// layout is identical to HdrHistogram's for the same (lowest, highest, digits), so counts-array
/// indices mean the same thing in both and encodings interoperate.
///
/// Precision: every value >= lowest_discernible() * 10^significant_digits() lands in a bucket no
/// wider than 10^-significant_digits() of the value (so highest_equivalent_value(v) - v < 0.1% of
/// v at 3 digits); below that, buckets are 2^unit_magnitude() (<= lowest_discernible()) wide.
///
/// Thread-safety: none. Keep one histogram per thread and merge() them at the end.
/// A moved-from histogram may only be assigned to or destroyed.
class RINGRPC_SHARED_INTERNAL latency_histogram {
 public:
  static constexpr std::uint64_t default_lowest_discernible = 1'000;           // 1 µs in ns
  static constexpr std::uint64_t default_highest_trackable = 60'000'000'000;   // 60 s in ns
  static constexpr int default_significant_digits = 3;

  /// 1 µs .. 60 s in nanoseconds at 3 significant digits (~144 KiB of counts).
  latency_histogram();

  /// Allocates the whole counts array now so that recording never allocates.
  /// Throws std::invalid_argument unless lowest_discernible >= 1, highest_trackable >=
  /// 2 * lowest_discernible, highest_trackable <= INT64_MAX and 0 <= significant_digits <= 5.
  latency_histogram(std::uint64_t lowest_discernible, std::uint64_t highest_trackable,
                    int significant_digits);

  /// Counts one occurrence of `value`. Values above highest_trackable() are recorded as
  /// highest_trackable() and counted in saturated(). O(1), never allocates.
  void record(std::uint64_t value) noexcept { record_n(value, 1); }

  /// Counts `count` occurrences of `value` (e.g. coordinated-omission correction). A zero count
  /// is a no-op.
  void record_n(std::uint64_t value, std::uint64_t count) noexcept {
    if (count == 0) return;
    if (value > _highest_trackable) [[unlikely]] {
      value = _highest_trackable;
      _saturated += count;
    }
    _counts[index_of(value)] += count;
    _total_count += count;
    if (value < _min_recorded) _min_recorded = value;
    if (value > _max_recorded) _max_recorded = value;
  }

  /// Adds all of `other`'s counts (and saturation) into this histogram. Throws
  /// std::invalid_argument if the layouts differ (see same_layout()); this is then unchanged.
  void merge(const latency_histogram& other);

  /// Forgets everything recorded; keeps the layout and the allocation.
  void reset() noexcept;

  /// Number of recorded values, saturated ones included.
  std::uint64_t count() const noexcept { return _total_count; }

  /// Smallest recorded value at histogram precision: the lowest value equivalent to it
  /// (== value_at_percentile(0)). 0 when empty.
  std::uint64_t min() const noexcept {
    return _total_count == 0 ? 0 : lowest_equivalent_value(_min_recorded);
  }

  /// Largest recorded value at histogram precision: the highest value equivalent to it, as
  /// HdrHistogram reports it (== value_at_percentile(100), >= the true maximum by < 0.1% at
  /// 3 digits). 0 when empty.
  std::uint64_t max() const noexcept {
    return _total_count == 0 ? 0 : highest_equivalent_value(_max_recorded);
  }

  /// Mean and population standard deviation, computed from bucket midpoints (so exact to the
  /// histogram's precision, and equally valid for decoded histograms). 0 when empty.
  double mean() const noexcept;
  double stddev() const noexcept;

  /// Value at `percentile` (clamped to [0, 100]) with HdrHistogram semantics: the highest value
  /// equivalent to the bucket in which the cumulative count first reaches percentile% of
  /// count(); for percentile 0, the lowest value of the first non-empty bucket. 0 when empty.
  /// Linear in counts_length().
  std::uint64_t value_at_percentile(double percentile) const noexcept;

  /// How many recorded values were above highest_trackable() (and clamped to it).
  std::uint64_t saturated() const noexcept { return _saturated; }

  /// Calls f(lowest_value, highest_equivalent_value, count) for each non-empty bucket in
  /// increasing value order.
  template <class F>
  void for_each_bucket(F&& f) const {
    for (std::size_t i = 0; i < _counts.size(); ++i) {
      if (_counts[i] != 0) {
        const std::uint64_t low = value_at_index(i);
        f(low, highest_equivalent_value(low), _counts[i]);
      }
    }
  }

  // --- layout (HdrHistogram definitions) -------------------------------------------------

  std::uint64_t lowest_discernible() const noexcept { return _lowest_discernible; }
  std::uint64_t highest_trackable() const noexcept { return _highest_trackable; }
  int significant_digits() const noexcept { return _significant_digits; }
  /// floor(log2(lowest_discernible)): width exponent of the finest buckets.
  int unit_magnitude() const noexcept { return _unit_magnitude; }
  /// 2^ceil(log2(2 * 10^digits)): linear sub-buckets per power-of-two bucket.
  std::uint64_t sub_bucket_count() const noexcept { return _sub_bucket_count; }
  /// Power-of-two buckets needed to cover highest_trackable.
  int bucket_count() const noexcept { return _bucket_count; }
  /// (bucket_count + 1) * sub_bucket_count / 2: length of the flat counts array.
  std::size_t counts_length() const noexcept { return _counts.size(); }
  /// True when both were built from the same (lowest, highest, digits), i.e. indices agree.
  bool same_layout(const latency_histogram& other) const noexcept {
    return _lowest_discernible == other._lowest_discernible &&
           _highest_trackable == other._highest_trackable &&
           _significant_digits == other._significant_digits;
  }

  // --- value <-> bucket mapping ----------------------------------------------------------

  /// Counts-array index of `value`; only meaningful for value <= highest_trackable() (larger
  /// values may map past the array).
  std::size_t index_of(std::uint64_t value) const noexcept {
    const int bucket = _leading_zero_count_base - std::countl_zero(value | _sub_bucket_mask);
    const auto sub_bucket = static_cast<std::size_t>(value >> (bucket + _unit_magnitude));
    // Bucket 0 uses its whole sub-bucket range; later buckets only their upper half (the lower
    // half would duplicate the previous bucket at double resolution), hence the half offsets.
    return (static_cast<std::size_t>(bucket + 1) << _sub_bucket_half_count_magnitude) +
           sub_bucket - (_sub_bucket_count >> 1);
  }
  /// Lowest value that maps to counts-array index `index` (< counts_length()).
  std::uint64_t value_at_index(std::size_t index) const noexcept;
  /// Count stored at `index` (< counts_length()).
  std::uint64_t count_at_index(std::size_t index) const noexcept { return _counts[index]; }
  /// Adds `count` to the bucket at `index` (< counts_length()), keeping count/min/max right:
  /// how a decoder rebuilds a histogram from its counts array.
  void add_at_index(std::size_t index, std::uint64_t count) noexcept {
    if (count == 0) return;
    _counts[index] += count;
    _total_count += count;
    const std::uint64_t low = value_at_index(index);
    if (low < _min_recorded) _min_recorded = low;
    if (low > _max_recorded) _max_recorded = low;
  }
  /// Smallest / largest values sharing `value`'s bucket.
  std::uint64_t lowest_equivalent_value(std::uint64_t value) const noexcept {
    return value & ~(bucket_width(value) - 1);
  }
  std::uint64_t highest_equivalent_value(std::uint64_t value) const noexcept {
    return lowest_equivalent_value(value) + (bucket_width(value) - 1);
  }

 private:
  // Width of `value`'s bucket: a power of two, 2^unit_magnitude in buckets 0 and 1.
  std::uint64_t bucket_width(std::uint64_t value) const noexcept {
    const int bucket = _leading_zero_count_base - std::countl_zero(value | _sub_bucket_mask);
    return std::uint64_t{1} << (bucket + _unit_magnitude);
  }

  std::uint64_t _lowest_discernible;
  std::uint64_t _highest_trackable;
  int _significant_digits;
  int _unit_magnitude;
  int _sub_bucket_half_count_magnitude;
  int _leading_zero_count_base;
  int _bucket_count;
  std::uint64_t _sub_bucket_count;
  std::uint64_t _sub_bucket_mask;

  std::vector<std::uint64_t> _counts;
  std::uint64_t _total_count = 0;
  std::uint64_t _saturated = 0;
  // Raw extremes (after clamping); reported through the equivalent-value functions.
  std::uint64_t _min_recorded = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t _max_recorded = 0;
};

}  // namespace ringrpc::detail

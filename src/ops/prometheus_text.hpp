#pragma once
// Metrics snapshots and their two renderings: the Prometheus text exposition format 0.0.4
// (/metrics) and JSON (/metrics.json). A snapshot is a plain value filled by whoever merges the
// per-thread counters; nothing here is on the per-call path.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringrpc::detail {

class latency_histogram;

enum class metric_type { counter, gauge, histogram };

struct metric_label {
  std::string name;
  std::string value;
};

/// One histogram: counts per bucket (not cumulative; the writers accumulate them), the sum and
/// count, and optionally exact quantiles, which only the JSON rendering shows (Prometheus
/// derives quantiles from the buckets).
struct histogram_value {
  std::vector<double> upper_bounds;          ///< ascending, finite; +Inf is implied
  std::vector<std::uint64_t> bucket_counts;  ///< upper_bounds.size() + 1 entries; last: above all bounds
  double sum = 0;
  std::uint64_t count = 0;  ///< the sum of bucket_counts
  std::vector<std::pair<double, double>> quantiles;  ///< (quantile in [0, 1], value)
};

struct metric_sample {
  std::vector<metric_label> labels;
  double value = 0;           ///< counters and gauges
  histogram_value histogram;  ///< histograms
};

/// A family: one name, HELP and TYPE, any number of samples told apart by their labels.
struct metric_family {
  std::string name;  ///< counters must end in "_total"; units in the name, in base units (_seconds, _bytes)
  std::string help;
  metric_type type = metric_type::gauge;
  std::vector<metric_sample> samples;

  /// Adds a counter or gauge sample.
  metric_family& add(double value, std::vector<metric_label> labels = {});
  /// Adds a histogram sample.
  metric_family& add(histogram_value value, std::vector<metric_label> labels = {});
};

/// Families in the order they were first named. Asking for a family by a name already used
/// returns that family, so samples of one name always stay grouped under one HELP/TYPE.
class metrics_snapshot {
 public:
  /// Throws std::invalid_argument for a name Prometheus does not accept, a counter not ending
  /// in "_total", or a name already used with another type.
  metric_family& family(std::string_view name, std::string_view help, metric_type type);
  metric_family& counter(std::string_view name, std::string_view help) {
    return family(name, help, metric_type::counter);
  }
  metric_family& gauge(std::string_view name, std::string_view help) {
    return family(name, help, metric_type::gauge);
  }
  metric_family& histogram(std::string_view name, std::string_view help) {
    return family(name, help, metric_type::histogram);
  }

  const std::vector<metric_family>& families() const noexcept { return _families; }

 private:
  std::vector<metric_family> _families;
};

/// The Content-Type of to_prometheus_text's output.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Renders `s` in the text exposition format 0.0.4: per family `# HELP` and `# TYPE` once, then
/// its samples; histograms as cumulative `_bucket{le=...}` lines ending with `le="+Inf"`, then
/// `_sum` and `_count`. Label values are escaped (\\, \", \n). Throws std::invalid_argument for
/// a bad label name (or `le` on a histogram) or a histogram whose buckets do not add up.
std::string to_prometheus_text(const metrics_snapshot& s);

/// The same snapshot as one JSON object keyed by family name:
///   {"NAME": {"type": "counter", "help": "...", "samples": [{"labels": {...}, "value": 3}]}}
/// Histogram samples carry "count", "sum", cumulative "buckets" [{"le": 1e-05, "count": 2}, ...,
/// {"le": "+Inf", ...}] and "quantiles" {"0.5": ..., "0.99": ...}.
std::string to_json(const metrics_snapshot& s);

/// 10 µs .. 10 s in seconds, 1-2.5-5 steps (19 bounds): RPC latencies from loopback to timeout.
std::span<const double> default_latency_bounds_seconds() noexcept;

/// p50, p90, p99 and p99.9: the quantiles histogram_from attaches by default.
std::span<const double> default_quantiles() noexcept;

/// One bucket of some finer histogram: the lowest value it holds, and how many values it has.
struct source_bucket {
  std::uint64_t lowest = 0;
  std::uint64_t count = 0;
};

/// Folds a finer bucketed histogram (buckets in increasing order; empty ones may be left out)
/// into fixed buckets for exposition, the same way as histogram_from below. `sum` is the sum of
/// the recorded values in their own unit. Each quantile is the lowest value of the bucket that
/// holds it. E.g. from a metric_histogram::snapshot s:
///
///     std::vector<source_bucket> b;
///     for (std::size_t i = 0; i < metric_histogram::buckets; ++i)
///       if (s.counts[i] != 0) b.push_back({metric_histogram::lower_of(i), s.counts[i]});
///     family.add(histogram_from_buckets(b, static_cast<double>(s.sum)), {{"method", name}});
histogram_value histogram_from_buckets(std::span<const source_bucket> buckets, double sum,
                                       std::span<const double> upper_bounds = default_latency_bounds_seconds(),
                                       double seconds_per_unit = 1e-9,
                                       std::span<const double> quantiles = default_quantiles());

/// Folds an HdrHistogram-layout histogram into fixed buckets for exposition. Values are scaled
/// by `seconds_per_unit` (1e-9: the histogram holds nanoseconds). A recorded value counts in the
/// first bucket whose bound is >= the lowest value of its HDR bucket, so no value at or below a
/// bound is ever missed; values above it by less than the HDR resolution (0.1% at 3 digits, at
/// least the lowest discernible value) may count too. The sum is count x mean (bucket
/// midpoints); quantiles come from the full-resolution histogram.
histogram_value histogram_from(const latency_histogram& h,
                               std::span<const double> upper_bounds = default_latency_bounds_seconds(),
                               double seconds_per_unit = 1e-9,
                               std::span<const double> quantiles = default_quantiles());

}  // namespace ringrpc::detail

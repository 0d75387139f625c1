#pragma once
// HdrHistogram interchange for latency_histogram: the V2 compressed encoding (zlib) and the
// interval log format (v1.3). ringrpc-load's --hdr-log and `merge`; kept out of src/base so the
// core library does not link zlib.

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/latency_histogram.hpp"

namespace ringrpc::detail {

/// Encodes `h` in HdrHistogram's V2 compressed form (zlib-deflated ZigZag-LEB128 counts), then
/// base64: the exact text the HdrHistogram tools expect in an interval log line. Only the bucket
/// counts and the layout travel; saturated() does not. Throws std::overflow_error if a bucket
/// count exceeds INT64_MAX (unrepresentable in the format), std::runtime_error if zlib fails.
std::string encode_compressed_base64(const latency_histogram& h);

/// Inverse of encode_compressed_base64; also accepts encodings produced by other HdrHistogram
/// implementations (Java, C, Rust...) of V2 histograms. The result has the layout stored in the
/// encoding, and saturated() == 0. Throws std::invalid_argument on malformed or unsupported input.
/// Untrusted input can still make it allocate the largest legal layout (~50 MB at 5 digits).
latency_histogram decode_compressed_base64(std::string_view text);

// --- interval log (HdrHistogram "Histogram log format version 1.3") ------------------------

/// Writes an HdrHistogram interval log: comment/header lines, then one line per interval
/// `[Tag=<tag>,]<start_s>,<interval_s>,<max>,<base64 histogram>`, numbers with 3 decimals.
/// `<max>` is histogram.max() / max_value_unit_ratio (HdrHistogram's default 1e6: ns -> ms).
/// Not thread-safe; `out` must outlive the writer. Stream errors are left in `out`'s state.
class interval_log_writer {
 public:
  explicit interval_log_writer(std::ostream& out, double max_value_unit_ratio = 1e6);

  /// Convenience: format version, StartTime and BaseTime (both `start_epoch_s`), then legend.
  /// Interval start times are then relative to `start_epoch_s`.
  void write_header(double start_epoch_s);
  /// "#[Histogram log format version 1.3]"
  void write_format_version();
  /// "#[StartTime: <s> (seconds since epoch), <UTC ISO-8601>]"
  void write_start_time(double epoch_s);
  /// "#[BaseTime: <s> (seconds since epoch)]": interval start times are relative to this.
  void write_base_time(double epoch_s);
  /// "#<text>". Throws std::invalid_argument if `text` contains a line break.
  void write_comment(std::string_view text);
  /// The CSV legend line naming the four interval columns.
  void write_legend();
  /// One interval line. An empty `tag` writes an untagged line. Throws std::invalid_argument if
  /// the tag contains ',' or whitespace (it would corrupt the line), and whatever
  /// encode_compressed_base64 throws.
  void write_interval(double start_s, double interval_s, const latency_histogram& histogram,
                      std::string_view tag = {});

 private:
  std::ostream* _out;
  double _max_value_unit_ratio;
};

/// One interval read back from a log. Times are as written (relative to the BaseTime, if any).
struct log_interval {
  std::string tag;  // empty when the line had no Tag=
  double start_s = 0;
  double interval_s = 0;
  double max_value = 0;  // the scaled max column, as written
  latency_histogram histogram;
};

/// Thrown by interval_log_reader on a malformed line; what() starts with "interval log line N:".
class interval_log_error : public std::runtime_error {
 public:
  interval_log_error(std::size_t line, const std::string& message);
  /// 1-based line number of the offending line.
  std::size_t line() const noexcept { return _line; }

 private:
  std::size_t _line;
};

/// Parses an HdrHistogram interval log (any 1.x version with V2 histograms). Comment lines,
/// blank lines and the legend are skipped; StartTime/BaseTime headers are remembered.
/// Not thread-safe; `in` must outlive the reader.
class interval_log_reader {
 public:
  explicit interval_log_reader(std::istream& in);

  /// Next interval, or nullopt at end of input. Throws interval_log_error on a malformed line.
  std::optional<log_interval> next();
  /// All remaining intervals.
  std::vector<log_interval> read_all();

  /// Values of the StartTime / BaseTime headers seen so far, in seconds since the epoch.
  std::optional<double> start_time_s() const noexcept { return _start_time_s; }
  std::optional<double> base_time_s() const noexcept { return _base_time_s; }

 private:
  std::istream* _in;
  std::size_t _line_no = 0;
  std::optional<double> _start_time_s;
  std::optional<double> _base_time_s;
};

}  // namespace ringrpc::detail

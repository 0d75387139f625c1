#pragma once
// Helpers shared by report.cpp, report_json.cpp, report_svg.cpp and report_html.cpp; not part of the interface.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report.hpp"

namespace ringrpc::load::report_detail {

inline double ns_to_us(double ns) noexcept { return ns / 1000.0; }
inline double ns_to_us(std::uint64_t ns) noexcept { return static_cast<double>(ns) / 1000.0; }

/// (percentile, latency_us) points for the percentile plot, HdrHistogram percentile-ticks style
/// (5 ticks per halving of the remaining distance to 100%), followed by 100%. The ticks stop
/// where the histogram holds too few values to resolve them. Empty for an empty histogram.
std::vector<std::pair<double, double>> latency_spectrum(const detail::latency_histogram& h);

/// Decimals for a latency column, chosen once per table so the column lines up: enough to show
/// the histogram's 3 significant digits at the smallest value, no noise digits beyond.
inline int us_decimals(double smallest_us) noexcept {
  if (smallest_us < 10) return 2;
  if (smallest_us < 1000) return 1;
  return 0;
}

/// Calls/s that completed successfully in the measured window: what "achieved" means for a
/// requested open-loop rate.
inline double achieved_rate(const run_result& r) noexcept { return r.calls_per_sec(); }

/// `text` safe inside XML or HTML, in element content and in quoted attributes alike: & < > " '
/// as entities (HTML5 knows &apos; too), control characters XML 1.0 forbids as '?'. Every text
/// that came from the target or the command line goes through it (a hostile target must not
/// inject markup or script into a plot or a report).
std::string xml_escape(std::string_view text);

/// printf into a std::string.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ringrpc::load::report_detail

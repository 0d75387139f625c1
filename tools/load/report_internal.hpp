#pragma once
// Helpers shared by report.cpp, report_json.cpp and report_svg.cpp; not part of the interface.

#include <cstdint>
#include <string>
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

/// Calls/s that completed successfully in the measured window: what "achieved" means for a
/// requested open-loop rate.
inline double achieved_rate(const run_result& r) noexcept { return r.calls_per_sec(); }

/// printf into a std::string.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ringrpc::load::report_detail

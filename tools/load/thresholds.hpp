#pragma once
// --fail-if: limits on a run's results that set the exit status, as k6's thresholds do.
//   p99>2ms  mean>500us  max>1s  errors>0.1%  errors>0  rate<90%  rate<50k  'p99>2ms,errors>0'

#include <string>
#include <string_view>
#include <vector>

#include "report.hpp"

namespace ringrpc::load {

struct threshold {
  enum class metric { percentile, mean, max, errors, rate };
  enum class comparison { greater, greater_equal, less, less_equal };
  std::string expression;
  metric what = metric::percentile;
  double percentile = 99;  ///< metric::percentile only
  comparison op = comparison::greater;
  double limit = 0;        ///< latency: us; errors: % or a count; rate: % of -R or calls/s
  bool relative = false;   ///< the limit was given in %
};

/// Parses "METRIC OP VALUE"; throws std::invalid_argument naming the text and what is wrong.
threshold parse_threshold(std::string_view text);

/// "p99>2ms,errors>0": one threshold per comma-separated condition (k6 lists them the same
/// way); throws as parse_threshold does, and for an empty condition.
std::vector<threshold> parse_thresholds(std::string_view text);

/// Throws std::invalid_argument when `t` cannot apply to the run: a rate in % of the
/// requested rate in a closed loop, which requests none.
void check_threshold_applies(const threshold& t, bool open_loop);

/// Whether `t` holds for `r` (failed: it does), with the measured value as shown. A latency
/// threshold fails when there was no successful call to measure.
threshold_verdict evaluate_threshold(const threshold& t, const run_result& r);

}  // namespace ringrpc::load

#pragma once
// --live and --metrics-port: the run's figures second by second while it runs. The workers hand
// each ended second of the measured window over once (engine_config::publish_seconds: a copy of
// the second's bucket, never work per call); this merges the workers' shares of a second once
// all have handed it over, then writes it as one JSON line and keeps it as the page that
// --metrics-port serves in Prometheus text.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine.hpp"
#include "report.hpp"
#include "schedule.hpp"

namespace ringrpc::detail {
class admin_server;
}

namespace ringrpc::load {

/// One second of the run, over all workers.
struct live_figures {
  std::int64_t index = 0;  ///< 0: the first second of the measured window
  double width_s = 1;
  std::uint64_t calls_ok = 0;
  std::map<std::string, std::uint64_t> errors;  ///< by kind
  std::uint64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  unsigned connections_open = 0;
  double requested_rate = -1;  ///< open loop: the schedule's calls/s mid-second; closed: -1
};

/// The JSON line of one second (no newline): {"t_s", "calls_ok", "calls_per_s",
/// ["requested_per_s",] "errors", "error_kinds", "latency_us": {p50,p90,p99,max}, "connections"}.
std::string live_json_line(const live_figures& f);

/// The Prometheus text page of the run so far: totals and the last whole second.
std::string live_prometheus_text(const live_figures& last, std::uint64_t calls_total,
                                 const std::map<std::string, std::uint64_t>& errors_total, double elapsed_s);

/// The schedule's rate (calls/s) at `t_s` seconds into the measured window (past its end: the
/// last rate); -1 for no schedule (a closed loop).
double scheduled_rate_at(const std::vector<rate_step>& steps, double t_s) noexcept;

class live_output {
 public:
  /// `out`: where lines go (null: none, only the page); `steps`: the open loop's schedule.
  live_output(std::FILE* out, std::vector<rate_step> steps);
  ~live_output();
  live_output(const live_output&) = delete;
  live_output& operator=(const live_output&) = delete;

  /// --metrics-port: serves GET /metrics at host:port (port 0 picks one) until destroyed.
  /// Throws std::system_error when the address cannot be bound.
  void serve_metrics(const std::string& host, std::uint16_t port);
  /// The bound metrics port (after serve_metrics).
  std::uint16_t metrics_port() const noexcept;

  /// Once a second, from the engine's tick: writes the seconds every worker has handed over.
  void collect(const std::vector<live_counters*>& live);
  /// When the workers have finished (engine_config::on_finished): takes what is left.
  void collect_rest(const std::vector<live_counters*>& live);
  /// After the run: writes the seconds collect_rest took, with the widths `r` gives the last.
  void finish(const run_result& r);

 private:
  void take(const std::vector<live_counters*>& live, bool all);
  live_figures merge(std::vector<live_second>& shares) const;
  void emit(const live_figures& f);

  std::FILE* _out;
  std::vector<rate_step> _steps;
  std::int64_t _next = 0;  // the next second to merge
  std::vector<live_figures> _rest;  // merged by collect_rest, written by finish
  std::mutex _page_mutex;  // the page is read on the metrics thread
  live_figures _last;
  double _seconds_shown = 0;  // the end of _last; 0 before the first second
  std::uint64_t _calls_total = 0;
  std::map<std::string, std::uint64_t> _errors_total;
  std::unique_ptr<detail::admin_server> _server;
};

}  // namespace ringrpc::load

#pragma once
// What the target spent serving the run: its CPU time, read before, during and after the
// measured window from /proc/PID/stat (--server-pid) or from a Prometheus text endpoint's
// process_cpu_seconds_total (--server-metrics), turned into CPU per call and cores used.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringrpc::load {

/// The target's CPU over the measured window, as the report shows it.
struct server_cost {
  std::string source;          ///< "pid 1234" or the metrics URL
  double cpu_s = 0;            ///< CPU seconds (user + system) between the two samples
  double window_s = 0;         ///< wall seconds between the two samples
  double cores = 0;            ///< cpu_s / window_s
  double cpu_us_per_call = 0;  ///< cores over the answered calls/s of the window, in µs
  /// Cores used in each interval between samples inside the window (about a second each).
  std::vector<double> per_second_cores;
  /// Set when no figure could be made (a sample failed, the window had no answered call).
  std::string note;
};

/// Reads the target's cumulative CPU seconds. Throws std::runtime_error when it cannot.
using cpu_reader = std::function<double()>;

/// /proc/PID/stat's utime + stime. Throws std::invalid_argument when PID cannot be read now.
cpu_reader pid_cpu_reader(long pid);

/// process_cpu_seconds_total from a Prometheus text page fetched with libcurl (2 s timeout).
/// Throws std::invalid_argument when the URL cannot be fetched now or lacks the metric, or in
/// a build without libcurl.
cpu_reader metrics_cpu_reader(const std::string& url);

/// The value of process_cpu_seconds_total in a Prometheus text page (the sum of its series when
/// it has labels); throws std::runtime_error naming what is wrong when it has none.
double parse_process_cpu_seconds(std::string_view page);

/// utime + stime of a /proc/PID/stat line, in clock ticks; throws std::runtime_error when the
/// line is not one.
std::uint64_t parse_proc_stat_ticks(std::string_view stat);

/// Samples the target's CPU around a run: start() just before it, sample(t) from the
/// once-a-second tick (t: seconds since the run's clock started, which is after start() by the
/// time it took to connect), finish() after it. Not thread-safe: call from the thread running
/// the run. A failing sample is remembered, not thrown.
class server_cost_meter {
 public:
  /// Answered calls that cost any server two clock ticks (20 ms) of CPU or more: the least any
  /// server measured here spends per call is the raw io_uring loop's ~0.2 µs at depth 16
  /// (ringrpc-server's frames 0.7 µs, gRPC servers several µs).
  static constexpr std::uint64_t serving_takes_cpu_calls = 100'000;
  server_cost_meter(std::string source, cpu_reader reader);
  void start();
  void sample(double run_t_s);
  void finish();
  /// The figures for the window [warmup_s, warmup_s + measured_s] of the run, whose answered
  /// calls (ok and errors) numbered `calls`.
  server_cost result(double warmup_s, double measured_s, std::uint64_t calls) const;

  struct point {
    double t_s;
    double cpu_s;
  };
  /// The figures from samples in the run's clock: the window runs from the last sample at (or
  /// just after) its start to the first at (or just before) its end. A target whose CPU time
  /// did not move while at least serving_takes_cpu_calls calls were answered gets a note, not
  /// a figure (a wrapper's PID, most often). Public for tests.
  static server_cost compute(std::string source, const std::vector<point>& samples, double warmup_s,
                             double measured_s, std::uint64_t calls);

 private:
  void take(double t_s);

  std::string _source;
  cpu_reader _reader;
  std::int64_t _started_ns = 0;
  double _run_offset_s = 0;  // the run's clock started this long after start()
  std::vector<point> _samples;  // in the time since start()
  std::string _failure;
};

/// The summary's rows for `c`.
std::string format_server_cost(const server_cost& c);
/// The JSON object for `c` ("server_cost" in write_json's document).
nlohmann::json server_cost_json(const server_cost& c);

}  // namespace ringrpc::load

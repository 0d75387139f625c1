#pragma once
// The results of a load run and every way they are shown: fixed-width summary, JSON, SVG plot,
// HTML report.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/latency_histogram.hpp"
#include "server_cost.hpp"

namespace ringrpc::load {

/// One second of the measured window.
struct second_sample {
  double t_s = 0;                 ///< end of the bucket, in seconds since the measured window began
  std::uint64_t calls_ok = 0;
  std::uint64_t errors = 0;
  std::uint64_t p99_ns = 0;       ///< p99 of the calls completed in that second
  /// Seconds the bucket covers: 1, except a last one cut short (an interrupted run, a duration
  /// that is not whole seconds); its calls/s is calls_ok / width_s.
  double width_s = 1;
};

/// One step of an open-loop run (a single -R run has one). Its calls are the ones its
/// schedule made due in it, whenever they were sent or answered.
struct step_result {
  double requested_rate = 0;  ///< a --rate-ramp segment's: its average
  double achieved_rate = 0;  ///< answered ok / duration_s (the same as answered_rate)
  std::uint64_t p99_ns = 0;
  double start_s = 0;     ///< from the start of the measured window
  double duration_s = 0;  ///< as scheduled, or until an interruption
  std::uint64_t scheduled = 0;  ///< calls due in the step (until an interruption)
  std::uint64_t issued = 0;     ///< of them, sent
  /// Sent more than late_send_ns after being due: while the connection had room (the client
  /// did not get to it in time), or held because the connection had -P calls in flight.
  std::uint64_t late_client = 0;
  std::uint64_t late_held = 0;
  std::uint64_t answered = 0;   ///< answered ok
  bool kept_up = false;
  std::string reason;  ///< when not kept up: "client_behind_schedule" or "target_too_slow"
  /// A --rate-ramp segment: the requested rate at its start and at its end (or interruption);
  /// negative for a constant step. (Last: tests build step_results field by field in order.)
  double ramp_from = -1, ramp_to = -1;

  double issued_rate() const noexcept { return duration_s > 0 ? static_cast<double>(issued) / duration_s : 0; }
};

/// A send later than this after its due time is late (the kept-up rule).
inline constexpr std::int64_t late_send_ns = 1'000'000;

/// Sets kept_up and reason: kept up when at least 99 % of the scheduled calls were sent on
/// time (at most 1 % more than late_send_ns late, or never sent) and the answered rate is
/// within 5 % of the rate the step scheduled (scheduled / duration_s: the requested rate for
/// even arrivals, the calls actually drawn for Poisson ones). Otherwise the reason is the client when its own late
/// sends outnumber those held by full connections, else the target.
void judge_keep_up(step_result& s) noexcept;

/// Histogram layout used everywhere: 1 ns .. 60 s, 3 significant digits.
inline detail::latency_histogram make_latency_histogram() {
  return detail::latency_histogram(1, 60'000'000'000ull, 3);
}

/// One request kind of a --mix run: its own counts and latency.
struct kind_result {
  std::string name;
  std::uint64_t calls_ok = 0;
  std::map<std::string, std::uint64_t> errors;
  detail::latency_histogram latency_ns = make_latency_histogram();
  std::uint64_t error_total() const noexcept;
};

/// The outcome of one --fail-if threshold (thresholds.hpp evaluates them).
struct threshold_verdict {
  std::string expression;  ///< as given: "p99>2ms"
  std::string observed;    ///< the measured value as shown: "1.84 ms", "0.02 %"
  double observed_value = 0;  ///< in `unit`
  double limit_value = 0;     ///< in `unit`
  std::string unit;           ///< "us", "%", "calls/s", "calls"
  bool failed = false;
  std::string note;  ///< why it failed without a value, e.g. "no successful calls"
};

struct run_result {
  /// Configuration as shown: flag name -> value (numbers stay numbers in the JSON).
  std::map<std::string, nlohmann::json> config;
  /// The run was ended early by SIGINT; the results cover the time until then.
  bool interrupted = false;
  /// Set when the run was stopped because the server does not speak the URL's protocol: one
  /// line saying what it looks like instead. The other results are then meaningless.
  std::string diagnosis;
  /// Set when the run was stopped because every answer of its first second (or its first
  /// 1,000) was an error that cannot improve (engine_fail_fast.hpp): the message with a hint.
  /// The other results are then meaningless.
  std::string fail_fast;
  /// Per request kind, in --mix order; empty when the run had a single kind.
  std::vector<kind_result> kinds;
  /// Per endpoint of a registry target (etcd://), in the order its members were listed; the
  /// name is the member's HOST:PORT. Their counts add up to the totals. Empty otherwise.
  std::vector<kind_result> members;
  std::vector<threshold_verdict> verdicts;
  double warmup_s = 0;
  double measured_s = 0;
  bool open_loop = false;
  double requested_rate = 0;      ///< calls/s asked for (open loop; 0 for closed loop)
  /// Open loop: every step kept up (step_result::kept_up), and the run's sent and answered
  /// calls per scheduled second over all steps.
  bool kept_up = false;
  double issued_rate = 0;
  double answered_rate = 0;
  /// Bytes written to and read from the sockets in the measured window (TLS: the records).
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t calls_ok = 0;
  /// Errors by kind: "timeout", "connect", "protocol", "closed", or the server's error kind
  /// ("server_busy", "http_503", "resp_err", ...). Never counted in calls_ok.
  std::map<std::string, std::uint64_t> errors;
  /// Latency of successful calls. Open loop: from each call's scheduled send time
  /// (coordinated-omission corrected); closed loop: from the actual send time.
  detail::latency_histogram latency_ns = make_latency_histogram();
  /// Open loop only: from the actual send time (what an uncorrected tool reports).
  detail::latency_histogram service_ns = make_latency_histogram();
  std::vector<second_sample> per_second;
  /// Latency of each second of the measured window (layout 1 µs .. 60 s, 3 digits), for
  /// --hdr-log; merged across threads.
  std::vector<detail::latency_histogram> interval_latency_ns;
  std::vector<step_result> steps;
  /// TLS targets: the duration of each completed handshake (ClientHello to established), on
  /// every connection including reconnections; its count is the handshakes made.
  detail::latency_histogram handshake_ns = make_latency_histogram();
  /// TLS handshakes that failed, by kind: "tls_verify" (certificate refused), "tls_handshake".
  std::map<std::string, std::uint64_t> handshake_failures;
  bool tls = false;  ///< the target spoke TLS: the summary shows the handshakes
  /// --new-conn-per-call: connections opened and handshakes completed in the measured window
  /// (their rates are per measured second).
  bool new_connection_per_call = false;
  std::uint64_t connections_measured = 0;
  std::uint64_t handshakes_measured = 0;
  /// --stream: streams opened (over the whole run, warm-up included), those of them that did
  /// not end with Ok after the half-close, and why, by kind: the end's status ("bad_request"),
  /// "protocol" (the server broke the stream's rules), "connection_lost", "no_end" (none came
  /// within the drain time), "stream_ended" (ended Ok before the half-close); and the messages
  /// that waited for the server's credit.
  bool streams = false;
  std::uint64_t streams_opened = 0;
  std::uint64_t streams_failed = 0;
  std::map<std::string, std::uint64_t> stream_failures;
  std::uint64_t stream_credit_waits = 0;
  /// --server-pid / --server-metrics: the target's CPU over the measured window.
  std::optional<server_cost> server;
  /// Where replies' receive times came from: "kernel" (every receive carried the kernel's
  /// stamp), "user" (none did: the loop's clock after each wait), "mixed".
  std::string latency_clock = "user";

  double calls_per_sec() const noexcept { return measured_s > 0 ? static_cast<double>(calls_ok) / measured_s : 0; }
  std::uint64_t error_total() const noexcept;
};

/// Default percentiles of the summary and JSON.
std::vector<double> default_percentiles();  // 50, 90, 99, 99.9, 99.99

/// "p99", "p99.9", "p50" ...: the key of a percentile in JSON.
std::string percentile_key(double p);

/// Fixed-width text summary (what a terminal shows at the end of a run).
std::string format_summary(const run_result& r, const std::vector<double>& percentiles);

/// JSON document: top-level keys "config", "calls_ok", "calls_per_sec", "errors" (object by
/// kind), "latency_us" (object: "p50", "p99.9", ... plus "min", "max", "mean", "stddev"),
/// "service_latency_us" (open loop), "requested_rate", "achieved_rate", "spectrum" (array of
/// {percentile, latency_us} for the plot), "per_second" (array), "steps" (array),
/// "warmup_s", "measured_s". Documented in docs/load.md.
void write_json(const run_result& r, const std::vector<double>& percentiles, std::ostream& out);

/// What `ringrpc-load plot` needs back from a JSON file: its label, spectrum and per-second series.
struct plot_series {
  std::string label;
  std::string title;  ///< the run's configuration in one line: target, c/depth/rate, duration
  std::vector<std::pair<double, double>> spectrum;  ///< (percentile, latency_us); open loop: corrected
  std::vector<std::pair<double, double>> service_spectrum;  ///< open loop: from the actual send
  std::vector<std::pair<double, double>> rate;      ///< (t_s, calls/s), t_s the end of its bucket
  /// Whether the last rate point is a bucket cut short (drawn apart, as partial).
  bool last_rate_partial = false;
  double requested_rate = 0;  ///< open loop: calls/s asked for; 0 in a closed loop
  /// Open loop: the requested rate as scheduled, one (start_s, end_s, calls/s at the start,
  /// calls/s at the end) per step: the two rates differ for a --rate-ramp segment.
  std::vector<std::tuple<double, double, double, double>> requested_steps;
};
plot_series plot_series_from(const run_result& r, const std::string& label);
/// "TARGET · 64 conn x depth 16 · open loop 20k calls/s · 12 s" from a run's config and its
/// measured duration (0: the config's duration_s).
std::string run_title(const std::map<std::string, nlohmann::json>& config, double measured_s = 0);
/// Reads a file written by write_json(); throws std::runtime_error naming the file and problem.
plot_series read_plot_series(const std::string& json_path);

/// Self-contained SVG: latency (log axis) by percentile on a "nines" axis (HdrHistogram
/// plotter style: 0, 90, 99, 99.9, ...) and calls/s over time, one colour per series, open-loop
/// runs with their service-time curve and requested rate, a title, legends inside the frames.
/// Texts carry class attributes (title, tick, legend, ...) and series their data-label, so that
/// tests can check the layout.
std::string render_svg(const std::vector<plot_series>& series);

/// One curve of render_time_svg: (t_s, value) points, t_s the end of its bucket.
struct time_series {
  std::string label;
  std::vector<std::pair<double, double>> points;
};
/// A self-contained SVG of one panel of values over time (the HTML report's errors/s), drawn
/// as render_svg draws calls/s: linear axes from 0, a legend inside the frame, texts escaped.
std::string render_time_svg(const std::string& title, const std::string& y_title,
                            const std::vector<time_series>& series);

/// One self-contained HTML page of a run for a browser with no network: its summary (target,
/// loop, duration, calls, errors, rates, latency percentiles, the server's CPU per call or "not
/// measured"), render_svg's plot and errors/s over time, inline CSS and SVG, no script (a
/// Content-Security-Policy forbids any). Every text not our own is escaped.
std::string render_html(const run_result& r, const std::vector<double>& percentiles);

}  // namespace ringrpc::load

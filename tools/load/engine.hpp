#pragma once
// ringrpc-load's io_uring engine: T threads, each with its own ring and its own connections.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/latency_histogram.hpp"
#include "call_window.hpp"
#include "ringrpc/record_layer.hpp"
#include "protocol.hpp"
#include "wake_batch.hpp"
#include "report.hpp"
#include "reply_framer.hpp"
#include "schedule.hpp"

namespace ringrpc::load {

struct live_counters;

struct engine_config {
  target where;
  /// Where connection i goes: endpoints[i % size] (resolve_endpoints); empty: `where`.
  std::vector<target> endpoints;
  /// Count calls, errors and latency per endpoint too (run_result::members): a registry
  /// target (etcd://), whose members the report shows apart.
  bool per_endpoint = false;
  std::vector<request_kind> kinds;  ///< weighted mix; at least one
  unsigned threads = 1;
  unsigned connections = 64;  ///< in total, spread over the threads
  unsigned depth = 1;         ///< calls in flight per connection at most
  /// Closed loop: replies the kernel may gather before it wakes a thread (see wake_batch.hpp);
  /// 1 wakes it for every reply.
  unsigned reply_batch = 4;
  /// The time whose worth of replies a batch gathers at most (tests widen it to force batches).
  std::chrono::nanoseconds reply_batch_window{wake_batch::default_window_ns};
  /// Open loop when non-empty: calls are due on this schedule (total rate over all
  /// connections); closed loop otherwise.
  std::vector<rate_step> steps;
  /// Open loop: each connection's calls arrive as a Poisson process of the schedule's rate
  /// (seeded by `seed` and the connection's index) instead of evenly spaced.
  bool poisson_arrivals = false;
  std::uint64_t seed = 0;
  /// Closed loop, --conn-ramp: connections [0, conn_ramp_from) open at the start, the others
  /// one by one, evenly over `conn_ramp_time` after the warm-up (0: all at the start).
  unsigned conn_ramp_from = 0;
  /// --conn-ramp down (FROM > TO): connections [conn_ramp_to, connections) take no new call
  /// from their turn on, the last-numbered first, evenly over `conn_ramp_time` after the
  /// warm-up, and close once their calls are answered. 0: no ramp down.
  unsigned conn_ramp_to = 0;
  std::chrono::nanoseconds conn_ramp_time{0};
  std::chrono::nanoseconds duration{std::chrono::seconds(10)};  ///< closed loop: measured time
  std::uint64_t max_calls = 0;  ///< stop after this many calls in total (0: no limit)
  std::chrono::nanoseconds warmup{std::chrono::seconds(1)};
  std::chrono::nanoseconds connect_timeout{std::chrono::seconds(3)};
  std::chrono::nanoseconds call_timeout{0};  ///< 0: none
  /// Set from elsewhere (a SIGINT handler) to end the run early: no new calls, the calls in
  /// flight drain, and the results cover the time until the flag was seen.
  const std::atomic<bool>* stop_requested = nullptr;
  /// The first reply of the run that does not parse as the protocol (or a hang-up before any
  /// reply) stops the run with run_result::diagnosis, instead of counting errors and reconnecting.
  bool diagnose_first_reply = false;
  /// When not one byte has come back this long after the start, the run stops with a
  /// diagnosis (a server of another protocol often waits silently). 0: never.
  std::chrono::nanoseconds silence_limit{0};
  /// TLS targets (https://, ringrpcs://, ...): makes every connection's client session. Null:
  /// plaintext.
  std::shared_ptr<record_layer> tls;
  /// Every call on a connection of its own: opened (and, for TLS, handshaken) for the call and
  /// closed by us after its reply, to measure connection set-up. Needs depth 1.
  bool new_connection_per_call = false;
  /// --stream: the protocol's codecs carry one stream per connection (codec_options::stream);
  /// at the end the engine half-closes each stream and waits for its end, and counts them.
  bool stream = false;
  /// Each reply's receive time from the kernel (SO_TIMESTAMPNS on multishot recvmsg) where the
  /// socket offers it; false, or a socket that refuses: the loop's clock read after its wait.
  bool kernel_rx_stamps = true;
  /// --live, --metrics-port: each worker hands every whole second of the measured window to
  /// live_counters::seconds as it ends (and the last, cut short, when it finishes). Off: none
  /// are kept there.
  bool publish_seconds = false;
  /// Called once on the calling thread when every worker has finished, before the run's
  /// results are summed: the live output takes the seconds still unread.
  std::function<void(const std::vector<live_counters*>&)> on_finished;
};

/// One second of the measured window as one worker counted it: its share of the figures that
/// --live and --metrics-port show. Made from the second's bucket once a second, never per call.
struct live_second {
  std::int64_t index = 0;  ///< which second: 0 is the first of the measured window
  double width_s = 1;      ///< 1 but for a last second cut short
  /// Handed over when its worker finished: it may be cut short, and only the report (at the
  /// run's end) knows its width, unless another worker handed the same second over whole.
  bool final = false;
  std::uint64_t calls_ok = 0;
  std::map<std::string, std::uint64_t> errors;  ///< by kind
  detail::latency_histogram latency{1000, 60'000'000'000ull, 3};
  unsigned connections_open = 0;  ///< at the second's end (when it was handed over)
};

/// Counters the engine publishes while it runs, read once a second by the live display.
struct live_counters {
  std::atomic<std::uint64_t> calls_ok{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> last_second_p99_ns{0};
  std::atomic<std::uint64_t> bytes_received{0};
  /// Counted only while the run watches its first answers (engine_fail_fast.hpp): errors that
  /// cannot improve, the first one's kind (hopeless_error_index; -1: none yet), other errors.
  std::atomic<std::uint64_t> hopeless_errors{0};
  std::atomic<int> hopeless_kind{-1};
  std::atomic<std::uint64_t> other_errors{0};
  /// engine_config::publish_seconds: the seconds this worker has ended and the reader has not
  /// taken yet, oldest first, under `seconds_mutex` (taken once a second by each side).
  std::mutex seconds_mutex;
  std::deque<live_second> seconds;
  /// Under seconds_mutex: the worker has handed over its last second; it has no share of any
  /// second it has not handed over (a worker done with its -n quota before the others).
  bool finished = false;
};

/// Runs the load. A run stopped because the server does not speak the protocol returns with
/// run_result::diagnosis set; one stopped because every early answer was an error that cannot
/// improve, with run_result::fail_fast set. Throws std::system_error when no connection can be made at start (e.g.
/// refused), std::invalid_argument for a bad configuration. `tick` is called about once a
/// second from the calling thread with the live counters of every thread.
run_result run_engine(const engine_config& config, const protocol& proto,
                      const std::function<void(double elapsed_s, const std::vector<live_counters*>&)>& tick);

}  // namespace ringrpc::load

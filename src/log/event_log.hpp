#pragma once
// The server's events as log lines: a listener for the event bus's "log" queue, with per-kind
// rate limits so a peer that causes a flood of events causes a few lines and one count.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "log/log.hpp"
#include "ringrpc/event_bus.hpp"

namespace ringrpc::log {

/// For event_bus_options::logger: the bus's own warnings (drops, listener errors) as
/// `level=warn event=event_bus msg="..."`.
std::function<void(std::string_view)> event_bus_logger();

/// Lets at most `lines_per_interval` lines of one kind through per `interval` (a fixed window
/// starting at the first line), and counts the rest. The count is handed to the first line let
/// through after the window (`suppressed_before`), or to take_suppressed() once the window is
/// over, so the log says "K similar lines suppressed" once instead of writing them. For lines a
/// peer can cause (one per refused connection, one per paused read): the counts in the metrics
/// stay exact; only the log is thinned. Thread-safe.
class rate_limiter {
 public:
  using clock = std::chrono::steady_clock;
  explicit rate_limiter(unsigned lines_per_interval = 10,
                        std::chrono::milliseconds interval = std::chrono::milliseconds(1000)) noexcept;

  struct decision {
    bool write = false;                  ///< write this line
    std::uint64_t suppressed_before = 0;  ///< write "suppressed N" first (only when write)
  };
  decision admit(clock::time_point now = clock::now()) noexcept;
  /// Lines suppressed in windows that have ended and not yet reported; reports (resets) them.
  std::uint64_t take_suppressed(clock::time_point now = clock::now()) noexcept;
  /// Every line suppressed so far.
  std::uint64_t suppressed_total() const noexcept;
  std::chrono::milliseconds interval() const noexcept { return _interval; }

 private:
  void roll(clock::time_point now) noexcept;  // with _mu held

  const unsigned _limit;
  const std::chrono::milliseconds _interval;
  mutable std::mutex _mu;
  bool _any = false;
  clock::time_point _window_start{};
  unsigned _in_window = 0;
  std::uint64_t _suppressed_in_window = 0;
  std::uint64_t _unreported = 0;  // from ended windows
  std::uint64_t _total = 0;
};

/// How the event log listener thins lines a peer can cause.
struct event_log_options {
  /// Per kind of event (and per limit for limit_hit); lifecycle events are never thinned.
  unsigned lines_per_interval = 10;
  std::chrono::milliseconds interval{1000};
};

/// Logs the server's events (subscribe it to the bus's log queue): lifecycle at info,
/// exhausted pools, limits hit and slow calls at warn, connections and rejections at debug,
/// sampled completions at trace. Every kind but the lifecycle ones goes through a rate_limiter
/// (a flood of refused connections writes a few lines and one
/// `event=log_suppressed of=limit_hit limit=max_connections suppressed=N` line, at the level of
/// the suppressed kind, when the next such event comes after the window, when any later event
/// comes after it, or when the listener is destroyed).
std::shared_ptr<event_listener> make_event_log_listener(event_log_options options = {});
/// The level make_event_log_listener logs `kind` at.
log_level level_of(event_kind kind) noexcept;
/// The kinds logged at `threshold`: subscribe with these so the queue does not even take the
/// events that would be filtered out.
event_kind_set logged_event_kinds(log_level threshold) noexcept;

}  // namespace ringrpc::log

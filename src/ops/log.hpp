#pragma once
// Process-wide structured logging on spdlog: one line per event, either
//
//   2026-11-30T11:00:00.123Z level=warn event=pool_exhausted pool=default size=4 msg="queue full"
//   {"ts":"2026-11-30T11:00:00.123Z","level":"warn","event":"pool_exhausted","pool":"default",...}
//
// Quiet by design: info and above are for things an operator acts on or wants on record
// (start, stop, exhausted pools, limits hit); per-call and per-connection events are debug or
// trace, so at the default level nothing is logged per call. Thread-safe; any thread may log.
// I/O threads should not: a slow stderr or disk would stall their ring. They post to the event
// bus instead, whose "log" queue runs event_log_listener on its own thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "ringrpc/config.hpp"
#include "ringrpc/event_bus.hpp"

namespace ringrpc::log {

/// One key=value of an event. Holds views: build fields in the call's argument list only.
class field {
 public:
  field(std::string_view key, std::string_view value) noexcept : _key(key), _value(value) {}
  field(std::string_view key, const char* value) noexcept : _key(key), _value(std::string_view(value)) {}
  field(std::string_view key, bool value) noexcept : _key(key), _value(value) {}
  field(std::string_view key, double value) noexcept : _key(key), _value(value) {}
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  field(std::string_view key, T value) noexcept : _key(key) {
    if constexpr (std::is_signed_v<T>) {
      _value = static_cast<std::int64_t>(value);
    } else {
      _value = static_cast<std::uint64_t>(value);
    }
  }

  std::string_view key() const noexcept { return _key; }
  const std::variant<std::string_view, std::int64_t, std::uint64_t, double, bool>& value() const noexcept {
    return _value;
  }

 private:
  std::string_view _key;
  std::variant<std::string_view, std::int64_t, std::uint64_t, double, bool> _value;
};

using fields = std::initializer_list<field>;

/// Where lines go instead of stderr or a file (tests, an in-memory ring for a status page).
/// Called with one whole line, timestamp included, no line feed; serialized by the logger.
using line_sink = std::function<void(std::string_view line)>;

/// Applies `[logging]`: level, format, and destination (options.file appended to, or stderr).
/// Replaces the previous configuration; lines being written meanwhile go to either. Throws
/// std::system_error if the file cannot be opened. Until the first call: info, text, stderr.
void configure(const log_options& options);
/// Same, but lines go to `sink` (options.file is ignored).
void configure(const log_options& options, line_sink sink);

/// Cheap (one relaxed load): whether events at `level` are written at all.
bool enabled(log_level level) noexcept;

/// Writes one event line if `level` is enabled. Never throws; a failing sink loses the line.
void event(log_level level, std::string_view name, fields f = {}) noexcept;
/// Same, stamped with `when` instead of now (events relayed from the event bus).
void event_at(std::chrono::system_clock::time_point when, log_level level, std::string_view name,
              fields f = {}) noexcept;

inline void trace(std::string_view name, fields f = {}) noexcept { event(log_level::trace, name, f); }
inline void debug(std::string_view name, fields f = {}) noexcept { event(log_level::debug, name, f); }
inline void info(std::string_view name, fields f = {}) noexcept { event(log_level::info, name, f); }
inline void warn(std::string_view name, fields f = {}) noexcept { event(log_level::warn, name, f); }
inline void error(std::string_view name, fields f = {}) noexcept { event(log_level::error, name, f); }

/// Writes out anything buffered (the sinks flush every line already; this is for exit paths).
void flush() noexcept;

/// The body of a line after the timestamp: `level=warn event=x k=v ...` (text) or
/// `"level":"warn","event":"x","k":"v"` (JSON, without braces). Exposed for tests.
std::string format_fields(log_format format, log_level level, std::string_view name, fields f);

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

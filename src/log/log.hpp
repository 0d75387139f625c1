#pragma once
// Process-wide structured logging: one line per event, either
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

#include "base/shared_internal.hpp"
#include "ringrpc/log.hpp"

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
RINGRPC_SHARED_INTERNAL void configure(const log_options& options);
/// Same, but lines go to `sink` (options.file is ignored).
RINGRPC_SHARED_INTERNAL void configure(const log_options& options, line_sink sink);

/// Cheap (one relaxed load): whether events at `level` are written at all.
bool enabled(log_level level) noexcept;

/// Writes one event line if `level` is enabled. Never throws; a failing sink loses the line.
RINGRPC_SHARED_INTERNAL void event(log_level level, std::string_view name, fields f = {}) noexcept;
/// Same, stamped with `when` instead of now (events relayed from the event bus).
RINGRPC_SHARED_INTERNAL void event_at(std::chrono::system_clock::time_point when, log_level level, std::string_view name,
              fields f = {}) noexcept;

inline void trace(std::string_view name, fields f = {}) noexcept { event(log_level::trace, name, f); }
inline void debug(std::string_view name, fields f = {}) noexcept { event(log_level::debug, name, f); }
inline void info(std::string_view name, fields f = {}) noexcept { event(log_level::info, name, f); }
inline void warn(std::string_view name, fields f = {}) noexcept { event(log_level::warn, name, f); }
inline void error(std::string_view name, fields f = {}) noexcept { event(log_level::error, name, f); }

/// Kept for exit paths; every line is written with one write(2) as it comes, nothing is buffered.
void flush() noexcept;

/// The body of a line after the timestamp: `level=warn event=x k=v ...` (text) or
/// `"level":"warn","event":"x","k":"v"` (JSON, without braces). Exposed for tests.
std::string format_fields(log_format format, log_level level, std::string_view name, fields f);

}  // namespace ringrpc::log

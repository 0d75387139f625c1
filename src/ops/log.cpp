// Structured logging: we format the key=value (or JSON) body; spdlog adds the UTC timestamp,
// serializes writers and owns the sinks.

#include "ops/log.hpp"
#include "base/utf8.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace ringrpc::log {

namespace {

constexpr const char* k_time_pattern = "%Y-%m-%dT%H:%M:%S.%eZ";

class callback_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit callback_sink(line_sink fn) : _sink(std::move(fn)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    _sink(std::string_view(buf.data(), buf.size()));
  }
  void flush_() override {}

 private:
  line_sink _sink;
};

struct state {
  std::shared_ptr<spdlog::logger> logger;
  log_format format = log_format::text;
};

std::atomic<int> g_level{static_cast<int>(log_level::info)};

// The state is replaced whole by configure(); event() copies the pointer under the lock and
// writes without it, so a slow sink never blocks configure() and a reconfiguration never frees
// a logger in use. Never destroyed: threads may still log while static objects are torn down.
struct globals {
  std::mutex mutex;
  std::shared_ptr<const state> current;
};
globals& g() {
  static globals* const p = new globals;
  return *p;
}

std::shared_ptr<const state> make_state(const log_options& o, std::shared_ptr<spdlog::sinks::sink> sink,
                                        bool line_feed) {
  const std::string pattern = o.format == log_format::json
                                  ? std::string("{\"ts\":\"") + k_time_pattern + "\",%v}"
                                  : std::string(k_time_pattern) + " %v";
  sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc,
                                                                  line_feed ? "\n" : ""));
  auto s = std::make_shared<state>();
  s->logger = std::make_shared<spdlog::logger>("ringrpc", std::move(sink));
  // We filter by our own level; the logger passes everything it is given.
  s->logger->set_level(spdlog::level::trace);
  // Lines are rare by design, so flushing each costs nothing and a crash loses none.
  s->logger->flush_on(spdlog::level::trace);
  s->format = o.format;
  return s;
}

std::shared_ptr<const state> current() {
  std::lock_guard lock(g().mutex);
  if (!g().current) {
    g().current = make_state(log_options{}, std::make_shared<spdlog::sinks::stderr_sink_mt>(), true);
  }
  return g().current;
}

void install(std::shared_ptr<const state> s, log_level level) {
  std::lock_guard lock(g().mutex);
  g().current = std::move(s);
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

spdlog::level::level_enum to_spdlog(log_level l) {
  switch (l) {
    case log_level::trace: return spdlog::level::trace;
    case log_level::debug: return spdlog::level::debug;
    case log_level::info: return spdlog::level::info;
    case log_level::warn: return spdlog::level::warn;
    case log_level::error: return spdlog::level::err;
    case log_level::critical: return spdlog::level::critical;
    case log_level::off: break;
  }
  return spdlog::level::off;
}

// Keys are written bare, so anything that would break the key=value grammar becomes '_'.
void append_key(std::string& out, std::string_view key) {
  if (key.empty()) {
    out += '_';
    return;
  }
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    out += (u <= ' ' || u == 0x7f || c == '=' || c == '"' || c == '\\' || c == ':' || c == ',') ? '_' : c;
  }
}

void append_hex_byte(std::string& out, std::string_view prefix, unsigned char c) {
  static constexpr char hex[] = "0123456789abcdef";
  out += prefix;
  out += hex[c >> 4];
  out += hex[c & 0xf];
}

// logfmt: bare when safe, else double-quoted with \" \\ \n \r \t and \xHH for other controls.
void append_text_value(std::string& out, std::string_view v) {
  const bool needs_quotes = v.empty() || std::any_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= ' ' || u == 0x7f || c == '=' || c == '"' || c == '\\';
  });
  if (!needs_quotes) {
    out += v;
    return;
  }
  out += '"';
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          append_hex_byte(out, "\\x", u);
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// A JSON string; bytes that are not UTF-8 become U+FFFD so the line stays valid JSON.
void append_json_string(std::string& out, std::string_view v) {
  out += '"';
  for (std::size_t i = 0; i < v.size();) {
    const char c = v[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t n = detail::utf8_length(v, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(v.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          append_hex_byte(out, "\\u00", u);
        } else {
          out += c;
        }
    }
    ++i;
  }
  out += '"';
}

template <class T>
void append_number(std::string& out, T v) {
  std::array<char, 32> buf;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

void append_value(std::string& out, log_format format, const field& f) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          if (format == log_format::json) {
            append_json_string(out, v);
          } else {
            append_text_value(out, v);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(v)) {
            append_number(out, v);
          } else {
            const std::string_view s = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
            if (format == log_format::json) {
              append_json_string(out, s);
            } else {
              out += s;
            }
          }
        } else {
          append_number(out, v);
        }
      },
      f.value());
}

void emit(std::chrono::system_clock::time_point when, log_level level, std::string_view name,
          fields f) noexcept {
  if (!enabled(level)) return;
  try {
    const auto s = current();
    const std::string body = format_fields(s->format, level, name, f);
    s->logger->log(when, spdlog::source_loc{}, to_spdlog(level), spdlog::string_view_t(body.data(), body.size()));
  } catch (...) {
    // Logging must never take the caller down; the line is lost.
  }
}

class event_log_listener final : public event_listener {
 public:
  explicit event_log_listener(event_log_options o) : _options(o) {
    for (auto& l : _by_kind) l.emplace(_options.lines_per_interval, _options.interval);
  }

  ~event_log_listener() override {
    // Whatever was suppressed at the end still gets its one line.
    report_all(rate_limiter::clock::time_point::max());
  }

  void on_event(const ringrpc::event& e) override {
    const log_level level = level_of(e.kind);
    if (!enabled(level)) return;
    const auto now = rate_limiter::clock::now();
    if (is_lifecycle(e.kind)) {
      report_all(now);
      write(e, level);
      return;
    }
    const limiter l = limiter_for(e);
    const rate_limiter::decision d = l.limiter->admit(now);
    if (!d.write) return;
    if (d.suppressed_before != 0) report(e.kind, l.name, level, d.suppressed_before);
    write(e, level);
    if (++_since_sweep >= 64) {
      // A kind that went quiet after a burst reports its count when the next line of any kind
      // is written, not only when it recurs.
      _since_sweep = 0;
      report_all(now);
    }
  }

 private:
  struct limiter {
    rate_limiter* limiter;
    std::string_view name;  // the limit, for limit_hit; empty otherwise
  };

  limiter limiter_for(const ringrpc::event& e) {
    if (e.kind != event_kind::limit_hit) {
      return {&*_by_kind[static_cast<std::size_t>(e.kind) % event_kind_count], {}};
    }
    // Limits are a handful of knob names; more names than that share one budget.
    std::lock_guard lock(_mu);
    auto it = _by_limit.find(e.name);
    if (it == _by_limit.end()) {
      if (_by_limit.size() >= 16) return {&*_by_kind[static_cast<std::size_t>(e.kind)], {}};
      it = _by_limit.try_emplace(e.name, _options.lines_per_interval, _options.interval).first;
    }
    return {&it->second, it->first};
  }

  void report(event_kind kind, std::string_view limit, log_level level, std::uint64_t n) {
    const auto interval_ms = static_cast<std::int64_t>(_options.interval.count());
    if (kind == event_kind::limit_hit && !limit.empty()) {
      event(level, "log_suppressed",
            {{"of", to_string(kind)}, {"limit", limit}, {"suppressed", n}, {"interval_ms", interval_ms}});
    } else {
      event(level, "log_suppressed", {{"of", to_string(kind)}, {"suppressed", n}, {"interval_ms", interval_ms}});
    }
  }

  void report_all(rate_limiter::clock::time_point now) {
    for (std::size_t i = 0; i < event_kind_count; ++i) {
      const auto k = static_cast<event_kind>(i);
      if (const std::uint64_t n = _by_kind[i]->take_suppressed(now); n != 0 && enabled(level_of(k))) {
        report(k, {}, level_of(k), n);
      }
    }
    std::lock_guard lock(_mu);
    for (auto& [name, l] : _by_limit) {
      if (const std::uint64_t n = l.take_suppressed(now); n != 0 && enabled(level_of(event_kind::limit_hit))) {
        report(event_kind::limit_hit, name, level_of(event_kind::limit_hit), n);
      }
    }
  }

  static void write(const ringrpc::event& e, log_level level) {
    const std::string_view name = to_string(e.kind);
    const double duration_ms = static_cast<double>(e.duration_ns) / 1e6;
    switch (e.kind) {
      case event_kind::server_started:
        event_at(e.timestamp, level, name, {{"address", e.detail}});
        break;
      case event_kind::server_stopping:
        event_at(e.timestamp, level, name, {{"reason", e.detail}});
        break;
      case event_kind::server_stopped:
        event_at(e.timestamp, level, name);
        break;
      case event_kind::endpoint_started:
        event_at(e.timestamp, level, name, {{"endpoint", e.name}, {"detail", e.detail}});
        break;
      case event_kind::endpoint_stopped:
        event_at(e.timestamp, level, name, {{"endpoint", e.name}});
        break;
      case event_kind::connection_opened:
        event_at(e.timestamp, level, name, {{"peer", e.peer}, {"conn", e.id}});
        break;
      case event_kind::connection_closed:
        event_at(e.timestamp, level, name, {{"peer", e.peer}, {"conn", e.id}, {"reason", e.detail}});
        break;
      case event_kind::call_rejected:
        event_at(e.timestamp, level, name, {{"peer", e.peer}, {"queue", e.name}, {"path", e.detail}});
        break;
      case event_kind::slow_call:
        event_at(e.timestamp, level, name,
                 {{"peer", e.peer},
                  {"method", clipped(e.name)},
                  {"duration_ms", duration_ms},
                  {"threshold_ms", static_cast<double>(e.value) / 1e6}});
        break;
      case event_kind::pool_exhausted:
        event_at(e.timestamp, level, name, {{"pool", e.name}, {"size", e.value}});
        break;
      case event_kind::limit_hit:
        event_at(e.timestamp, level, name, {{"limit", e.name}, {"value", e.value}, {"peer", e.peer}});
        break;
      case event_kind::call_completed:
        event_at(e.timestamp, level, name,
                 {{"peer", e.peer}, {"method", clipped(e.name)}, {"duration_ms", duration_ms}, {"status", e.detail}});
        break;
      default:
        event_at(e.timestamp, level, name, {{"name", e.name}, {"detail", e.detail}, {"value", e.value}});
        break;
    }
  }

  // Method names come from the peer's frame and may be megabytes long; a log line keeps 256
  // bytes of one (escaping then keeps the line valid text or JSON whatever the bytes are).
  static std::string_view clipped(std::string_view s) noexcept { return s.substr(0, 256); }

  const event_log_options _options;
  std::array<std::optional<rate_limiter>, event_kind_count> _by_kind;
  std::mutex _mu;  // _by_limit: one listener may be subscribed to several queues
  std::map<std::string, rate_limiter, std::less<>> _by_limit;
  std::atomic<unsigned> _since_sweep{0};
};

}  // namespace

void configure(const log_options& options) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (options.file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    // Open it ourselves first: spdlog's error would not carry errno for the caller to report.
    const int fd = ::open(options.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw std::system_error(errno, std::system_category(), "cannot open log file " + options.file);
    }
    ::close(fd);
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, false);
  }
  install(make_state(options, std::move(sink), true), options.level);
}

void configure(const log_options& options, line_sink sink) {
  install(make_state(options, std::make_shared<callback_sink>(std::move(sink)), false), options.level);
}

bool enabled(log_level level) noexcept {
  return level != log_level::off && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void event(log_level level, std::string_view name, fields f) noexcept {
  emit(std::chrono::system_clock::now(), level, name, f);
}

void event_at(std::chrono::system_clock::time_point when, log_level level, std::string_view name,
              fields f) noexcept {
  if (when == std::chrono::system_clock::time_point{}) when = std::chrono::system_clock::now();
  emit(when, level, name, f);
}

void flush() noexcept {
  try {
    current()->logger->flush();
  } catch (...) {
    // Nothing sensible to do at exit.
  }
}

std::string format_fields(log_format format, log_level level, std::string_view name, fields f) {
  std::string out;
  out.reserve(128);
  if (format == log_format::json) {
    out += "\"level\":";
    append_json_string(out, to_string(level));
    out += ",\"event\":";
    append_json_string(out, name);
    for (const field& x : f) {
      out += ',';
      append_json_string(out, x.key());
      out += ':';
      append_value(out, format, x);
    }
    return out;
  }
  out += "level=";
  out += to_string(level);
  out += " event=";
  append_text_value(out, name);
  for (const field& x : f) {
    out += ' ';
    append_key(out, x.key());
    out += '=';
    append_value(out, format, x);
  }
  return out;
}

std::function<void(std::string_view)> event_bus_logger() {
  return [](std::string_view line) { event(log_level::warn, "event_bus", {{"msg", line}}); };
}

log_level level_of(event_kind kind) noexcept {
  switch (kind) {
    case event_kind::server_started:
    case event_kind::server_stopping:  // an orderly stop is news, not an error
    case event_kind::server_stopped:
      return log_level::info;
    case event_kind::endpoint_started:
    case event_kind::endpoint_stopped:
    case event_kind::connection_opened:
    case event_kind::connection_closed:
    case event_kind::call_rejected:  // per call; pool_exhausted says it at warn once
      return log_level::debug;
    case event_kind::slow_call:
    case event_kind::pool_exhausted:
    case event_kind::limit_hit:
      return log_level::warn;
    case event_kind::call_completed:
      return log_level::trace;
  }
  return log_level::info;
}

event_kind_set logged_event_kinds(log_level threshold) noexcept {
  event_kind_set s;
  if (threshold == log_level::off) return s;
  for (std::size_t i = 0; i < event_kind_count; ++i) {
    const auto k = static_cast<event_kind>(i);
    if (static_cast<int>(level_of(k)) >= static_cast<int>(threshold)) s.add(k);
  }
  return s;
}

std::shared_ptr<event_listener> make_event_log_listener(event_log_options options) {
  return std::make_shared<event_log_listener>(options);
}

rate_limiter::rate_limiter(unsigned lines_per_interval, std::chrono::milliseconds interval) noexcept
    : _limit(lines_per_interval), _interval(interval) {}

void rate_limiter::roll(clock::time_point now) noexcept {
  if (_any && now - _window_start < _interval) return;
  _unreported += _suppressed_in_window;
  _suppressed_in_window = 0;
  _in_window = 0;
  _window_start = now;
  _any = true;
}

rate_limiter::decision rate_limiter::admit(clock::time_point now) noexcept {
  std::lock_guard lock(_mu);
  roll(now);
  if (_in_window >= _limit) {
    ++_suppressed_in_window;
    ++_total;
    return {};
  }
  ++_in_window;
  decision d{true, _unreported};
  _unreported = 0;
  return d;
}

std::uint64_t rate_limiter::take_suppressed(clock::time_point now) noexcept {
  std::lock_guard lock(_mu);
  if (_any && now - _window_start >= _interval) {
    _unreported += _suppressed_in_window;
    _suppressed_in_window = 0;
  }
  return std::exchange(_unreported, 0);
}

std::uint64_t rate_limiter::suppressed_total() const noexcept {
  std::lock_guard lock(_mu);
  return _total;
}

}  // namespace ringrpc::log

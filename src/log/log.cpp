// Structured logging. The core writes its own lines: a timestamp, the formatted body and one
// write(2) under a mutex is all it needs, so no logging library is linked into every embedder
// (the lines are rare by design: nothing is logged per call at the default level).

#include "log/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <ctime>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "base/escape.hpp"
#include "base/utf8.hpp"

namespace ringrpc::log {

namespace {

// Where lines go. Replaced whole by configure(); a writer holds the state it started with, so
// a reconfiguration (SIGHUP) never closes a file under a line being written.
struct state {
  log_format format = log_format::text;
  int fd = 2;             // stderr unless a file was configured
  bool owns_fd = false;
  line_sink sink;         // instead of fd, when set
  std::mutex write_mu;    // one line at a time: a sink is promised serialized calls
  ~state() {
    if (owns_fd) ::close(fd);
  }
};

// warn until configure(): a program embedding a server writes nothing to stderr while all is
// well unless it asks (log_options, [logging] level; ringrpc-server configures info).
std::atomic<int> g_level{static_cast<int>(log_level::warn)};

// Never destroyed: threads may still log while static objects are torn down.
struct globals {
  std::mutex mutex;
  std::shared_ptr<state> current;
};
globals& g() {
  static globals* const p = new globals;
  return *p;
}

std::shared_ptr<state> current() {
  std::lock_guard lock(g().mutex);
  if (!g().current) g().current = std::make_shared<state>();
  return g().current;
}

void install(std::shared_ptr<state> s, log_level level) {
  std::lock_guard lock(g().mutex);
  g().current = std::move(s);
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

// 2026-11-30T11:00:00.123Z
void append_timestamp(std::string& out, std::chrono::system_clock::time_point when) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  out.append(buf, n);
  const int millis = static_cast<int>(ms % 1000);
  out += '.';
  out += static_cast<char>('0' + millis / 100);
  out += static_cast<char>('0' + millis / 10 % 10);
  out += static_cast<char>('0' + millis % 10);
  out += 'Z';
}

void write_all(int fd, std::string_view line) noexcept {
  while (!line.empty()) {
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed stderr (EPIPE) or a full disk loses the line, never the caller
    line.remove_prefix(static_cast<std::size_t>(n));
  }
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

using detail::append_escaped_ascii;

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
    append_escaped_ascii(out, c, "\\x");
  }
  out += '"';
}

// A JSON string; bytes that are not UTF-8 become U+FFFD so the line stays valid JSON.
void append_json_string(std::string& out, std::string_view v) {
  out += '"';
  detail::append_utf8_escaped(out, v, "\\ufffd",
                              [](std::string& o, char c) { append_escaped_ascii(o, c, "\\u00"); });
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
    std::string line;
    line.reserve(160);
    if (s->format == log_format::json) {
      line += "{\"ts\":\"";
      append_timestamp(line, when);
      line += "\",";
      line += format_fields(s->format, level, name, f);
      line += '}';
    } else {
      append_timestamp(line, when);
      line += ' ';
      line += format_fields(s->format, level, name, f);
    }
    std::lock_guard lock(s->write_mu);
    if (s->sink) {
      s->sink(line);
    } else {
      line += '\n';
      write_all(s->fd, line);
    }
  } catch (...) {
    // Logging must never take the caller down; the line is lost.
  }
}

}  // namespace

void configure(const log_options& options) {
  auto s = std::make_shared<state>();
  s->format = options.format;
  if (!options.file.empty()) {
    const int fd = ::open(options.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw std::system_error(errno, std::system_category(), "cannot open log file " + options.file);
    }
    s->fd = fd;
    s->owns_fd = true;
  }
  install(std::move(s), options.level);
}

void configure(const log_options& options, line_sink sink) {
  auto s = std::make_shared<state>();
  s->format = options.format;
  s->sink = std::move(sink);
  install(std::move(s), options.level);
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

void flush() noexcept {}

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

}  // namespace ringrpc::log

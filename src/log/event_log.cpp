#include "log/event_log.hpp"

#include <array>
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace ringrpc::log {

namespace {

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
        // The server posts no reason for a plain stop() (nor for undoing a failed start, whose
        // cause the caller gets as an exception): no `reason=""` then.
        if (e.detail.empty()) {
          event_at(e.timestamp, level, name);
        } else {
          event_at(e.timestamp, level, name, {{"reason", e.detail}});
        }
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

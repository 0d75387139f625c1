#include "live_output.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "ops/admin_server.hpp"
#include "ops/prometheus_text.hpp"

namespace ringrpc::load {

std::string live_json_line(const live_figures& f) {
  nlohmann::json j;
  j["t_s"] = static_cast<double>(f.index) + f.width_s;  // the second's end, as the JSON's per_second
  j["calls_ok"] = f.calls_ok;
  j["calls_per_s"] = static_cast<double>(f.calls_ok) / f.width_s;
  if (f.requested_rate >= 0) j["requested_per_s"] = f.requested_rate;
  std::uint64_t errors = 0;
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, n] : f.errors) {
    kinds[kind] = n;
    errors += n;
  }
  j["errors"] = errors;
  j["error_kinds"] = std::move(kinds);
  j["latency_us"] = {{"p50", static_cast<double>(f.p50_ns) / 1e3},
                     {"p90", static_cast<double>(f.p90_ns) / 1e3},
                     {"p99", static_cast<double>(f.p99_ns) / 1e3},
                     {"max", static_cast<double>(f.max_ns) / 1e3}};
  j["connections"] = f.connections_open;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string live_prometheus_text(const live_figures& last, std::uint64_t calls_total,
                                 const std::map<std::string, std::uint64_t>& errors_total, double elapsed_s) {
  using detail::metric_type;
  detail::metrics_snapshot s;
  s.gauge("ringrpc_load_elapsed_seconds", "End of the last whole second shown, since the measured window began")
      .add(elapsed_s);
  s.counter("ringrpc_load_calls_total", "Calls answered successfully in the measured window").add(static_cast<double>(calls_total));
  auto& errors = s.counter("ringrpc_load_errors_total", "Failed calls in the measured window, by kind");
  for (const auto& [kind, n] : errors_total) errors.add(static_cast<double>(n), {{"kind", kind}});
  s.gauge("ringrpc_load_calls_per_second", "Calls answered successfully in the last whole second, per second")
      .add(static_cast<double>(last.calls_ok) / last.width_s);
  if (last.requested_rate >= 0) {
    s.gauge("ringrpc_load_requested_calls_per_second", "Open loop: the schedule's rate in the last whole second")
        .add(last.requested_rate);
  }
  auto& latency = s.gauge("ringrpc_load_latency_seconds", "Latency of the calls of the last whole second");
  latency.add(static_cast<double>(last.p50_ns) / 1e9, {{"percentile", "50"}});
  latency.add(static_cast<double>(last.p90_ns) / 1e9, {{"percentile", "90"}});
  latency.add(static_cast<double>(last.p99_ns) / 1e9, {{"percentile", "99"}});
  latency.add(static_cast<double>(last.max_ns) / 1e9, {{"percentile", "100"}});
  s.gauge("ringrpc_load_connections_open", "Connections open at the end of the last whole second")
      .add(static_cast<double>(last.connections_open));
  return detail::to_prometheus_text(s);
}

double scheduled_rate_at(const std::vector<rate_step>& steps, double t_s) noexcept {
  for (const rate_step& st : steps) {
    const double d = static_cast<double>(st.duration_ns) / 1e9;
    if (t_s < d) return st.ramp() ? st.rate + (st.rate_to - st.rate) * t_s / d : st.rate;
    t_s -= d;
  }
  // The middle of a last second cut short lies past the end: the schedule's last rate.
  if (steps.empty()) return -1;
  return steps.back().ramp() ? steps.back().rate_to : steps.back().rate;
}

live_output::live_output(std::FILE* out, std::vector<rate_step> steps) : _out(out), _steps(std::move(steps)) {}

live_output::~live_output() {
  if (_server) _server->stop();
}

void live_output::serve_metrics(const std::string& host, std::uint16_t port) {
  detail::admin_server_options o;
  o.host = host;
  o.port = port;
  _server = std::make_unique<detail::admin_server>(o);
  _server->route("/metrics", [this]() {
    detail::http_response r;
    r.content_type = std::string(detail::prometheus_content_type);
    std::lock_guard lock(_page_mutex);
    r.body = live_prometheus_text(_last, _calls_total, _errors_total, _seconds_shown);
    return r;
  });
  _server->start();
}

std::uint16_t live_output::metrics_port() const noexcept { return _server ? _server->port() : 0; }

void live_output::collect(const std::vector<live_counters*>& live) { take(live, false); }

void live_output::collect_rest(const std::vector<live_counters*>& live) { take(live, true); }

// Second _next is whole once every worker still running has handed it over (each hands its
// seconds in order; a finished worker has no share of a second it did not hand over), and one
// of them handed it over whole: a second only finished workers had may be cut short, and its
// width is the report's (finish()). At the end (`all`), a worker without it had nothing in it.
void live_output::take(const std::vector<live_counters*>& live, bool all) {
  for (;;) {
    bool every = true, any = false, whole = false;
    for (live_counters* l : live) {
      std::lock_guard lock(l->seconds_mutex);
      const bool has = !l->seconds.empty() && l->seconds.front().index == _next;
      every = every && (has || l->finished);
      any = any || has;
      whole = whole || (has && !l->seconds.front().final);
    }
    if (!(all ? any : every && whole)) return;
    std::vector<live_second> shares;
    for (live_counters* l : live) {
      std::lock_guard lock(l->seconds_mutex);
      if (l->seconds.empty() || l->seconds.front().index != _next) continue;
      shares.push_back(std::move(l->seconds.front()));
      l->seconds.pop_front();
    }
    const live_figures f = merge(shares);
    ++_next;
    if (all) {
      _rest.push_back(f);
    } else {
      emit(f);
    }
  }
}

live_figures live_output::merge(std::vector<live_second>& shares) const {
  live_figures f;
  f.index = _next;
  detail::latency_histogram latency = shares.front().latency;
  latency.reset();
  for (const live_second& s : shares) {
    f.width_s = std::min(f.width_s, s.width_s);
    f.calls_ok += s.calls_ok;
    for (const auto& [kind, n] : s.errors) f.errors[kind] += n;
    latency.merge(s.latency);
    f.connections_open += s.connections_open;
  }
  f.p50_ns = latency.value_at_percentile(50);
  f.p90_ns = latency.value_at_percentile(90);
  f.p99_ns = latency.value_at_percentile(99);
  f.max_ns = latency.count() == 0 ? 0 : latency.max();
  if (!_steps.empty()) f.requested_rate = scheduled_rate_at(_steps, static_cast<double>(f.index) + 0.5);
  return f;
}

void live_output::emit(const live_figures& f) {
  if (_out != nullptr) {
    const std::string line = live_json_line(f);
    std::fwrite(line.data(), 1, line.size(), _out);
    std::fputc('\n', _out);
    std::fflush(_out);  // one line a second: a reader (tail -f, a dashboard) sees each at once
  }
  std::lock_guard lock(_page_mutex);
  _last = f;
  _seconds_shown = static_cast<double>(f.index) + f.width_s;
  _calls_total += f.calls_ok;
  for (const auto& [kind, n] : f.errors) _errors_total[kind] += n;
}

void live_output::finish(const run_result& r) {
  for (live_figures& f : _rest) {
    const auto i = static_cast<std::size_t>(f.index);
    if (i < r.per_second.size()) f.width_s = r.per_second[i].width_s;
    emit(f);
  }
  _rest.clear();
}

}  // namespace ringrpc::load

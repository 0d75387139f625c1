// What the admin HTTP server shows: / (the list of pages), /metrics (Prometheus text), /metrics.json, /healthz,
// /readyz, /status and /connections. Everything here runs on the admin thread and reads the
// per-thread counters without stopping anyone.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/admin_server.hpp"
#include "ops/process_metrics.hpp"
#include "ops/prometheus_text.hpp"
#include "ops/status_pages.hpp"

#include "base/clock.hpp"
#include "ringrpc/record_layer.hpp"
#include "ringrpc/version.hpp"

namespace ringrpc::detail {

namespace {

histogram_value to_histogram(const metric_histogram::snapshot& s) {
  std::vector<source_bucket> b;
  for (std::size_t i = 0; i < metric_histogram::buckets; ++i) {
    if (s.counts[i] != 0) b.push_back({metric_histogram::lower_of(i), s.counts[i]});
  }
  return histogram_from_buckets(b, static_cast<double>(s.sum));
}

using seam = server_seam;

std::string status_label(std::size_t i) { return std::string(to_string(static_cast<status>(i))); }

// Series of the per-method families, at most: a server registering more endpoints than this
// has the rest counted under (other).
constexpr std::size_t k_max_method_labels = 256;
constexpr std::string_view k_other_label = "(other)";

// The method label is the name of the endpoint a call reached, as registered (an exact name,
// dotted ones of add_method included), never the rest of what the caller wrote: "echo.<any
// bytes>" is echo's. Names no longer registered, and the per-thread "(other)", are (other).
std::vector<method_calls> by_label(const std::vector<method_calls>& methods) {
  std::map<std::string, method_calls, std::less<>> merged;
  method_calls other;
  other.name = k_other_label;
  for (const auto& m : methods) {
    method_calls* into = &other;
    if (!m.endpoint.empty()) {
      auto it = merged.find(m.endpoint);
      if (it == merged.end() && merged.size() < k_max_method_labels && m.endpoint != k_other_label) {
        it = merged.try_emplace(m.endpoint).first;
        it->second.name = m.endpoint;
      }
      if (it != merged.end()) into = &it->second;
    }
    for (std::size_t i = 0; i < status_kinds; ++i) into->by_status[i] += m.by_status[i];
    into->processing.add(m.processing);
    into->stalls += m.stalls;
    into->stall_ns += m.stall_ns;
  }
  std::vector<method_calls> out;
  out.reserve(merged.size() + 1);
  for (auto& [name, m] : merged) out.push_back(std::move(m));
  bool any_other = other.processing.count() != 0 || other.stalls != 0;
  for (const auto n : other.by_status) any_other = any_other || n != 0;
  if (any_other) out.push_back(std::move(other));
  return out;
}

}  // namespace

namespace {

// The server's counters on /metrics, made from the counter table (ringrpc/server_counters.hpp):
// a family per distinct `metric`, a sample per counter (labelled when the table says so), in
// table order. Counters without a metric are on /status only.
void fill_counter_metrics(const server_stats& st, metrics_snapshot& m) {
  for (const server_stats::entry& e : st.entries()) {
    const server_counter_info& c = e.info;
    if (c.metric.empty()) continue;
    auto& f = m.family(c.metric, c.metric_help,
                       c.kind == counter_kind::gauge ? metric_type::gauge : metric_type::counter);
    std::vector<metric_label> labels;
    if (!c.label_key.empty()) labels.push_back({std::string(c.label_key), std::string(c.label_value)});
    f.add(static_cast<double>(e.value), std::move(labels));
  }
}

// Per-call metrics (server_options::metrics): by status, queue and processing time, per method.
void fill_call_metrics(const server& s, metrics_snapshot& m) {
  const call_totals calls = seam::call_metrics(s);
  auto& completed = m.counter("ringrpc_rpc_calls_completed_total",
                              "Calls that reached their endpoint, by the status of the answer.");
  for (std::size_t i = 0; i < status_kinds; ++i) {
    completed.add(static_cast<double>(calls.by_status[i]), {{"status", status_label(i)}});
  }
  m.histogram("ringrpc_rpc_queue_time_seconds",
              "Time from receipt to the start of running [Hadoop: RpcQueueTime].")
      .add(to_histogram(calls.queue_time));
  m.histogram("ringrpc_rpc_processing_time_seconds",
              "Time the endpoint ran [Hadoop: RpcProcessingTime].")
      .add(to_histogram(calls.processing_time));
  auto& per_method = m.counter("ringrpc_rpc_method_calls_total",
                               "Calls by method and status [Hadoop: RpcDetailedMetrics].");
  auto& per_method_time = m.histogram("ringrpc_rpc_method_processing_time_seconds",
                                      "Processing time by method [Hadoop: RpcDetailedMetrics].");
  auto& stalls = m.counter("ringrpc_shard_stalls_total",
                           "Stretches of a method's user code that held a shard's thread over 10 ms.");
  auto& stall_time = m.counter("ringrpc_shard_stall_seconds_total",
                               "Time a method's user code held a shard's thread in those stretches.");
  for (const auto& meth : by_label(calls.methods)) {
    for (std::size_t i = 0; i < status_kinds; ++i) {
      if (meth.by_status[i] == 0) continue;
      per_method.add(static_cast<double>(meth.by_status[i]),
                     {{"method", meth.name}, {"status", status_label(i)}});
    }
    per_method_time.add(to_histogram(meth.processing), {{"method", meth.name}});
    if (meth.stalls != 0) {
      stalls.add(static_cast<double>(meth.stalls), {{"method", meth.name}});
      stall_time.add(static_cast<double>(meth.stall_ns) / 1e9, {{"method", meth.name}});
    }
  }
}

void fill_pool_metrics(const server& s, metrics_snapshot& m) {
  std::uint64_t queued = 0;
  auto& threads = m.gauge("ringrpc_pool_threads", "Threads alive in each pool.");
  auto& active = m.gauge("ringrpc_pool_active_threads", "Threads running a task, per pool.");
  auto& max_threads = m.gauge("ringrpc_pool_max_threads", "Maximum threads, per pool.");
  auto& pool_queued = m.gauge("ringrpc_pool_queued_tasks", "Tasks waiting, per pool.");
  auto& pool_rejected = m.counter("ringrpc_pool_rejected_total", "Work refused, per pool.");
  auto& pool_completed = m.counter("ringrpc_pool_completed_total", "Tasks run, per pool.");
  for (const pool_stats& p : s.pool_stats_all()) {
    const std::vector<metric_label> l{{"pool", p.name}, {"kind", std::string(to_string(p.kind))}};
    threads.add(p.threads, l);
    active.add(p.active, l);
    max_threads.add(p.max_threads, l);
    pool_queued.add(static_cast<double>(p.queued), l);
    pool_rejected.add(static_cast<double>(p.rejected), l);
    pool_completed.add(static_cast<double>(p.completed), l);
    queued += p.queued;
  }
  m.gauge("ringrpc_call_queue_length", "Calls waiting in all pools [Hadoop: CallQueueLength].")
      .add(static_cast<double>(queued));
}

}  // namespace

void fill_metrics(const server& s, metrics_snapshot& m) {
  const std::int64_t started = seam::started_ns(s);
  const double uptime = started == 0 ? 0.0 : static_cast<double>(now_ns() - started) / 1e9;
  m.gauge("ringrpc_uptime_seconds", "Seconds since the server started.").add(uptime);
  fill_counter_metrics(s.stats(), m);
  if (s.options().metrics) fill_call_metrics(s, m);
  fill_pool_metrics(s, m);
  auto& dropped = m.counter("ringrpc_event_queue_dropped_total", "Events dropped by a full event queue.");
  auto& depth = m.gauge("ringrpc_event_queue_depth", "Events waiting in each event queue.");
  for (const auto& q : seam::event_queues(s)) {
    dropped.add(static_cast<double>(q.dropped), {{"queue", q.name}});
    depth.add(static_cast<double>(q.depth), {{"queue", q.name}});
  }
  fill_process_metrics(m);
}

std::string metrics_text(const server& s) {
  metrics_snapshot m;
  fill_metrics(s, m);
  return to_prometheus_text(m);
}

std::string metrics_json(const server& s) {
  metrics_snapshot m;
  fill_metrics(s, m);
  return to_json(m);
}

std::string status_json(const server& s, const server_config* given) {
  nlohmann::json j;
  j["version"] = std::string(ringrpc::version());
  const server_phase phase = seam::phase(s);
  j["state"] = phase >= server_phase::draining ? "draining" : phase == server_phase::running ? "running" : "stopped";
  const std::int64_t started = seam::started_ns(s);
  j["uptime_seconds"] = started == 0 ? 0.0 : static_cast<double>(now_ns() - started) / 1e9;
  j["listen"] = s.options().host + ":" + std::to_string(s.port());
  {
    // Which record layer the TLS listener uses: userspace OpenSSL today; kernel TLS could be.
    // Then the table's tls_* counters without their prefix, and every counter under "counters".
    const server_stats st = s.stats();
    const auto& o = s.options();
    j["tls"] = {{"enabled", o.tls != nullptr},
                {"record_layer", o.tls ? std::string(o.tls->name()) : std::string("none (plaintext only)")},
                {"listen", o.tls ? o.host + ":" + std::to_string(s.tls_port()) : std::string()}};
    nlohmann::json counters = nlohmann::json::object();
    for (const server_stats::entry& e : st.entries()) {
      const std::string name(e.info.name);
      if (name.starts_with("tls_")) j["tls"][name.substr(4)] = e.value;
      counters[name] = e.value;
    }
    j["counters"] = std::move(counters);
  }
  server_config in_effect;
  if (given != nullptr) in_effect = *given;
  in_effect.server = s.options();
  j["config"] = nlohmann::json::parse(describe(in_effect, config_text_format::json));
  nlohmann::json eps = nlohmann::json::array();
  for (const auto& line : seam::describe_endpoints(s)) eps.push_back(line);
  j["endpoints"] = eps;
  nlohmann::json pools = nlohmann::json::array();
  for (const pool_stats& p : s.pool_stats_all()) {
    pools.push_back({{"name", p.name}, {"kind", to_string(p.kind)}, {"threads", p.threads},
                     {"active", p.active}, {"max_threads", p.max_threads},
                     {"queued", p.queued}, {"queue_capacity", p.queue_capacity},
                     {"rejected", p.rejected}});
  }
  j["pools"] = pools;
  return j.dump(2) + "\n";
}

std::string connections_json(const server& s) {
  std::vector<connection_row> all = seam::connections(s);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.accepted_ns < b.accepted_ns; });
  const std::int64_t now = now_ns();
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& c : all) {
    arr.push_back({{"id", c.id},
                   {"peer", c.peer},
                   {"age_seconds", static_cast<double>(now - c.accepted_ns) / 1e9},
                   {"calls_in_flight", c.calls_in_flight},
                   {"queued_reply_bytes", c.queued_reply_bytes},
                   {"paused", c.paused},
                   {"reader", c.reader}});
  }
  nlohmann::json j;
  j["count"] = all.size();
  j["connections"] = arr;
  return j.dump(2) + "\n";
}

namespace {

std::vector<bearer_token> admin_tokens(const admin_options& a) {
  if (a.tokens_file.empty()) return {};
  std::vector<bearer_token> tokens = load_bearer_tokens(a.tokens_file);
  // An empty file must not leave the pages open to anyone: that would be a silent downgrade.
  if (tokens.empty()) throw config_error(a.tokens_file, 0, "admin.tokens_file", "holds no tokens");
  return tokens;
}

}  // namespace

admin_pages::admin_pages(const server& s, server_config config)
    : _server(s), _config(std::move(config)), _tokens(admin_tokens(_config.admin)) {}

void admin_pages::replace_tokens(std::vector<bearer_token> tokens) {
  if (tokens.empty()) throw std::invalid_argument("replace_admin_tokens(): no tokens; turning token checks off takes a restart");
  if (_tokens.empty()) {
    throw std::logic_error("replace_admin_tokens(): the admin pages were started without tokens; turning them on takes a restart");
  }
  _tokens.replace(std::move(tokens));
}

admin_pages::~admin_pages() { stop(); }

void admin_pages::start() {
  admin_server_options o;
  o.host = _config.admin.host;
  o.port = _config.admin.port;
  if (_config.admin.tls) o.tls = _config.server.tls;  // the RPC listener's: same certificate, same reload
  if (!_tokens.empty()) {
    o.accept_token = [this](std::string_view t) { return _tokens.match(t) != nullptr; };
    o.auth_failures = _config.server.auth_failures;
  }
  _admin = std::make_unique<admin_server>(o);
  auto json_page = [](std::string body) {
    http_response r;
    r.content_type = "application/json";
    r.body = std::move(body);
    return r;
  };
  const server& srv = _server;
  const admin_server& admin = *_admin;
  _admin->route("/metrics", [&srv, &admin] {
    http_response r;
    r.content_type = std::string(prometheus_content_type);
    r.body = detail::metrics_text(srv);  // qualified: ADL would also find the public ringrpc::metrics_text
    // The admin server's own refusals: a scrape is where someone probing the port shows up.
    r.body += "# HELP ringrpc_admin_tls_failures_total Admin connections closed before a request: failed or unfinished TLS handshakes, plaintext to the TLS port.\n"
              "# TYPE ringrpc_admin_tls_failures_total counter\n"
              "ringrpc_admin_tls_failures_total " + std::to_string(admin.tls_failures()) + "\n"
              "# HELP ringrpc_admin_unauthorized_total Admin requests answered 401 (no bearer token, or one not accepted).\n"
              "# TYPE ringrpc_admin_unauthorized_total counter\n"
              "ringrpc_admin_unauthorized_total " + std::to_string(admin.unauthorized()) + "\n"
              "# HELP ringrpc_admin_auth_limited_total Admin requests answered 429 without a look at their token: their address had used up its failed-authentication budget.\n"
              "# TYPE ringrpc_admin_auth_limited_total counter\n"
              "ringrpc_admin_auth_limited_total " + std::to_string(admin.auth_limited()) + "\n";
    return r;
  });
  // The index: what a person who opens http://HOST:PORT/ in a browser or curl wants first.
  _admin->route("/", [] {
    http_response r;
    r.body =
        "ringrpc " + std::string(ringrpc::version()) + " admin pages:\n"
        "  /metrics       Prometheus text: calls, latency, connections, pools, events, process_*\n"
        "  /metrics.json  the same metrics as JSON\n"
        "  /status        the server's state, configuration in effect and counters (JSON)\n"
        "  /connections   open connections: peer, age, calls, bytes (JSON)\n"
        "  /healthz       liveness: 200 while the process answers\n"
        "  /readyz        readiness: 200 while it takes new calls, 503 while draining\n";
    return r;
  });
  _admin->route("/metrics.json", [&srv, json_page] { return json_page(metrics_json(srv)); });
  _admin->route("/status", [this, json_page] { return json_page(status_json(_server, &_config)); });
  _admin->route("/connections", [&srv, json_page] { return json_page(connections_json(srv)); });
  // Liveness: the process answers. Readiness: it takes new calls (false while draining). Both
  // are probes: answered even while idle clients hold every slot, or an orchestrator restarts
  // a healthy server.
  _admin->route("/healthz", [] {
    http_response r;
    r.body = "ok\n";
    return r;
  }, route_kind::probe);
  _admin->route("/readyz", [&srv] {
    http_response r;
    const bool ready = seam::phase(srv) == server_phase::running;
    r.status = ready ? 200 : 503;
    r.body = ready ? "ready\n" : "draining\n";
    return r;
  }, route_kind::probe);
  _admin->start();
}

void admin_pages::stop() noexcept {
  if (_admin) _admin->stop();
}

std::uint16_t admin_pages::port() const noexcept { return _admin ? _admin->port() : 0; }

}  // namespace ringrpc::detail

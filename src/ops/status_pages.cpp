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
  }
  std::vector<method_calls> out;
  out.reserve(merged.size() + 1);
  for (auto& [name, m] : merged) out.push_back(std::move(m));
  bool any_other = other.processing.count() != 0;
  for (const auto n : other.by_status) any_other = any_other || n != 0;
  if (any_other) out.push_back(std::move(other));
  return out;
}

}  // namespace

void fill_metrics(const server& s, metrics_snapshot& m) {
  const server_stats st = s.stats();
  const std::int64_t started = seam::started_ns(s);
  const double uptime = started == 0 ? 0.0 : static_cast<double>(now_ns() - started) / 1e9;
  m.gauge("ringrpc_uptime_seconds", "Seconds since the server started.").add(uptime);

  // Calls. Names follow Hadoop's RpcMetrics where there is one (in the HELP text).
  m.counter("ringrpc_rpc_calls_received_total",
            "Requests and one-way messages read from clients [Hadoop: RpcQueueTimeNumOps counts the ones that ran].")
      .add(static_cast<double>(st.calls_received));
  auto& rejected = m.counter("ringrpc_rpc_calls_rejected_total",
                             "Calls answered at once without running, by path.");
  rejected.add(static_cast<double>(st.calls_rejected_busy), {{"path", "server_busy"}});
  rejected.add(static_cast<double>(st.calls_rejected_stopping), {{"path", "shutting_down"}});
  rejected.add(static_cast<double>(st.calls_unknown), {{"path", "unknown_method"}});
  rejected.add(static_cast<double>(st.bad_frames), {{"path", "bad_frame"}});
  rejected.add(static_cast<double>(st.calls_bad_metadata), {{"path", "bad_metadata"}});
  rejected.add(static_cast<double>(st.calls_unauthenticated), {{"path", "unauthenticated"}});
  rejected.add(static_cast<double>(st.calls_permission_denied), {{"path", "permission_denied"}});
  m.counter("ringrpc_rpc_cancel_requests_total", "Cancel frames received.")
      .add(static_cast<double>(st.cancel_requests));
  m.counter("ringrpc_rpc_replies_written_total",
            "Answers written to clients (or dropped because the client had gone).")
      .add(static_cast<double>(st.calls_completed));

  if (s.options().metrics) {
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
    for (const auto& meth : by_label(calls.methods)) {
      for (std::size_t i = 0; i < status_kinds; ++i) {
        if (meth.by_status[i] == 0) continue;
        per_method.add(static_cast<double>(meth.by_status[i]),
                       {{"method", meth.name}, {"status", status_label(i)}});
      }
      per_method_time.add(to_histogram(meth.processing), {{"method", meth.name}});
    }
  }

  // Pools.
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

  // Connections and bytes.
  m.gauge("ringrpc_open_connections", "Connections open now [Hadoop: NumOpenConnections].")
      .add(static_cast<double>(st.connections_open));
  m.counter("ringrpc_connections_accepted_total", "Connections accepted.")
      .add(static_cast<double>(st.connections_accepted));
  auto& refused = m.counter("ringrpc_connections_refused_total",
                            "Connections closed at once: max_connections, or a per-address limit.");
  refused.add(static_cast<double>(st.connections_refused), {{"reason", "max_connections"}});
  refused.add(static_cast<double>(st.connections_refused_per_address), {{"reason", "per_address"}});
  m.counter("ringrpc_connections_idle_closed_total", "Connections closed after idle_timeout.")
      .add(static_cast<double>(st.connections_idle_closed));
  m.counter("ringrpc_tls_handshakes_total", "TLS handshakes completed.")
      .add(static_cast<double>(st.tls_handshakes));
  m.counter("ringrpc_tls_handshake_failures_total", "TLS handshakes refused or garbled (connection closed).")
      .add(static_cast<double>(st.tls_handshake_failures));
  m.counter("ringrpc_tls_handshake_timeouts_total", "TLS connections closed: no handshake within tls_handshake_timeout.")
      .add(static_cast<double>(st.tls_handshake_timeouts));
  auto& hs_refused = m.counter("ringrpc_tls_handshakes_refused_total",
                               "TLS connections closed at once: max_tls_handshakes, or the per-address share, under way.");
  hs_refused.add(static_cast<double>(st.tls_handshakes_refused), {{"reason", "max_handshakes"}});
  hs_refused.add(static_cast<double>(st.tls_handshakes_refused_per_address), {{"reason", "per_address"}});
  m.counter("ringrpc_tls_handshakes_silent_closed_total",
            "TLS handshakes closed: the peer sent nothing for tls_handshake_silence_timeout while slots were scarce.")
      .add(static_cast<double>(st.tls_handshakes_silent_closed));
  m.counter("ringrpc_connections_dead_closed_total",
            "Connections the liveness check closed: reset or ended, but their receive never completed.")
      .add(static_cast<double>(st.connections_dead_closed));
  m.counter("ringrpc_auth_limited_total",
            "Calls refused UNAUTHENTICATED without a look at their token: their address had used up its "
            "failed-authentication budget (auth failure_burst).")
      .add(static_cast<double>(st.calls_auth_limited));
  m.counter("ringrpc_connections_auth_closed_total",
            "Connections closed after auth failures_per_connection failed or refused tokens.")
      .add(static_cast<double>(st.connections_auth_closed));
  m.counter("ringrpc_received_bytes_total", "Bytes read from clients [Hadoop: ReceivedBytes].")
      .add(static_cast<double>(st.bytes_in));
  m.counter("ringrpc_sent_bytes_total", "Bytes written to clients [Hadoop: SentBytes].")
      .add(static_cast<double>(st.bytes_out));
  m.counter("ringrpc_partial_writes_total",
            "Writes the kernel took in part; the rest was requeued at the head.")
      .add(static_cast<double>(st.partial_writes));
  m.counter("ringrpc_reads_paused_total", "Times a connection stopped being read for back-pressure.")
      .add(static_cast<double>(st.reads_paused));
  m.counter("ringrpc_event_loop_stalls_total", "Reader loop turns that held their thread over 10 ms.")
      .add(static_cast<double>(st.event_loop_stalls));

  // The memory budget (max_buffered_bytes) and the peers shed to keep it.
  m.gauge("ringrpc_buffered_bytes", "Bytes held for peers: partial frames, admitted requests, unwritten replies.")
      .add(static_cast<double>(st.buffered_bytes));
  m.gauge("ringrpc_buffered_bytes_peak", "The most bytes held for peers at once since start.")
      .add(static_cast<double>(st.buffered_bytes_peak));
  m.gauge("ringrpc_buffered_bytes_limit", "max_buffered_bytes: the server-wide memory budget.")
      .add(static_cast<double>(st.buffered_bytes_limit));
  m.counter("ringrpc_budget_pauses_total", "Connections that stopped being read because the memory budget was exhausted.")
      .add(static_cast<double>(st.budget_pauses));
  m.counter("ringrpc_calls_rejected_memory_total", "Calls answered SERVER_BUSY because the memory budget was exhausted.")
      .add(static_cast<double>(st.calls_rejected_memory));
  auto& shed = m.counter("ringrpc_connections_shed_total", "Connections closed because their peer stalled.");
  shed.add(static_cast<double>(st.connections_write_stalled), {{"reason", "write_stall"}});
  shed.add(static_cast<double>(st.connections_frame_stalled), {{"reason", "frame_stall"}});
  m.counter("ringrpc_out_of_memory_total", "Allocations that failed; one call or connection failed instead of the server.")
      .add(static_cast<double>(st.out_of_memory));

  // Event bus.
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
    const server_stats st = s.stats();
    const auto& o = s.options();
    j["tls"] = {{"enabled", o.tls != nullptr},
                {"record_layer", o.tls ? std::string(o.tls->name()) : std::string("none (plaintext only)")},
                {"listen", o.tls ? o.host + ":" + std::to_string(s.tls_port()) : std::string()},
                {"handshakes", st.tls_handshakes},
                {"handshake_failures", st.tls_handshake_failures},
                {"handshake_timeouts", st.tls_handshake_timeouts},
                {"handshakes_refused", st.tls_handshakes_refused},
                {"handshakes_refused_per_address", st.tls_handshakes_refused_per_address},
                {"handshakes_silent_closed", st.tls_handshakes_silent_closed},
                {"handshakes_in_progress", st.tls_handshakes_in_progress}};
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
    r.body = metrics_text(srv);
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

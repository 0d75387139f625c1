// One reader per section of the file, each listing the keys its section takes with the range
// each allows; docs/configuration.md is the same list for people.

#include <algorithm>
#include <string>

#include "ops/config_toml.hpp"

namespace ringrpc::config_detail {

std::string check_host(std::string_view h) {
  if (h.empty()) return "is empty; give an address or host name, e.g. \"127.0.0.1\" or \"0.0.0.0\"";
  for (const char c : h) {
    if (static_cast<unsigned char>(c) <= ' ') return "contains whitespace or control characters";
  }
  return {};
}

// Pool names appear in metrics labels and log lines, so they stay plain.
std::string check_pool_name(std::string_view name) {
  if (name == "default") {
    return "is configured by server.handlers and server.handler_queue_size, not [pools.default]";
  }
  if (!is_bare_key(name)) return "is not a valid pool name; allowed: letters, digits, '_' and '-'";
  return {};
}

void read_pool(context& ctx, const toml::table& t, const std::string& path, pool_options& p) {
  table_reader r(ctx, t, path, "[" + path + "]");
  r.enumeration("kind", p.kind, pool_kinds);
  r.integer("threads", p.threads, 0, 4096);
  r.integer("core_threads", p.core_threads, 0, 4096);
  r.integer("queue", p.queue, -1, 16'777'216);
  r.millis("keep_alive_ms", p.keep_alive, 0, k_day_ms);
  r.finish();
}

void read_server(context& ctx, const toml::table& t, server_options& s) {
  table_reader r(ctx, t, "server", "[server]");
  r.string("host", s.host, check_host);
  r.integer("port", s.port, 0, 65535);
  r.integer("backlog", s.backlog, 1, 65535);
  r.integer("readers", s.readers, 0, 1024);
  r.integer("handlers", s.handlers, 0, 4096);
  r.integer("handler_queue_size", s.handler_queue_size, 1, 1'048'576);
  r.enumeration("default_policy", s.default_policy, policies);
  r.integer("max_frame_bytes", s.max_frame_bytes, 16, std::int64_t{1} << 30);
  r.integer("max_buffered_bytes", s.max_buffered_bytes, 0, std::int64_t{1} << 50);
  r.integer("max_queued_reply_bytes", s.max_queued_reply_bytes, 1, std::int64_t{1} << 40);
  r.integer("max_inflight_per_connection", s.max_inflight_per_connection, 0, 1'048'576);
  r.integer("max_inflight_bytes_per_connection", s.max_inflight_bytes_per_connection, 1, std::int64_t{1} << 40);
  r.integer("fair_share_calls", s.fair_share_calls, 1, 1'048'576);
  r.enumeration("fair_share_by", s.fair_share_by, fair_share_callers);
  r.millis("idle_timeout_ms", s.idle_timeout, 0, 30 * k_day_ms);
  r.millis("write_stall_timeout_ms", s.write_stall_timeout, 0, 30 * k_day_ms);
  r.millis("frame_stall_timeout_ms", s.frame_stall_timeout, 0, 30 * k_day_ms);
  r.integer("max_connections", s.max_connections, 0, 16'777'216);
  r.integer("max_connections_per_address", s.max_connections_per_address, 0, 16'777'216);
  r.integer("accept_rate_per_address", s.accept_rate_per_address, 0, 16'777'216);
  r.integer("max_streams_per_connection", s.max_streams_per_connection, 0, 1'048'576);
  r.integer("max_streams", s.max_streams, 1, 16'777'216);
  r.integer("max_streams_per_address", s.max_streams_per_address, 0, 16'777'216);
  r.integer("socket_send_buffer_bytes", s.socket_send_buffer_bytes, 0, std::int64_t{1} << 30);
  r.integer("recv_buffer_bytes", s.recv_buffer_bytes, 256, 16'777'216);
  // The kernel's provided-buffer ring holds at most 32768 entries; the count is rounded up to a
  // power of two.
  r.integer("recv_buffers_per_reader", s.recv_buffers_per_reader, 1, 32768);
  r.millis("drain_timeout_ms", s.drain_timeout, 0, k_day_ms);
  r.boolean("metrics", s.metrics);
  r.boolean("grpc", s.grpc);
  std::int64_t slow_us = s.slow_call_threshold.count();
  r.integer("slow_call_threshold_us", slow_us, 0, k_day_ms * 1000);
  s.slow_call_threshold = std::chrono::microseconds(slow_us);
  r.integer("sample_completions_every", s.sample_completions_every, 0, 1'000'000'000);
  r.integer("max_metadata_entries", s.max_metadata_entries, 0, 65'536);
  r.integer("max_metadata_bytes", s.max_metadata_bytes, 0, std::int64_t{1} << 30);
  r.finish();
}

void read_pools(context& ctx, const toml::table& t, server_config& cfg) {
  for (const auto& [k, v] : t) {
    const std::string path = join_key("pools", k.str());
    if (std::string why = check_pool_name(k.str()); !why.empty()) {
      fail(ctx, k.source().begin.line, path, toml_quoted(k.str()) + " " + why);
    }
    const auto* pt = v.as_table();
    if (pt == nullptr) fail(ctx, line_of(v), path, "expected a table of pool settings, got " + show(v));
    ctx.lines.insert_or_assign(path, line_of(v));
    read_pool(ctx, *pt, path, cfg.pools[std::string(k.str())]);
  }
}

void read_endpoints(context& ctx, const toml::table& t, server_config& cfg) {
  for (const auto& [k, v] : t) {
    const std::string path = join_key("endpoints", k.str());
    if (k.str().empty()) fail(ctx, k.source().begin.line, path, "an endpoint needs a name");
    const auto* et = v.as_table();
    if (et == nullptr) fail(ctx, line_of(v), path, "expected a table of endpoint settings, got " + show(v));
    ctx.lines.insert_or_assign(path, line_of(v));
    endpoint_options& e = cfg.endpoints[std::string(k.str())];
    table_reader r(ctx, *et, path, "[" + path + "]");
    r.enumeration("policy", e.policy, policies);
    r.enumeration("concurrency", e.concurrency, concurrencies);
    r.string("pool", e.pool, [](std::string_view name) -> std::string {
      if (name.empty() || name == "default" || is_bare_key(name)) return {};
      return "is not a valid pool name; allowed: letters, digits, '_' and '-'";
    });
    if (const toml::table* own = r.table("own_pool")) {
      if (!e.own_pool) e.own_pool.emplace();
      read_pool(ctx, *own, r.full("own_pool"), *e.own_pool);
    }
    r.integer("inbox_capacity", e.inbox_capacity, 1, 16'777'216);
    r.finish();
  }
}

void read_events(context& ctx, const toml::table& t, event_bus_config& ev, event_queue_names known) {
  table_reader r(ctx, t, "events", "[events]");
  r.integer("default_capacity", ev.default_capacity, 1, k_max_event_queue);
  r.millis("warning_interval_ms", ev.warning_interval, 0, k_day_ms);
  if (const toml::table* q = r.table("queues")) {
    for (const auto& [k, v] : *q) {
      const std::string path = join_key("events.queues", k.str());
      if (!known.empty() && std::find(known.begin(), known.end(), k.str()) == known.end()) {
        std::string names;
        for (const auto n : known) {
          if (!names.empty()) names += ", ";
          names += n;
        }
        fail(ctx, k.source().begin.line, path, "unknown event queue; queues are " + names);
      }
      const auto cap = static_cast<std::size_t>(integer_of(ctx, v, path, 1, k_max_event_queue));
      ctx.lines.insert_or_assign(path, line_of(v));
      ev.queue_capacities.insert_or_assign(std::string(k.str()), cap);
    }
  }
  r.finish();
}

void read_admin(context& ctx, const toml::table& t, admin_options& a) {
  table_reader r(ctx, t, "admin", "[admin]");
  r.boolean("enabled", a.enabled);
  r.string("host", a.host, check_host);
  r.integer("port", a.port, 0, 65535);
  r.boolean("tls", a.tls);
  r.string("tokens_file", a.tokens_file);
  r.finish();
}

// [tls]: the files and policy go to the record layer (ringrpc-tls reads them); the port and the
// handshake limits are the server's.
void read_tls(context& ctx, const toml::table& t, server_config& cfg) {
  table_reader r(ctx, t, "tls", "[tls]");
  r.integer("port", cfg.server.tls_port, 0, 65535);
  r.string("cert", cfg.tls.cert_file);
  r.string("key", cfg.tls.key_file);
  r.string("ca", cfg.tls.ca_file);
  r.boolean("require_client_cert", cfg.tls.require_client_cert);
  r.string("min_version", cfg.tls.min_version, [](std::string_view v) -> std::string {
    return v == "1.2" || v == "1.3" ? "" : "must be \"1.2\" or \"1.3\"";
  });
  r.string("ciphers", cfg.tls.ciphers);
  r.string("ciphersuites", cfg.tls.ciphersuites);
  r.millis("handshake_timeout_ms", cfg.server.tls_handshake_timeout, 0, k_day_ms);
  r.integer("max_handshakes", cfg.server.max_tls_handshakes, 0, 16'777'216);
  r.integer("max_handshakes_per_address", cfg.server.max_tls_handshakes_per_address, 0, 16'777'216);
  r.millis("handshake_silence_timeout_ms", cfg.server.tls_handshake_silence_timeout, 0, k_day_ms);
  r.finish();
}

void read_logging(context& ctx, const toml::table& t, log_options& l) {
  table_reader r(ctx, t, "logging", "[logging]");
  r.enumeration("level", l.level, log_levels);
  r.enumeration("format", l.format, log_formats);
  r.string("file", l.file);
  r.finish();
}

// A service name is a path segment of etcd keys and a label elsewhere: keep it plain.
std::string check_service_name(std::string_view name) {
  if (name.empty()) return {};
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return "is not a valid service name; allowed: letters, digits, '_', '-' and '.'";
  }
  return {};
}

void read_discovery(context& ctx, const toml::table& t, discovery_config& d) {
  table_reader r(ctx, t, "discovery", "[discovery]");
  r.string("etcd", d.etcd, [](std::string_view url) -> std::string {
    if (url.empty() || url.starts_with("http://") || url.starts_with("https://")) return {};
    return "must be an http:// or https:// URL of an etcd client endpoint, e.g. \"http://127.0.0.1:2379\"";
  });
  r.string("service", d.service, check_service_name);
  r.string("advertise", d.advertise, [](std::string_view a) -> std::string {
    if (a.empty()) return {};
    const auto colon = a.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size()) {
      return "must be HOST:PORT, e.g. \"10.0.0.5:7000\"";
    }
    return check_host(a.substr(0, colon));
  });
  r.integer("weight", d.weight, 1, 1'000'000);
  r.string("zone", d.zone);
  r.string("version", d.version);
  r.boolean("tls", d.tls);
  r.string("prefix", d.prefix, [](std::string_view p) -> std::string {
    if (p.empty() || p.front() != '/' || p.back() == '/') return "must start with '/' and not end with it";
    return {};
  });
  std::int64_t ttl = d.lease_ttl.count();
  r.integer("lease_ttl_s", ttl, 2, 3600);
  d.lease_ttl = std::chrono::seconds(ttl);
  r.millis("deregister_grace_ms", d.deregister_grace, 0, 600'000);
  r.finish();
}

void read_auth(context& ctx, const toml::table& t, server_config& cfg) {
  table_reader r(ctx, t, "auth", "[auth]");
  r.string("tokens_file", cfg.auth.tokens_file);
  auth_failure_limits& f = cfg.server.auth_failures;  // the RPC port's and the admin port's
  r.integer("failure_burst", f.burst, 0, 1'000'000);
  r.integer("failure_rate_per_minute", f.per_minute, 1, 6'000'000);
  r.integer("failures_per_connection", f.per_connection, 0, 1'000'000);
  r.finish();
}

void read_all(context& ctx, const toml::table& root, server_config& cfg, event_queue_names known) {
  table_reader r(ctx, root, "", "the top level");
  if (const auto* t = r.table("server")) read_server(ctx, *t, cfg.server);
  if (const auto* t = r.table("pools")) read_pools(ctx, *t, cfg);
  if (const auto* t = r.table("endpoints")) read_endpoints(ctx, *t, cfg);
  if (const auto* t = r.table("events")) read_events(ctx, *t, cfg.events, known);
  if (const auto* t = r.table("admin")) read_admin(ctx, *t, cfg.admin);
  if (const auto* t = r.table("logging")) read_logging(ctx, *t, cfg.logging);
  if (const auto* t = r.table("discovery")) read_discovery(ctx, *t, cfg.discovery);
  if (const auto* t = r.table("auth")) read_auth(ctx, *t, cfg);
  if (const auto* t = r.table("tls")) read_tls(ctx, *t, cfg);
  r.finish();
}
}  // namespace ringrpc::config_detail

// The config in effect as text. One ordered JSON tree gives both formats, so the TOML and the
// JSON of /status can never list different keys or orders.

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ops/config_internal.hpp"

namespace ringrpc {

namespace {

using namespace config_detail;

nlohmann::ordered_json pool_json(const pool_options& p) {
  nlohmann::ordered_json j;
  j["kind"] = name_of(pool_kinds, p.kind);
  j["threads"] = p.threads;
  j["core_threads"] = p.core_threads;
  j["queue"] = p.queue;
  j["keep_alive_ms"] = p.keep_alive.count();
  return j;
}

nlohmann::ordered_json config_json(const server_config& cfg) {
  using json = nlohmann::ordered_json;
  json root;
  const server_options& s = cfg.server;
  json& js = root["server"];
  js["host"] = s.host;
  js["port"] = s.port;
  js["backlog"] = s.backlog;
  js["readers"] = s.readers;
  js["handlers"] = s.handlers;
  js["handler_queue_size"] = s.handler_queue_size;
  js["default_policy"] = name_of(policies, s.default_policy);
  js["max_frame_bytes"] = s.max_frame_bytes;
  js["max_buffered_bytes"] = s.max_buffered_bytes;
  js["max_queued_reply_bytes"] = s.max_queued_reply_bytes;
  js["max_inflight_per_connection"] = s.max_inflight_per_connection;
  js["max_inflight_bytes_per_connection"] = s.max_inflight_bytes_per_connection;
  js["fair_share_calls"] = s.fair_share_calls;
  js["fair_share_by"] = name_of(fair_share_callers, s.fair_share_by);
  js["idle_timeout_ms"] = s.idle_timeout.count();
  js["write_stall_timeout_ms"] = s.write_stall_timeout.count();
  js["frame_stall_timeout_ms"] = s.frame_stall_timeout.count();
  js["max_connections"] = s.max_connections;
  js["max_connections_per_address"] = s.max_connections_per_address;
  js["accept_rate_per_address"] = s.accept_rate_per_address;
  js["max_streams_per_connection"] = s.max_streams_per_connection;
  js["max_streams"] = s.max_streams;
  js["max_streams_per_address"] = s.max_streams_per_address;
  js["socket_send_buffer_bytes"] = s.socket_send_buffer_bytes;
  js["recv_buffer_bytes"] = s.recv_buffer_bytes;
  js["recv_buffers_per_reader"] = s.recv_buffers_per_reader;
  js["drain_timeout_ms"] = s.drain_timeout.count();
  js["metrics"] = s.metrics;
  js["grpc"] = s.grpc;
  js["slow_call_threshold_us"] = s.slow_call_threshold.count();
  js["sample_completions_every"] = s.sample_completions_every;
  js["max_metadata_entries"] = s.max_metadata_entries;
  js["max_metadata_bytes"] = s.max_metadata_bytes;

  json& jp = root["pools"] = json::object();
  for (const auto& [name, p] : cfg.pools) jp[name] = pool_json(p);

  json& je = root["endpoints"] = json::object();
  for (const auto& [name, e] : cfg.endpoints) {
    json j;
    j["policy"] = name_of(policies, e.policy);
    j["concurrency"] = name_of(concurrencies, e.concurrency);
    j["pool"] = e.pool;
    j["inbox_capacity"] = e.inbox_capacity;
    if (e.own_pool) j["own_pool"] = pool_json(*e.own_pool);
    je[name] = std::move(j);
  }

  json& jev = root["events"];
  jev["default_capacity"] = cfg.events.default_capacity;
  jev["warning_interval_ms"] = cfg.events.warning_interval.count();
  json& jq = jev["queues"] = json::object();
  for (const auto& [name, cap] : cfg.events.queue_capacities) jq[name] = cap;

  json& ja = root["admin"];
  ja["enabled"] = cfg.admin.enabled;
  ja["host"] = cfg.admin.host;
  ja["port"] = cfg.admin.port;
  ja["tls"] = cfg.admin.tls;
  ja["tokens_file"] = cfg.admin.tokens_file;

  json& jl = root["logging"];
  jl["level"] = to_string(cfg.logging.level);
  jl["format"] = to_string(cfg.logging.format);
  jl["file"] = cfg.logging.file;

  json& jd = root["discovery"];
  jd["etcd"] = cfg.discovery.etcd;
  jd["service"] = cfg.discovery.service;
  jd["advertise"] = cfg.discovery.advertise;
  jd["weight"] = cfg.discovery.weight;
  jd["zone"] = cfg.discovery.zone;
  jd["version"] = cfg.discovery.version;
  jd["tls"] = cfg.discovery.tls;
  jd["prefix"] = cfg.discovery.prefix;
  jd["lease_ttl_s"] = cfg.discovery.lease_ttl.count();
  jd["deregister_grace_ms"] = cfg.discovery.deregister_grace.count();
  // The file's name only: the tokens are secrets and never shown.
  root["auth"]["tokens_file"] = cfg.auth.tokens_file;
  root["auth"]["failure_burst"] = cfg.server.auth_failures.burst;
  root["auth"]["failure_rate_per_minute"] = cfg.server.auth_failures.per_minute;
  root["auth"]["failures_per_connection"] = cfg.server.auth_failures.per_connection;
  json& jt = root["tls"];
  jt["port"] = cfg.server.tls_port;
  jt["cert"] = cfg.tls.cert_file;
  jt["key"] = cfg.tls.key_file;
  jt["ca"] = cfg.tls.ca_file;
  jt["require_client_cert"] = cfg.tls.require_client_cert;
  jt["min_version"] = cfg.tls.min_version;
  jt["ciphers"] = cfg.tls.ciphers;
  jt["ciphersuites"] = cfg.tls.ciphersuites;
  jt["handshake_timeout_ms"] = cfg.server.tls_handshake_timeout.count();
  jt["max_handshakes"] = cfg.server.max_tls_handshakes;
  jt["max_handshakes_per_address"] = cfg.server.max_tls_handshakes_per_address;
  jt["handshake_silence_timeout_ms"] = cfg.server.tls_handshake_silence_timeout.count();
  return root;
}

void toml_scalar(std::string& out, const nlohmann::ordered_json& v) {
  if (v.is_string()) {
    out += toml_quoted(v.get_ref<const std::string&>());
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else {
    out += v.dump();  // integers only: the config has no floats
  }
}

// Writes `table`'s scalars under a [path] header, then its sub-tables, depth first. A table
// with only sub-tables gets no header of its own (TOML creates it implicitly).
void toml_table(std::string& out, const std::string& path, const nlohmann::ordered_json& table) {
  bool has_scalars = false;
  for (const auto& [k, v] : table.items()) has_scalars = has_scalars || !v.is_object();
  if (has_scalars || (table.empty() && !path.empty())) {
    if (!out.empty()) out += '\n';
    out += "[" + path + "]\n";
    for (const auto& [k, v] : table.items()) {
      if (v.is_object()) continue;
      out += key_text(k) + " = ";
      toml_scalar(out, v);
      out += '\n';
    }
  }
  for (const auto& [k, v] : table.items()) {
    if (v.is_object()) toml_table(out, path.empty() ? key_text(k) : path + "." + key_text(k), v);
  }
}

}  // namespace

std::string describe(const server_config& cfg, config_text_format format) {
  const nlohmann::ordered_json j = config_json(cfg);
  if (format == config_text_format::json) return j.dump(2);
  std::string out;
  toml_table(out, "", j);
  return out;
}

}  // namespace ringrpc

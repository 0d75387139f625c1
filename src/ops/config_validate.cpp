// The checks that look at more than one key: references between sections and products of
// knobs. Both the file and validate() end here, so a config built in code meets the same rules.

#include <algorithm>
#include <bit>
#include <string>

#include "base/cpu_affinity.hpp"
#include "ops/config_internal.hpp"

namespace ringrpc::config_detail {

namespace {

void check_pool_threads(const context& ctx, const std::string& path, const pool_options& p) {
  if (p.kind != pool_kind::fixed && p.threads != 0 && p.core_threads > p.threads) {
    const std::string key = path + ".core_threads";
    fail(ctx, ctx.line_of(key), key,
         std::to_string(p.core_threads) + " is more than threads (" + std::to_string(p.threads) +
             "); allowed: 0.." + std::to_string(p.threads));
  }
}

// What a thread count of 0 stands for, as the server will resolve it.
std::uint64_t effective_threads(unsigned n) { return n != 0 ? n : detail::usable_cpus(); }

std::string count_text(const char* key, unsigned n) {
  return n != 0 ? std::string(key) + " (" + std::to_string(n) + ")"
                : std::string(key) + " (0: one per CPU, " + std::to_string(detail::usable_cpus()) + " here)";
}

// Each knob may be in range while their product is not: the server allocates these products
// at start, and a product past what any machine has would end start-up in a bare bad_alloc.
void check_products(const context& ctx, const server_config& cfg) {
  const server_options& s = cfg.server;
  const std::uint64_t slots = effective_threads(s.handlers) * s.handler_queue_size;
  if (slots > static_cast<std::uint64_t>(max_default_queue_slots)) {
    const std::string key = "server.handler_queue_size";
    fail(ctx, ctx.line_of(key) != 0 ? ctx.line_of(key) : ctx.line_of("server.handlers"), key,
         count_text("server.handlers", s.handlers) + " x server.handler_queue_size (" +
             std::to_string(s.handler_queue_size) + ") = " + std::to_string(slots) +
             " call-queue slots; allowed: at most " + std::to_string(max_default_queue_slots));
  }
  const std::uint64_t buffers = std::bit_ceil(std::max<std::uint64_t>(s.recv_buffers_per_reader, 1));
  const std::uint64_t bytes = effective_threads(s.readers) * buffers * s.recv_buffer_bytes;
  if (bytes > max_receive_buffer_bytes) {
    const std::string key = "server.recv_buffers_per_reader";
    fail(ctx, ctx.line_of(key) != 0 ? ctx.line_of(key) : ctx.line_of("server.recv_buffer_bytes"), key,
         count_text("server.readers", s.readers) + " x server.recv_buffers_per_reader (" +
             std::to_string(s.recv_buffers_per_reader) + ", rounded up to " + std::to_string(buffers) +
             ") x server.recv_buffer_bytes (" + std::to_string(s.recv_buffer_bytes) + ") = " +
             std::to_string(bytes) + " bytes of receive buffers; allowed: at most " +
             std::to_string(max_receive_buffer_bytes) + " (4 GiB)");
  }
}

}  // namespace

// Checks that need the whole config: references between sections.
void cross_check(const context& ctx, const server_config& cfg, event_queue_names known) {
  check_products(ctx, cfg);
  for (const auto& [name, p] : cfg.pools) {
    const std::string path = join_key("pools", name);
    if (std::string why = check_pool_name(name); !why.empty()) {
      fail(ctx, ctx.line_of(path), path, toml_quoted(name) + " " + why);
    }
    check_pool_threads(ctx, path, p);
  }
  for (const auto& [name, e] : cfg.endpoints) {
    const std::string path = join_key("endpoints", name);
    if (name.empty()) fail(ctx, ctx.line_of(path), path, "an endpoint needs a name");
    if (e.own_pool) {
      if (!e.pool.empty()) {
        fail(ctx, ctx.line_of(path + ".pool"), path + ".pool",
             "set either pool (a shared pool) or own_pool (a pool for this endpoint alone), not both");
      }
      check_pool_threads(ctx, path + ".own_pool", *e.own_pool);
    } else if (!e.pool.empty() && e.pool != "default" && !cfg.pools.contains(e.pool)) {
      std::string names = "default";
      for (const auto& [pool_name, unused] : cfg.pools) names += ", " + pool_name;
      fail(ctx, ctx.line_of(path + ".pool"), path + ".pool",
           toml_quoted(e.pool) + " is not a pool; pools are " + names);
    }
  }
  if (!known.empty()) {
    for (const auto& [name, unused] : cfg.events.queue_capacities) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        const std::string path = join_key("events.queues", name);
        std::string names;
        for (const auto n : known) {
          if (!names.empty()) names += ", ";
          names += n;
        }
        fail(ctx, ctx.line_of(path), path, "unknown event queue; queues are " + names);
      }
    }
  }
  if (cfg.admin.tls && !cfg.tls.enabled()) {
    fail(ctx, ctx.line_of("admin.tls"), "admin.tls",
         "is true but tls.cert is empty; the admin port serves TLS with the RPC listener's "
         "certificate and key: set tls.cert and tls.key (--tls-cert, --tls-key)");
  }
  if (!cfg.discovery.etcd.empty() && cfg.discovery.service.empty()) {
    fail(ctx, ctx.line_of("discovery.etcd"), "discovery.service",
         "is empty; [discovery] with etcd set needs the service name to register under");
  }
}
}  // namespace ringrpc::config_detail

namespace ringrpc {

void validate(const server_config& cfg, event_queue_names known_queues) {
  // describe() writes every field, so parsing it back applies every check the file gets; only
  // the line numbers (of the generated text) mean nothing and are dropped.
  try {
    (void)parse_config(describe(cfg), "configuration", known_queues);
  } catch (const config_error& e) {
    std::string what = e.what();
    const std::string prefix = "configuration:" + std::to_string(e.line()) + ": ";
    if (e.line() != 0 && what.starts_with(prefix)) what = what.substr(prefix.size());
    const std::string key_prefix = e.key() + ": ";
    if (!e.key().empty() && what.starts_with(key_prefix)) what = what.substr(key_prefix.size());
    throw config_error("configuration", 0, e.key(), what);
  }
}

}  // namespace ringrpc

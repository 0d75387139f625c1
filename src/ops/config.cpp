// The configuration file: TOML read with toml++, checked key by key against what each knob
// allows, and written back out (describe) from one ordered JSON tree.

#include "ringrpc/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "base/cpu_affinity.hpp"

namespace ringrpc {

namespace {

template <class E>
struct enum_name {
  std::string_view name;
  E value;
};

constexpr enum_name<pool_kind> pool_kinds[] = {
    {"fixed", pool_kind::fixed},
    {"cached", pool_kind::cached},
    {"limited", pool_kind::limited},
    {"eager", pool_kind::eager},
};
constexpr enum_name<dispatch_policy> policies[] = {
    {"all", dispatch_policy::all},
    {"direct", dispatch_policy::direct},
    {"message", dispatch_policy::message},
    {"execution", dispatch_policy::execution},
    {"connection", dispatch_policy::connection},
};
constexpr enum_name<endpoint_concurrency> concurrencies[] = {
    {"concurrent", endpoint_concurrency::concurrent},
    {"serial", endpoint_concurrency::serial},
};
constexpr enum_name<log_level> log_levels[] = {
    {"trace", log_level::trace}, {"debug", log_level::debug}, {"info", log_level::info},
    {"warn", log_level::warn},   {"error", log_level::error}, {"critical", log_level::critical},
    {"off", log_level::off},
};
constexpr enum_name<log_format> log_formats[] = {
    {"text", log_format::text},
    {"json", log_format::json},
};

template <class E, std::size_t N>
std::string_view name_of(const enum_name<E> (&names)[N], E value) noexcept {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "unknown";
}

template <class E, std::size_t N>
bool value_of(const enum_name<E> (&names)[N], std::string_view name, E& out) noexcept {
  for (const auto& n : names) {
    if (n.name == name) {
      out = n.value;
      return true;
    }
  }
  return false;
}

template <class E, std::size_t N>
std::string list_names(const enum_name<E> (&names)[N]) {
  std::string s;
  for (const auto& n : names) {
    if (!s.empty()) s += ", ";
    s += n.name;
  }
  return s;
}

// Limits shared by the file and validate(). Where the server or the kernel has a hard limit the
// range is that limit; elsewhere it is generous, only there to catch a misplaced digit.
constexpr std::int64_t k_day_ms = 86'400'000;
// event_bus::add_queue takes up to 2^30, but the ring is allocated whole at start: 2^24 cells
// are 384 MiB, and 2^30 would fail later as a bare std::bad_alloc.
constexpr std::int64_t k_max_event_queue = std::int64_t{1} << 24;

// A TOML basic string: what a value looks like in an error message and in describe().
std::string toml_quoted(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char hex[] = "0123456789ABCDEF";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xf];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

bool is_bare_key(std::string_view k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string key_text(std::string_view k) { return is_bare_key(k) ? std::string(k) : toml_quoted(k); }

std::string join_key(std::string_view path, std::string_view key) {
  return path.empty() ? key_text(key) : std::string(path) + "." + key_text(key);
}

std::string_view type_phrase(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// How a value looks in "got ..." (short; tables and arrays are not spelled out).
std::string show(const toml::node& n) {
  if (const auto* s = n.as_string()) return std::string(type_phrase(n.type())) + " (" + toml_quoted(s->get()) + ")";
  if (const auto* i = n.as_integer()) return std::string(type_phrase(n.type())) + " (" + std::to_string(i->get()) + ")";
  if (const auto* b = n.as_boolean()) return std::string(type_phrase(n.type())) + " (" + (b->get() ? "true" : "false") + ")";
  if (const auto* f = n.as_floating_point()) {
    std::ostringstream o;
    o << f->get();
    return std::string(type_phrase(n.type())) + " (" + o.str() + ")";
  }
  return std::string(type_phrase(n.type()));
}

// Where the values come from, and what errors call it.
struct context {
  std::string source;
  // Command-line values arrive as strings; they may then stand for integers and booleans.
  bool lenient = false;
  // Full key -> line, for checks made after the whole text was read (pool references).
  std::map<std::string, unsigned, std::less<>> lines;

  unsigned line_of(std::string_view key) const {
    const auto it = lines.find(key);
    return it == lines.end() ? 0 : it->second;
  }
};

[[noreturn]] void fail(const context& ctx, unsigned line, std::string key, const std::string& problem) {
  // Each command-line override is parsed as a one-line document; its "line 1" means nothing.
  throw config_error(ctx.source, ctx.lenient ? 0 : line, std::move(key), problem);
}

unsigned line_of(const toml::node& n) { return n.source().begin.line; }

// An integer in [min, max]; on the command line also its decimal spelling.
std::int64_t integer_of(const context& ctx, const toml::node& n, const std::string& key, std::int64_t min,
                        std::int64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  std::int64_t v = 0;
  if (const auto* i = n.as_integer()) {
    v = i->get();
  } else if (const auto* s = n.as_string(); s != nullptr && ctx.lenient) {
    const std::string& text = s->get();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(ctx, line_of(n), key, toml_quoted(text) + " is not an integer; allowed: " + range);
    }
  } else {
    fail(ctx, line_of(n), key, "expected an integer in " + range + ", got " + show(n));
  }
  if (v < min || v > max) fail(ctx, line_of(n), key, std::to_string(v) + " is out of range; allowed: " + range);
  return v;
}

// Reads one table: every getter names a key the table may have; finish() rejects the others.
class table_reader {
 public:
  table_reader(context& ctx, const toml::table& t, std::string path, std::string what)
      : _ctx(ctx), _t(t), _path(std::move(path)), _what(std::move(what)) {}

  template <class T>
  void integer(std::string_view key, T& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    out = static_cast<T>(integer_of(_ctx, *n, full(key), min, max));
  }

  void millis(std::string_view key, std::chrono::milliseconds& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    out = std::chrono::milliseconds(integer_of(_ctx, *n, full(key), min, max));
  }

  void boolean(std::string_view key, bool& out) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    if (const auto* b = n->as_boolean()) {
      out = b->get();
      return;
    }
    if (const auto* s = n->as_string(); s != nullptr && _ctx.lenient) {
      if (s->get() == "true") {
        out = true;
        return;
      }
      if (s->get() == "false") {
        out = false;
        return;
      }
      fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " is not a boolean; allowed: true, false");
    }
    fail(_ctx, line_of(*n), full(key), "expected a boolean (true or false), got " + show(*n));
  }

  /// `check` returns an empty string when the value is acceptable, else why not.
  void string(std::string_view key, std::string& out,
              const std::function<std::string(std::string_view)>& check = {}) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    const auto* s = n->as_string();
    if (s == nullptr) fail(_ctx, line_of(*n), full(key), "expected a string, got " + show(*n));
    if (check) {
      if (std::string why = check(s->get()); !why.empty()) {
        fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " " + why);
      }
    }
    out = s->get();
  }

  template <class E, std::size_t N>
  void enumeration(std::string_view key, E& out, const enum_name<E> (&names)[N]) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    const auto* s = n->as_string();
    if (s == nullptr) {
      fail(_ctx, line_of(*n), full(key),
           "expected a string, one of " + list_names(names) + "; got " + show(*n));
    }
    if (!value_of(names, std::string_view(s->get()), out)) {
      fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " is not one of " + list_names(names));
    }
  }

  /// A sub-table, or nullptr when the key is absent.
  const toml::table* table(std::string_view key) {
    const toml::node* n = take(key);
    if (n == nullptr) return nullptr;
    const auto* t = n->as_table();
    if (t == nullptr) fail(_ctx, line_of(*n), full(key), "expected a table, got " + show(*n));
    return t;
  }

  /// Rejects every key no getter asked for, naming the ones that are allowed.
  void finish() const {
    for (const auto& [k, v] : _t) {
      if (std::find(_known.begin(), _known.end(), k.str()) != _known.end()) continue;
      std::string allowed;
      for (const auto known : _known) {
        if (!allowed.empty()) allowed += ", ";
        allowed += known;
      }
      unsigned line = k.source().begin.line;
      if (line == 0) line = line_of(v);
      fail(_ctx, line, full(k.str()), "unknown key; " + _what + " takes " + allowed);
    }
  }

  std::string full(std::string_view key) const { return join_key(_path, key); }

 private:
  const toml::node* take(std::string_view key) {
    _known.push_back(key);
    const toml::node* n = _t.get(key);
    if (n != nullptr) _ctx.lines.insert_or_assign(full(key), line_of(*n));
    return n;
  }

  context& _ctx;
  const toml::table& _t;
  std::string _path;
  std::string _what;
  std::vector<std::string_view> _known;
};

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
  r.millis("idle_timeout_ms", s.idle_timeout, 0, 30 * k_day_ms);
  r.millis("write_stall_timeout_ms", s.write_stall_timeout, 0, 30 * k_day_ms);
  r.millis("frame_stall_timeout_ms", s.frame_stall_timeout, 0, 30 * k_day_ms);
  r.integer("max_connections", s.max_connections, 0, 16'777'216);
  r.integer("max_connections_per_address", s.max_connections_per_address, 0, 16'777'216);
  r.integer("accept_rate_per_address", s.accept_rate_per_address, 0, 16'777'216);
  r.integer("socket_send_buffer_bytes", s.socket_send_buffer_bytes, 0, std::int64_t{1} << 30);
  r.integer("recv_buffer_bytes", s.recv_buffer_bytes, 256, 16'777'216);
  // The kernel's provided-buffer ring holds at most 32768 entries; the count is rounded up to a
  // power of two.
  r.integer("recv_buffers_per_reader", s.recv_buffers_per_reader, 1, 32768);
  r.millis("drain_timeout_ms", s.drain_timeout, 0, k_day_ms);
  r.boolean("metrics", s.metrics);
  std::int64_t slow_us = s.slow_call_threshold.count();
  r.integer("slow_call_threshold_us", slow_us, 0, k_day_ms * 1000);
  s.slow_call_threshold = std::chrono::microseconds(slow_us);
  r.integer("sample_completions_every", s.sample_completions_every, 0, 1'000'000'000);
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
  r.finish();
}

void read_logging(context& ctx, const toml::table& t, log_options& l) {
  table_reader r(ctx, t, "logging", "[logging]");
  r.enumeration("level", l.level, log_levels);
  r.enumeration("format", l.format, log_formats);
  r.string("file", l.file);
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
  r.finish();
}

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
}

toml::table parse_toml(const context& ctx, std::string_view text) {
  try {
    return toml::parse(text, ctx.source);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw config_error(ctx.source, at.line, "",
                       "column " + std::to_string(at.column) + ": not valid TOML: " + std::string(e.description()));
  }
}

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
  js["idle_timeout_ms"] = s.idle_timeout.count();
  js["write_stall_timeout_ms"] = s.write_stall_timeout.count();
  js["frame_stall_timeout_ms"] = s.frame_stall_timeout.count();
  js["max_connections"] = s.max_connections;
  js["max_connections_per_address"] = s.max_connections_per_address;
  js["accept_rate_per_address"] = s.accept_rate_per_address;
  js["socket_send_buffer_bytes"] = s.socket_send_buffer_bytes;
  js["recv_buffer_bytes"] = s.recv_buffer_bytes;
  js["recv_buffers_per_reader"] = s.recv_buffers_per_reader;
  js["drain_timeout_ms"] = s.drain_timeout.count();
  js["metrics"] = s.metrics;
  js["slow_call_threshold_us"] = s.slow_call_threshold.count();
  js["sample_completions_every"] = s.sample_completions_every;

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

  json& jl = root["logging"];
  jl["level"] = to_string(cfg.logging.level);
  jl["format"] = to_string(cfg.logging.format);
  jl["file"] = cfg.logging.file;
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


std::size_t event_bus_config::capacity_of(std::string_view name) const {
  const auto it = queue_capacities.find(name);
  return it == queue_capacities.end() ? default_capacity : it->second;
}

namespace {
std::string error_text(const std::string& source, unsigned line, const std::string& key,
                       const std::string& problem) {
  std::string s = source;
  if (line != 0) s += ":" + std::to_string(line);
  s += ": ";
  if (!key.empty()) s += key + ": ";
  return s + problem;
}
}  // namespace

config_error::config_error(std::string source, unsigned line, std::string key, const std::string& problem)
    : std::runtime_error(error_text(source, line, key, problem)),
      _source(std::move(source)),
      _line(line),
      _key(std::move(key)) {}

server_config parse_config(std::string_view toml_text, std::string_view source_name,
                           event_queue_names known_queues) {
  context ctx;
  ctx.source = source_name;
  const toml::table root = parse_toml(ctx, toml_text);
  server_config cfg;
  read_all(ctx, root, cfg, known_queues);
  cross_check(ctx, cfg, known_queues);
  return cfg;
}

namespace {

std::string_view file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

struct fd_closer {
  int fd;
  ~fd_closer() { ::close(fd); }
};

}  // namespace

server_config load_config_file(const std::string& path, event_queue_names known_queues) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw config_error(path, 0, "", std::string("cannot open the configuration file: ") + std::strerror(errno));
  }
  const fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw config_error(path, 0, "", std::string("cannot read the configuration file: ") + std::strerror(errno));
  }
  // Devices and pipes have no end a reader can rely on (/dev/zero never ends, a FIFO may never
  // be written): only a regular file is read.
  if (!S_ISREG(st.st_mode)) {
    throw config_error(path, 0, "",
                       std::string("is ") + std::string(file_kind(st.st_mode)) +
                           "; the configuration must be a regular file");
  }
  const std::string too_big = "the configuration file is larger than " + std::to_string(max_config_file_bytes) +
                              " bytes (1 MiB), the most that is read";
  if (static_cast<std::uint64_t>(st.st_size) > max_config_file_bytes) throw config_error(path, 0, "", too_big);
  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(max_config_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw config_error(path, 0, "", std::string("cannot read the configuration file: ") + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_config_file_bytes) throw config_error(path, 0, "", too_big);
  text.resize(got);
  return parse_config(text, path, known_queues);
}

config_override parse_override(std::string_view key_equals_value) {
  const auto eq = key_equals_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw config_error("command line", 0, "",
                       toml_quoted(key_equals_value) + " is not KEY=VALUE (e.g. server.handlers=8)");
  }
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  return {std::string(trim(key_equals_value.substr(0, eq))), std::string(trim(key_equals_value.substr(eq + 1)))};
}

void apply_overrides(server_config& cfg, std::span<const config_override> overrides,
                     event_queue_names known_queues) {
  context ctx;
  ctx.source = "command line";
  ctx.lenient = true;
  server_config next = cfg;  // on an error, cfg stays as it was
  for (const auto& [key, value] : overrides) {
    // TOML itself splits the key, so quoted parts such as endpoints."a.b".policy work; the
    // value goes in as a string and each getter converts it to the key's type.
    toml::table one;
    try {
      const std::string line = key + " = " + toml_quoted(value);
      one = toml::parse(std::string_view(line), std::string_view("command line"));
    } catch (const toml::parse_error&) {
      throw config_error(ctx.source, 0, key, "not a valid key; write it as in the file, e.g. server.handlers");
    }
    read_all(ctx, one, next, known_queues);
  }
  cross_check(ctx, next, known_queues);
  cfg = std::move(next);
}

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

std::string describe(const server_config& cfg, config_text_format format) {
  const nlohmann::ordered_json j = config_json(cfg);
  if (format == config_text_format::json) return j.dump(2);
  std::string out;
  toml_table(out, "", j);
  return out;
}

}  // namespace ringrpc

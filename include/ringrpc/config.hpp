#pragma once
/// \file Configuration of a server process: every knob in one TOML file, with command-line
/// overrides on top. docs/configuration.md lists every key, its default and range, and its
/// Hadoop IPC or Dubbo equivalent; examples/ringrpc.toml is a complete example.
///
///     ringrpc::server_config cfg = ringrpc::load_config_file("ringrpc.toml");
///     ringrpc::apply_overrides(cfg, {{"server.handlers", "8"}, {"admin.port", "9464"}});
///
/// Errors stop start-up: parse_config, load_config_file and apply_overrides throw config_error
/// naming the file, the line, the full key, what was wrong and what is allowed, e.g.
/// `ringrpc.toml:12: pools.slow.kind: "fast" is not one of fixed, cached, limited, eager`.
/// Unknown keys and wrong types are errors too, so a typo never silently keeps a default.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/discovery_config.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/log.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/thread_pool.hpp"
#include "ringrpc/tls.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// `[admin]`: the HTTP status server (/metrics, /healthz, /status, ...).
struct admin_options {
  bool enabled = false;
  std::string host = "127.0.0.1";  ///< loopback by default: the pages show the server's insides
  std::uint16_t port = 0;          ///< 0 picks a free port
  /// Serve the pages over TLS with the RPC listener's certificate and key (`[tls]`, reloaded
  /// with it on SIGHUP): needs tls.cert and the record layer in server_options::tls.
  bool tls = false;
  /// A file of `SUBJECT TOKEN` lines (the format of auth.tokens_file; METHODS are ignored):
  /// every page but the health probes (/healthz, /readyz) then needs
  /// `Authorization: Bearer <one of them>`, else 401. Read when the server is built; again by
  /// server::replace_admin_tokens (ringrpc-server does on SIGHUP). Empty: pages are open.
  std::string tokens_file;
};

/// `[events]`: capacities of the event bus's queues (event_bus::add_queue).
struct event_bus_config {
  std::size_t default_capacity = 10'000;  ///< [Spark: spark.scheduler.listenerbus.eventqueue.capacity]
  /// Per-queue capacities that differ from the default, by queue name.
  std::map<std::string, std::size_t, std::less<>> queue_capacities;
  /// event_bus_options::warning_interval: at most one drop warning per queue per interval.
  std::chrono::milliseconds warning_interval{60'000};

  /// The capacity to give queue `name`.
  std::size_t capacity_of(std::string_view name) const;
};

/// `[auth]`: bearer tokens for plaintext deployments on trusted networks (docs/security.md).
struct auth_options {
  /// A file of `SUBJECT TOKEN` lines (src/ops/config_tokens.cpp), read when the server is
  /// built from this configuration; its tokens join server_options::bearer_tokens. A path
  /// relative to the working directory. Empty: none.
  std::string tokens_file;
};

/// Everything a server process is configured with.
struct server_config {
  server_options server;                                      ///< `[server]`
  std::map<std::string, pool_options, std::less<>> pools;     ///< `[pools.NAME]`, besides "default"
  std::map<std::string, endpoint_options, std::less<>> endpoints;  ///< `[endpoints.NAME]`
  event_bus_config events;                                    ///< `[events]`
  admin_options admin;                                        ///< `[admin]`
  log_options logging;                                        ///< `[logging]`
  discovery_config discovery;                                 ///< `[discovery]`
  auth_options auth;                                          ///< `[auth]`
  /// `[tls]`: certificate files and policy (the port and handshake limits are in `server`).
  /// The program makes the record layer from it (ringrpc::tls_context::server, ringrpc-tls).
  tls_options tls;
};

/// Reads a tokens file (auth_options::tokens_file). Throws config_error naming the file and
/// line (never the token) for an unreadable file or a malformed line.
std::vector<bearer_token> load_bearer_tokens(const std::string& path);
/// The same from text; `source` names it in errors.
std::vector<bearer_token> parse_bearer_tokens(std::string_view text, const std::string& source);

/// A configuration that cannot be used. what() is the whole message, one line:
/// `SOURCE:LINE: KEY: PROBLEM` (`SOURCE: KEY: PROBLEM` when there is no line, as for
/// command-line overrides).
class config_error : public std::runtime_error {
 public:
  config_error(std::string source, unsigned line, std::string key, const std::string& problem);
  const std::string& source() const noexcept { return _source; }  ///< file name or "command line"
  unsigned line() const noexcept { return _line; }                ///< 1-based; 0 when unknown
  const std::string& key() const noexcept { return _key; }        ///< full key, e.g. "server.handlers"

 private:
  std::string _source;
  unsigned _line;
  std::string _key;
};

/// Names the `[events.queues]` table may use (the queues the server creates). Empty: any name.
using event_queue_names = std::span<const std::string_view>;

/// Parses TOML text; keys it does not set keep their defaults. `source_name` is what errors call
/// the text (usually the file name). Throws config_error.
server_config parse_config(std::string_view toml_text, std::string_view source_name,
                           event_queue_names known_queues = {});

/// Maxima of products of knobs that are each in range (docs/configuration.md, "Limits of
/// products"): `handlers x handler_queue_size` (the default pool's queue, which the thread pool
/// caps at 2^24) and `readers x recv_buffers_per_reader (rounded up to 2^n) x recv_buffer_bytes`.
/// A thread count of 0 counts as the CPUs this process may run on.
inline constexpr std::uint64_t max_default_queue_slots = std::uint64_t{1} << 24;
inline constexpr std::uint64_t max_receive_buffer_bytes = std::uint64_t{4} << 30;

/// The largest configuration file load_config_file reads: 1 MiB.
inline constexpr std::size_t max_config_file_bytes = std::size_t{1} << 20;

/// Reads and parses the file at `path`, which must be a regular file of at most
/// max_config_file_bytes (devices such as /dev/zero and FIFOs are refused without reading, so a
/// bad path fails at once instead of hanging or exhausting memory). Throws config_error (also
/// when it cannot be opened or read).
server_config load_config_file(const std::string& path, event_queue_names known_queues = {});

/// One command-line override: full key and its value as typed, e.g. {"server.handlers", "8"},
/// {"server.host", "0.0.0.0"}, {"pools.slow.kind", "cached"}. Values need no TOML quoting;
/// they are converted to the key's type ("true"/"false" for booleans, decimal integers).
using config_override = std::pair<std::string, std::string>;

/// Sets each key in order, with the same checks as the file, then re-checks the references
/// between sections (endpoint pools, event queue names). All or nothing: on an error `cfg` is
/// unchanged.
/// Throws config_error with source "command line".
void apply_overrides(server_config& cfg, std::span<const config_override> overrides,
                     event_queue_names known_queues = {});
/// Splits "KEY=VALUE" (a generic `--set KEY=VALUE` flag); throws config_error without '='.
config_override parse_override(std::string_view key_equals_value);

/// Checks a config built or changed in code: every range and cross-reference the file is held
/// to. Throws config_error with source "configuration" (and no line).
void validate(const server_config& cfg, event_queue_names known_queues = {});

enum class config_text_format { toml, json };
/// The config in effect as text: TOML that parse_config accepts and gives back `cfg`, or JSON
/// with the same structure (for /status).
std::string describe(const server_config& cfg, config_text_format format = config_text_format::toml);

}  // namespace ringrpc

RINGRPC_API_END

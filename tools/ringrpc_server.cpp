// ringrpc-server: the ringrpc server with the built-in echo, sleep and burn methods, configured
// from a TOML file (--config) and/or flags; flags override the file.
//
// Exit status (docs/operations.md, "Signals and exit codes"): 0 stopped by SIGINT/SIGTERM after
// a full drain (also --help, --version); 1 a failure after start-up; 2 any start-up failure
// (usage, an unusable configuration, a port in use, io_uring unavailable, out of memory), always
// as one line on stderr prefixed "ringrpc-server: "; 3 a second SIGINT/SIGTERM cut the drain short.

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_conventions.hpp"
#include "large_buffers.hpp"
#include "open_files.hpp"
#include "log/event_log.hpp"
#include "log/log.hpp"
#include "ops/config_ineffective.hpp"
#include "server/builtin_methods.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/event_bus.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/reflection.hpp"
#include "ringrpc/server.hpp"
#ifdef RINGRPC_HAVE_DISCOVERY
#include "ringrpc/discovery.hpp"
#endif
#include "ringrpc/tls.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_startup = 2;
constexpr int exit_forced = 3;

constexpr const char* exit_codes_help =
    "Signals: SIGINT/SIGTERM stop accepting, drain and exit 0; a second one during the drain\n"
    "exits 3 at once. SIGHUP re-reads --config and applies [logging] (level, format, file);\n"
    "other changes wait for a restart; it also re-reads the TLS certificates and the tokens\n"
    "files named at start, RPC and admin (a bad file keeps what is in effect). SIGPIPE is ignored.\n"
    "Exit status: 0 drained after SIGINT/SIGTERM (or --help, --version); 1 failed after\n"
    "start-up; 2 start-up failed (usage, configuration, bind, io_uring, memory; one line on\n"
    "stderr; CLI11's own codes such as 105 and 109 are reported as 2);\n"
    "3 a second SIGINT/SIGTERM cut the drain short.";

// The built-in methods: untyped (raw bytes in and out), so reflection lists them beside the
// typed services instead of handing out a schema.
struct builtin_method {
  const char* name;
  const char* doc;
};
constexpr builtin_method builtin_methods[] = {
    {"echo", "replies with the payload"},
    {"sleep", "payload: ASCII decimal microseconds; sleeps, then replies with the payload"},
    {"burn", "payload: ASCII decimal microseconds; spins the CPU, then replies with the payload"},
    {"mirror", "replies with the payload; request metadata comes back as response headers, trailer 'pairs'"},
    {"fail", "payload: status number [space details]; answers that error status with those details"},
};

// The built-in stream methods (src/server/builtin_streams.cpp), listed with their kind so that
// ringrpc-call knows how to open them.
struct builtin_stream {
  const char* name;
  const char* streaming;  // "server", "client" or "bidi", as reflection lists a kind
  const char* doc;
};
constexpr builtin_stream builtin_streams[] = {
    {"generate", "server", "payload: \"N BYTES\"; sends N messages of BYTES bytes ('x') each, then ends"},
    {"echo_stream", "bidi", "sends every message back, in order; ends when the client half-closes"},
};

/// The "reflection" endpoint of the stock server: reflection.list answers what add_reflection's
/// would for no typed service, plus an "untyped" array with the built-in methods, which
/// ringrpc-call lists and calls with raw bytes (a stream method with its "streaming" kind);
/// reflection.schema has no schema to hand out.
class builtin_reflection final : public ringrpc::endpoint {
 public:
  builtin_reflection() {
    auto doc = nlohmann::json::parse(ringrpc::reflection_list_json({}));
    doc["untyped"] = nlohmann::json::array();
    for (const auto& m : builtin_methods) {
      doc["untyped"].push_back({{"method", m.name}, {"request", "bytes"}, {"reply", "bytes"}, {"doc", m.doc}});
    }
    for (const auto& m : builtin_streams) {
      doc["untyped"].push_back(
          {{"method", m.name}, {"request", "bytes"}, {"reply", "bytes"}, {"streaming", m.streaming}, {"doc", m.doc}});
    }
    _list = doc.dump();
  }

  void receive_and_reply(ringrpc::call_context& call) override {
    if (call.method() == ringrpc::reflection_list_method) {
      call.reply(_list);
    } else if (call.method() == ringrpc::reflection_schema_method) {
      call.fail(ringrpc::status::bad_request,
                "ringrpc-server serves no typed service; its methods echo, sleep and burn take raw bytes "
                "(ringrpc-call HOST:PORT call echo -d hello)");
    } else {
      call.fail(ringrpc::status::unknown_method, "reflection has reflection.list and reflection.schema");
    }
  }

 private:
  std::string _list;
};

/// The endpoints ringrpc-server registers, for warnings about [endpoints.NAME] tables.
std::vector<std::string> registered_endpoints() {
  std::vector<std::string> out;
  for (const auto& m : builtin_methods) out.emplace_back(m.name);
  for (const auto& m : builtin_streams) out.emplace_back(m.name);
  out.emplace_back(ringrpc::reflection_endpoint_name);
  return out;
}

/// A default configuration as --config's keys, for the help's defaults. Not inlined into main:
/// there GCC 12 -O3 warns of a maybe-uninitialized string inside the temporary configuration.
[[gnu::noinline]] nlohmann::json default_config_json() {
  const ringrpc::server_config defaults;
  return nlohmann::json::parse(ringrpc::describe(defaults, ringrpc::config_text_format::json));
}

/// `[default: X]` for a flag: the value of its key in a default configuration, as --config
/// would print it, so the help cannot drift from the defaults.
std::string default_of(const nlohmann::json& defaults, const std::string& key) {
  const auto dot = key.find('.');
  const auto section = key.substr(0, dot);
  const auto name = key.substr(dot + 1);
  if (!defaults.contains(section) || !defaults[section].contains(name)) return {};
  const auto& v = defaults[section][name];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

/// A flag that, when given, overrides one configuration key.
struct flag_override {
  std::string key;
  std::optional<std::string> value;
};

/// What the configuration is made of, kept so SIGHUP can make it again the same way.
struct config_sources {
  std::string file;
  std::vector<flag_override> flags;
  std::vector<std::string> sets;

  ringrpc::server_config load() const {
    ringrpc::server_config cfg;
    if (!file.empty()) cfg = ringrpc::load_config_file(file);
    std::vector<ringrpc::config_override> overrides;
    for (const auto& f : flags) {
      if (!f.value) continue;
      overrides.emplace_back(f.key, *f.value);
      if (f.key.starts_with("admin.")) overrides.emplace_back("admin.enabled", "true");
    }
    for (const auto& s : sets) overrides.push_back(ringrpc::parse_override(s));
    ringrpc::apply_overrides(cfg, overrides);
    return cfg;
  }
};

/// Log lines written while the server starts, kept until it is known whether it did.
/// A thread the start launched (discovery registration, a reader) may log after replay():
/// it took the old sink before configure() swapped it, so a line that arrives late is
/// written through at once rather than kept in a list nobody reads again.
class held_lines {
 public:
  void add(std::string_view line) {
    std::lock_guard lock(_mu);
    if (_replayed) {
      write(line);
    } else if (_lines.size() < 1000) {
      _lines.emplace_back(line);
    }
  }
  /// Writes them where the log goes: stderr, or the end of `file`.
  void replay(const std::string& file) {
    std::lock_guard lock(_mu);
    _replayed = true;
    _file = file;
    for (const auto& l : _lines) write(l);
    _lines.clear();
  }

 private:
  void write(std::string_view line) {
    FILE* out = _file.empty() ? stderr : std::fopen(_file.c_str(), "ae");
    if (out == nullptr) return;
    std::fprintf(out, "%.*s\n", static_cast<int>(line.size()), line.data());
    if (out != stderr) std::fclose(out);
  }

  std::mutex _mu;
  bool _replayed = false;
  std::string _file;
  std::vector<std::string> _lines;
};

// An exception's message on one line: start-up failures are one line each, whatever threw.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

int startup_failure(const std::string& what) {
  std::fprintf(stderr, "ringrpc-server: %s\n", one_line(what).c_str());
  return exit_startup;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal";
  }
}

// The top-level sections whose text differs: what a reload found changed.
std::vector<std::string> changed_sections(const ringrpc::server_config& a, const ringrpc::server_config& b) {
  const auto ja = nlohmann::json::parse(ringrpc::describe(a, ringrpc::config_text_format::json));
  const auto jb = nlohmann::json::parse(ringrpc::describe(b, ringrpc::config_text_format::json));
  std::vector<std::string> out;
  for (const auto& [name, value] : ja.items()) {
    if (!jb.contains(name) || jb[name] != value) out.push_back(name);
  }
  return out;
}

/// SIGHUP: the file is read again with the same flags on top. Only [logging] is applied live
/// (log::configure replaces level, format and destination whole, which also reopens a rotated
/// log file); every other section is read by the server once, at start.
class reloader {
 public:
  reloader(ringrpc::server& srv, const config_sources& sources, ringrpc::server_config in_effect)
      : _srv(srv), _sources(sources), _cfg(std::move(in_effect)),
        _subscribed(ringrpc::log::logged_event_kinds(_cfg.logging.level)) {}

  void reload() noexcept {
    namespace log = ringrpc::log;
    if (_sources.file.empty()) {
      log::info("sighup", {{"msg", "no --config file: nothing to reload"}});
      return;
    }
    try {
      ringrpc::server_config next = _sources.load();
      std::string waiting;
      for (const auto& s : changed_sections(_cfg, next)) {
        if (s == "logging") continue;
        if (!waiting.empty()) waiting += ",";
        waiting += s;
      }
      log::configure(next.logging);
      // The server subscribed its log listener to the kinds of the start-up level; a lower
      // level needs the kinds it adds, and only those (a kind in two listeners logs twice).
      ringrpc::event_kind_set extra;
      const ringrpc::event_kind_set wanted = log::logged_event_kinds(next.logging.level);
      for (std::size_t i = 0; i < ringrpc::event_kind_count; ++i) {
        const auto k = static_cast<ringrpc::event_kind>(i);
        if (wanted.contains(k) && !_subscribed.contains(k)) {
          extra.add(k);
          _subscribed.add(k);
        }
      }
      if (!extra.empty()) _srv.events().subscribe("log", log::make_event_log_listener(), extra);
      _cfg.logging = next.logging;
      log::info("config_reloaded", {{"file", _sources.file},
                                    {"level", ringrpc::to_string(next.logging.level)},
                                    {"applied", "logging"},
                                    {"restart_needed_for", waiting.empty() ? std::string_view("none") : waiting}});
    } catch (const std::exception& e) {
      log::warn("config_reload_failed", {{"file", _sources.file}, {"msg", one_line(e.what())}, {"kept", "the configuration in effect"}});
    }
  }

 private:
  ringrpc::server& _srv;
  const config_sources& _sources;
  ringrpc::server_config _cfg;
  ringrpc::event_kind_set _subscribed;
};

/// One flag that overrides one configuration key. This table is the flags' one definition:
/// --help lists them in its order, with the kind of value and the key's default.
struct flag_spec {
  const char* names;
  const char* key;
  const char* type;  // shown in --help; `switch_type` (`switch_off_type`): a bare switch that sets the key true (false)
  const char* help;
};
constexpr const char* switch_type = "";
constexpr const char* switch_off_type = "-";

constexpr flag_spec flag_table[] = {
    {"--host", "server.host", "HOST", "address to bind [server.host]"},
    {"-p,--port", "server.port", "PORT", "port; 0 picks a free one [server.port]"},
    {"--readers", "server.readers", "N", "reader rings; 0 = one per usable CPU [server.readers]"},
    {"--handlers", "server.handlers", "N", "threads of the default pool; 0 = one per usable CPU [server.handlers]"},
    {"--handler-queue-size", "server.handler_queue_size", "N",
     "default pool queue slots per thread [server.handler_queue_size]"},
    {"--max-frame-bytes", "server.max_frame_bytes", "BYTES", "largest accepted frame body [server.max_frame_bytes]"},
    {"--backlog", "server.backlog", "N", "listen backlog [server.backlog]"},
    {"--drain-timeout-ms", "server.drain_timeout_ms", "MS",
     "how long a stop waits for accepted calls [server.drain_timeout_ms]"},
    {"--dispatch", "server.default_policy", "POLICY",
     "where the built-in methods run: all, direct, message, execution, connection "
     "(docs/execution.md) [server.default_policy]"},
    {"--idle-timeout-ms", "server.idle_timeout_ms", "MS",
     "close connections idle this long; 0 = never [server.idle_timeout_ms]"},
    {"--max-connections", "server.max_connections", "N",
     "connections open at once; 0 = RLIMIT_NOFILE less 64 (ringrpc-server raises its soft "
     "limit to the hard one at start) [server.max_connections]"},
    {"--slow-call-us", "server.slow_call_threshold_us", "US",
     "log calls running longer; 0 = off [server.slow_call_threshold_us]"},
    {"--metrics", "server.metrics", "BOOL", "per-call metrics: true or false [server.metrics]"},
    {"--no-grpc", "server.grpc", switch_off_type,
     "the port speaks ringrpc frames only: no gRPC clients (docs/grpc.md) [server.grpc]"},
    {"--admin-host", "admin.host", "HOST", "address of the status pages [admin.host]"},
    {"--admin-port", "admin.port", "PORT", "serve /metrics, /status, ... on this port (0 picks one) [admin.port]"},
    {"--log-level", "logging.level", "LEVEL", "trace, debug, info, warn, error, critical, off [logging.level]"},
    {"--max-buffered-bytes", "server.max_buffered_bytes", "BYTES",
     "memory budget for what peers make the server hold; 0 = a quarter of the memory the "
     "process may use [server.max_buffered_bytes]"},
    {"--write-stall-timeout-ms", "server.write_stall_timeout_ms", "MS",
     "close connections that read nothing while replies wait; 0 = never [server.write_stall_timeout_ms]"},
    {"--frame-stall-timeout-ms", "server.frame_stall_timeout_ms", "MS",
     "close connections whose partial frame gets no byte this long; 0 = never "
     "[server.frame_stall_timeout_ms]"},
    {"--tokens-file", "auth.tokens_file", "FILE",
     "accept only calls carrying 'authorization: Bearer TOKEN' for a TOKEN of this file of "
     "'SUBJECT TOKEN' lines (docs/security.md) [auth.tokens_file]"},
    {"--max-metadata-entries", "server.max_metadata_entries", "N",
     "metadata pairs a call may carry [server.max_metadata_entries]"},
    {"--max-metadata-bytes", "server.max_metadata_bytes", "BYTES",
     "bytes of metadata keys and values a call may carry [server.max_metadata_bytes]"},
    {"--tls-port", "tls.port", "PORT", "TLS listener beside the plaintext one (needs --tls-cert) [tls.port]"},
    {"--tls-cert", "tls.cert", "FILE", "PEM certificate chain of the TLS listener [tls.cert]"},
    {"--tls-key", "tls.key", "FILE", "PEM private key of --tls-cert [tls.key]"},
    {"--tls-ca", "tls.ca", "FILE", "PEM CAs that sign client certificates [tls.ca]"},
    {"--tls-require-client-cert", "tls.require_client_cert", "BOOL",
     "mutual TLS: refuse clients without a certificate from --tls-ca [tls.require_client_cert]"},
    {"--tls-min-version", "tls.min_version", "1.2|1.3", "lowest TLS version accepted [tls.min_version]"},
    {"--tls-ciphers", "tls.ciphers", "LIST", "TLS 1.2 cipher list, OpenSSL syntax; \"\" = OpenSSL's default [tls.ciphers]"},
    // A bare switch, as --admin-tls=false would read oddly beside the file's `tls = true`.
    {"--admin-tls", "admin.tls", switch_type,
     "serve the admin pages over TLS with --tls-cert/--tls-key (reloaded with them on SIGHUP) [admin.tls]"},
    {"--admin-tokens-file", "admin.tokens_file", "FILE",
     "admin pages but /healthz and /readyz need 'Authorization: Bearer TOKEN' for a TOKEN of "
     "this file (the --tokens-file format) [admin.tokens_file]"},
};

/// Every flag of flag_table, each writing its key's override in `sources`. Each shows its value's
/// kind and its default (admin.port's is 0, but only when given).
void add_flags(CLI::App& app, config_sources& sources) {
  const auto defaults = default_config_json();
  sources.flags.clear();
  sources.flags.reserve(std::size(flag_table));  // the callbacks keep references into it
  for (const auto& f : flag_table) sources.flags.push_back({f.key, std::nullopt});
  for (std::size_t i = 0; i < std::size(flag_table); ++i) {
    const flag_spec& f = flag_table[i];
    std::optional<std::string>& value = sources.flags[i].value;
    if (f.type == switch_type || f.type == switch_off_type) {
      const char* set = f.type == switch_type ? "true" : "false";
      app.add_flag_function(f.names, [&value, set](std::int64_t) { value = set; }, f.help);
      continue;
    }
    auto* o = app.add_option_function<std::string>(f.names, [&value](const std::string& v) { value = v; }, f.help);
    o->type_name(f.type);
    if (!std::string_view(f.key).starts_with("admin.")) o->default_str(default_of(defaults, f.key));
  }
}

/// Parses the command line into `sources`. A status to exit with at once (help, version, a
/// usage error), or nullopt to go on.
std::optional<int> parse_command_line(int argc, char** argv, config_sources& sources) {
  CLI::App app{"ringrpc-server: io_uring RPC server with built-in echo, sleep and burn methods.\n"
               "Prints 'listening on HOST:PORT' once ready.\n"
               "Every knob is a key of the --config file (docs/configuration.md); flags win."};
  app.footer(exit_codes_help);
  ringrpc::tools::set_name_and_version(app, "ringrpc-server");
  app.get_formatter()->column_width(34);
  app.add_option("-c,--config", sources.file, "TOML configuration file (a regular file of at most 1 MiB)")
      ->type_name("FILE");
  add_flags(app, sources);
  app.add_option("--set", sources.sets, "any configuration key, e.g. --set pools.slow.threads=4 (repeatable)")
      ->type_name("KEY=VALUE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line and status 2, like every start-up failure (not CLI11's own code).
    return startup_failure(std::string(e.what()) + " (see --help)");
  }
  return std::nullopt;
}

/// Blocks the stop and reload signals in every thread (the server's threads inherit the mask);
/// main waits for them synchronously, so no handler runs at an arbitrary point of a ring loop.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

#ifdef RINGRPC_HAVE_TLS
using tls_handle = std::shared_ptr<ringrpc::tls_context>;
#else
using tls_handle = std::nullptr_t;
#endif

/// The TLS listener's certificates, checked before anything starts: a missing, unreadable,
/// expired or mismatched one is a start-up failure naming the file. The failure's text, or
/// nullopt.
std::optional<std::string> set_up_tls(ringrpc::server_config& cfg, tls_handle& tls) {
#ifdef RINGRPC_HAVE_TLS
  if (cfg.tls.enabled()) {
    try {
      tls = ringrpc::tls_context::server(cfg.tls);
    } catch (const std::exception& e) {
      return one_line(e.what());
    }
    cfg.server.tls = tls;
  }
#else
  (void)tls;
  if (cfg.tls.enabled()) return "TLS: this ringrpc-server was built without TLS (meson -Dtls=enabled)";
#endif
  if (!cfg.tls.enabled() && (!cfg.tls.key_file.empty() || !cfg.tls.ca_file.empty() || cfg.server.tls_port != 0)) {
    return "TLS: tls.key, tls.ca and tls.port need tls.cert (--tls-cert)";
  }
  return std::nullopt;
}

/// Makes, fills and starts the server. A failed start is one line: the server's own lines of a
/// start it then undoes (server_stopping, server_stopped) are held back until start() has
/// succeeded, and dropped if it has not. The failure's text, or nullopt.
std::optional<std::string> start_server(const ringrpc::server_config& cfg, std::unique_ptr<ringrpc::server>& srv) {
  auto held = std::make_shared<held_lines>();
  auto drop_held = [&] { ringrpc::log::configure(cfg.logging, [](std::string_view) {}); };
  try {
    srv = ringrpc::make_server(cfg);  // configures the log (a log file that cannot be opened fails here)
    ringrpc::log::configure(cfg.logging, [held](std::string_view line) { held->add(line); });
    ringrpc::add_builtin_methods(*srv);
    ringrpc::detail::add_response_metadata_methods(*srv);
    ringrpc::detail::add_stream_methods(*srv);
    srv->register_endpoint(ringrpc::reflection_endpoint_name, std::make_shared<builtin_reflection>());
    if (!cfg.discovery.etcd.empty()) {
#ifdef RINGRPC_HAVE_DISCOVERY
      // Registers once listening; deregisters first when stopped (docs/deployment.md).
      srv->add_registration(std::make_shared<ringrpc::discovery::etcd_registration>(cfg.discovery, cfg.server.host));
#else
      throw ringrpc::config_error("configuration", 0, "discovery.etcd",
                                  "this ringrpc-server was built without the discovery library "
                                  "(meson -Ddiscovery=enabled, needs libcurl)");
#endif
    }
    ringrpc::config_detail::warn_ineffective(ringrpc::config_detail::unregistered_endpoint_keys(cfg, registered_endpoints()));
    srv->start();
    ringrpc::log::configure(cfg.logging);
    held->replay(cfg.logging.file);
    return std::nullopt;
  } catch (const std::bad_alloc&) {
    drop_held();
    return "cannot start: out of memory: the configuration asks for more than this process may "
           "allocate (see server.handlers x server.handler_queue_size, pools.*.queue, [events] "
           "capacities and receive buffers in docs/configuration.md)";
  } catch (const ringrpc::config_error& e) {
    drop_held();
    return e.what();
  } catch (const std::system_error& e) {
    drop_held();
    std::string what = std::string("cannot start: ") + e.what();
    if (e.code() == std::errc::resource_unavailable_try_again || e.code() == std::errc::not_enough_memory) {
      what += " (out of memory or threads: lower server.readers, server.handlers or pool threads, "
              "or raise the process's limits)";
    }
    return what;
  } catch (const std::exception& e) {
    drop_held();
    return std::string("cannot start: ") + e.what();
  }
}

/// The lines scripts wait for: where the server listens (an IPv6 literal gets brackets, so the
/// line is a HOST:PORT a client can be given as it is), its TLS listener and its admin pages.
void announce(const ringrpc::server_config& cfg, ringrpc::server& srv, const tls_handle& tls) {
  const bool v6 = cfg.server.host.find(':') != std::string::npos;
  std::printf(v6 ? "listening on [%s]:%u\n" : "listening on %s:%u\n", cfg.server.host.c_str(),
              static_cast<unsigned>(srv.port()));
#ifdef RINGRPC_HAVE_TLS
  if (tls) {
    std::printf(v6 ? "tls listening on [%s]:%u\n" : "tls listening on %s:%u\n", cfg.server.host.c_str(),
                static_cast<unsigned>(srv.tls_port()));
    ringrpc::log::info("tls_listening", {{"port", std::to_string(srv.tls_port())},
                                         {"record_layer", std::string(tls->name())},
                                         {"certificate", tls->certificate_summary()},
                                         {"client_certificates", cfg.tls.require_client_cert ? "required" : "optional"}});
  }
#else
  (void)tls;
#endif
  if (cfg.admin.enabled) {
    const bool admin_v6 = cfg.admin.host.find(':') != std::string::npos;
    std::printf(admin_v6 ? "admin on %s://[%s]:%u/\n" : "admin on %s://%s:%u/\n", cfg.admin.tls ? "https" : "http",
                cfg.admin.host.c_str(), static_cast<unsigned>(ringrpc::admin_port(srv)));
  }
  std::fflush(stdout);
}

/// SIGHUP's re-reads beside the configuration file's: the tokens files named at start (RPC and
/// admin) and the TLS certificate. Each bad file keeps what is in effect; connections stay open.
void reload_secrets(const ringrpc::server_config& cfg, ringrpc::server& srv, const tls_handle& tls) {
  namespace log = ringrpc::log;
  if (!cfg.auth.tokens_file.empty()) {
    try {
      std::vector<ringrpc::bearer_token> tokens = cfg.server.bearer_tokens;
      for (auto& t : ringrpc::load_bearer_tokens(cfg.auth.tokens_file)) tokens.push_back(std::move(t));
      const std::size_t n = tokens.size();
      srv.replace_bearer_tokens(std::move(tokens));
      log::info("tokens_reloaded", {{"file", cfg.auth.tokens_file}, {"tokens", std::to_string(n)}});
    } catch (const std::exception& e) {
      log::error("tokens_reload_failed", {{"file", cfg.auth.tokens_file}, {"msg", one_line(e.what())}, {"kept", "the tokens in effect"}});
    }
  }
  if (cfg.admin.enabled && !cfg.admin.tokens_file.empty()) {
    // An empty file keeps the tokens in effect too (it never opens the pages).
    try {
      std::vector<ringrpc::bearer_token> tokens = ringrpc::load_bearer_tokens(cfg.admin.tokens_file);
      const std::size_t n = tokens.size();
      ringrpc::replace_admin_tokens(srv, std::move(tokens));
      log::info("admin_tokens_reloaded", {{"file", cfg.admin.tokens_file}, {"tokens", std::to_string(n)}});
    } catch (const std::exception& e) {
      log::error("admin_tokens_reload_failed", {{"file", cfg.admin.tokens_file}, {"msg", one_line(e.what())}, {"kept", "the tokens in effect"}});
    }
  }
#ifdef RINGRPC_HAVE_TLS
  if (tls) {
    // A renewed certificate: new handshakes get it, connections already open keep theirs.
    try {
      tls->reload();
      log::info("tls_reloaded", {{"certificate", tls->certificate_summary()}});
    } catch (const std::exception& e) {
      log::warn("tls_reload_failed", {{"msg", one_line(e.what())}, {"kept", tls->certificate_summary()}});
    }
  }
#else
  (void)tls;
#endif
}

/// Stops the server on the signal that asked for it, and reports. stop() blocks this thread for
/// up to the drain timeout; another thread keeps listening, so an operator who does not want to
/// wait can say so again (exit 3 at once).
int stop_server(ringrpc::server& srv, const sigset_t& signals, int sig) {
  std::atomic<bool> stopped{false};
  std::thread watcher([&signals, &stopped] {
    const timespec tick{0, 100'000'000};
    while (!stopped.load()) {
      const int s = sigtimedwait(&signals, nullptr, &tick);
      if (s < 0) continue;  // EAGAIN (tick) or EINTR
      if (s == SIGHUP) {
        ringrpc::log::info("sighup", {{"msg", "ignored: the server is stopping"}});
        continue;
      }
      std::fprintf(stderr,
                   "ringrpc-server: second %s during the drain: exiting now (status %d); calls in "
                   "flight are not answered\n",
                   signal_name(s), exit_forced);
      ringrpc::log::flush();
      std::fflush(stdout);
      std::fflush(stderr);
      // _exit: the server's threads are mid-drain; running destructors now would wait for them.
      ::_exit(exit_forced);
    }
  });
  int rc = exit_ok;
  try {
    srv.stop();
    const auto s = srv.stats();
    std::fprintf(stderr,
                 "ringrpc-server: stopped on %s: %llu connections, %llu calls, %llu busy, "
                 "%llu bad frames\n",
                 signal_name(sig), static_cast<unsigned long long>(s[ringrpc::server_counter::connections_accepted]),
                 static_cast<unsigned long long>(s[ringrpc::server_counter::calls_received]),
                 static_cast<unsigned long long>(s[ringrpc::server_counter::calls_rejected_busy]),
                 static_cast<unsigned long long>(s[ringrpc::server_counter::bad_frames]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", one_line(e.what()).c_str());
    rc = exit_failure;
  }
  stopped.store(true);
  watcher.join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Writing to a pipe whose reader went away (stderr piped into a logger that died) must fail
  // that write, not kill the server.
  ::signal(SIGPIPE, SIG_IGN);
  // Before the configuration: max_connections' default follows the limit.
  ringrpc::tools::raise_open_file_limit();
  ringrpc::tools::keep_large_buffers();  // large calls without a page fault per page (large_buffers.hpp)

  config_sources sources;
  if (const auto rc = parse_command_line(argc, argv, sources)) return *rc;
  ringrpc::server_config cfg;
  try {
    cfg = sources.load();
  } catch (const std::exception& e) {
    return startup_failure(e.what());
  }
  const sigset_t signals = block_signals();
  tls_handle tls{};
  if (const auto failure = set_up_tls(cfg, tls)) return startup_failure(*failure);
  std::unique_ptr<ringrpc::server> srv;
  if (const auto failure = start_server(cfg, srv)) return startup_failure(*failure);
  announce(cfg, *srv, tls);

  reloader hup(*srv, sources, cfg);
  int sig = 0;
  for (;;) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    hup.reload();
    reload_secrets(cfg, *srv, tls);
  }
  return stop_server(*srv, signals, sig);
}

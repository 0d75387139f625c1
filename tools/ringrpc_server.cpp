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

/// The "reflection" endpoint of the stock server: reflection.list answers what add_reflection's
/// would for no typed service, plus an "untyped" array with the built-in methods, which
/// ringrpc-call lists and calls with raw bytes; reflection.schema has no schema to hand out.
class builtin_reflection final : public ringrpc::endpoint {
 public:
  builtin_reflection() {
    auto doc = nlohmann::json::parse(ringrpc::reflection_list_json({}));
    doc["untyped"] = nlohmann::json::array();
    for (const auto& m : builtin_methods) {
      doc["untyped"].push_back({{"method", m.name}, {"request", "bytes"}, {"reply", "bytes"}, {"doc", m.doc}});
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

}  // namespace

int main(int argc, char** argv) {
  // Writing to a pipe whose reader went away (stderr piped into a logger that died) must fail
  // that write, not kill the server.
  ::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"ringrpc-server: io_uring RPC server with built-in echo, sleep and burn methods.\n"
               "Prints 'listening on HOST:PORT' once ready.\n"
               "Every knob is a key of the --config file (docs/configuration.md); flags win."};
  app.footer(exit_codes_help);
  ringrpc::tools::set_name_and_version(app, "ringrpc-server");
  app.get_formatter()->column_width(34);
  config_sources sources;
  app.add_option("-c,--config", sources.file,
                 "TOML configuration file (a regular file of at most 1 MiB)")
      ->type_name("FILE");
  sources.flags = {
      {"server.host", {}},          {"server.port", {}},
      {"server.readers", {}},       {"server.handlers", {}},
      {"server.handler_queue_size", {}}, {"server.max_frame_bytes", {}},
      {"server.backlog", {}},       {"server.drain_timeout_ms", {}},
      {"server.default_policy", {}}, {"server.idle_timeout_ms", {}},
      {"server.max_connections", {}}, {"server.slow_call_threshold_us", {}},
      {"server.metrics", {}},       {"admin.host", {}},
      {"admin.port", {}},           {"logging.level", {}},
      {"server.max_buffered_bytes", {}}, {"server.write_stall_timeout_ms", {}},
      {"server.frame_stall_timeout_ms", {}},
      {"auth.tokens_file", {}},     {"server.max_metadata_entries", {}},
      {"server.max_metadata_bytes", {}},
      {"tls.port", {}},             {"tls.cert", {}},
      {"tls.key", {}},              {"tls.ca", {}},
      {"tls.require_client_cert", {}}, {"tls.min_version", {}},
      {"tls.ciphers", {}},
      {"admin.tls", {}},            {"admin.tokens_file", {}},
  };
  auto& flags = sources.flags;
  const auto defaults = default_config_json();
  // Each flag shows its value's kind and its default (admin.port's is 0, but only when given).
  auto flag = [&](const char* names, std::size_t i, const char* help) {
    const std::string& key = flags[i].key;
    std::string type = "N";
    if (key.ends_with("host")) type = "HOST";
    else if (key.ends_with("port")) type = "PORT";
    else if (key.ends_with("_ms")) type = "MS";
    else if (key.ends_with("_us")) type = "US";
    else if (key.ends_with("bytes")) type = "BYTES";
    else if (key == "server.default_policy") type = "POLICY";
    else if (key == "server.metrics") type = "BOOL";
    else if (key == "logging.level") type = "LEVEL";
    else if (key.ends_with("_file")) type = "FILE";
    else if (key == "tls.cert" || key == "tls.key" || key == "tls.ca") type = "FILE";
    else if (key == "tls.require_client_cert") type = "BOOL";
    else if (key == "tls.min_version") type = "1.2|1.3";
    else if (key == "tls.ciphers") type = "LIST";
    auto* o = app.add_option_function<std::string>(names, [&flags, i](const std::string& v) { flags[i].value = v; },
                                                   help);
    o->type_name(type);
    if (!key.starts_with("admin.")) o->default_str(default_of(defaults, key));
  };
  flag("--host", 0, "address to bind [server.host]");
  flag("-p,--port", 1, "port; 0 picks a free one [server.port]");
  flag("--readers", 2, "reader rings; 0 = one per usable CPU [server.readers]");
  flag("--handlers", 3, "threads of the default pool; 0 = one per usable CPU [server.handlers]");
  flag("--handler-queue-size", 4, "default pool queue slots per thread [server.handler_queue_size]");
  flag("--max-frame-bytes", 5, "largest accepted frame body [server.max_frame_bytes]");
  flag("--backlog", 6, "listen backlog [server.backlog]");
  flag("--drain-timeout-ms", 7, "how long a stop waits for accepted calls [server.drain_timeout_ms]");
  flag("--dispatch", 8,
       "where the built-in methods run: all, direct, message, execution, connection "
       "(docs/execution.md) [server.default_policy]");
  flag("--idle-timeout-ms", 9, "close connections idle this long; 0 = never [server.idle_timeout_ms]");
  flag("--max-connections", 10,
       "connections open at once; 0 = RLIMIT_NOFILE less 64 [server.max_connections]");
  flag("--slow-call-us", 11, "log calls running longer; 0 = off [server.slow_call_threshold_us]");
  flag("--metrics", 12, "per-call metrics: true or false [server.metrics]");
  flag("--admin-host", 13, "address of the status pages [admin.host]");
  flag("--admin-port", 14, "serve /metrics, /status, ... on this port (0 picks one) [admin.port]");
  flag("--log-level", 15, "trace, debug, info, warn, error, critical, off [logging.level]");
  flag("--max-buffered-bytes", 16,
       "memory budget for what peers make the server hold; 0 = a quarter of the memory the "
       "process may use [server.max_buffered_bytes]");
  flag("--write-stall-timeout-ms", 17,
       "close connections that read nothing while replies wait; 0 = never [server.write_stall_timeout_ms]");
  flag("--frame-stall-timeout-ms", 18,
       "close connections whose partial frame gets no byte this long; 0 = never "
       "[server.frame_stall_timeout_ms]");
  flag("--tokens-file", 19,
       "accept only calls carrying 'authorization: Bearer TOKEN' for a TOKEN of this file of "
       "'SUBJECT TOKEN' lines (docs/security.md) [auth.tokens_file]");
  flag("--max-metadata-entries", 20, "metadata pairs a call may carry [server.max_metadata_entries]");
  flag("--max-metadata-bytes", 21, "bytes of metadata keys and values a call may carry [server.max_metadata_bytes]");
  flag("--tls-port", 22, "TLS listener beside the plaintext one (needs --tls-cert) [tls.port]");
  flag("--tls-cert", 23, "PEM certificate chain of the TLS listener [tls.cert]");
  flag("--tls-key", 24, "PEM private key of --tls-cert [tls.key]");
  flag("--tls-ca", 25, "PEM CAs that sign client certificates [tls.ca]");
  flag("--tls-require-client-cert", 26, "mutual TLS: refuse clients without a certificate from --tls-ca [tls.require_client_cert]");
  flag("--tls-min-version", 27, "lowest TLS version accepted [tls.min_version]");
  flag("--tls-ciphers", 28, "TLS 1.2 cipher list, OpenSSL syntax; \"\" = OpenSSL's default [tls.ciphers]");
  // A bare switch, as --admin-tls=false would read oddly beside the file's `tls = true`.
  app.add_flag_function("--admin-tls", [&flags](std::int64_t) { flags[29].value = "true"; },
                        "serve the admin pages over TLS with --tls-cert/--tls-key (reloaded with them "
                        "on SIGHUP) [admin.tls]");
  flag("--admin-tokens-file", 30,
       "admin pages but /healthz and /readyz need 'Authorization: Bearer TOKEN' for a TOKEN of "
       "this file (the --tokens-file format) [admin.tokens_file]");
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

  ringrpc::server_config cfg;
  try {
    cfg = sources.load();
  } catch (const std::exception& e) {
    return startup_failure(e.what());
  }

  // Block the signals in every thread (the server's threads inherit the mask); main waits for
  // them synchronously below, so no handler runs at an arbitrary point of a ring loop.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The TLS listener's certificates are checked before anything starts: a missing, unreadable,
  // expired or mismatched one is a start-up failure naming the file.
#ifdef RINGRPC_HAVE_TLS
  std::shared_ptr<ringrpc::tls_context> tls;
  if (cfg.tls.enabled()) {
    try {
      tls = ringrpc::tls_context::server(cfg.tls);
    } catch (const std::exception& e) {
      return startup_failure(one_line(e.what()));
    }
    cfg.server.tls = tls;
  }
#else
  if (cfg.tls.enabled()) return startup_failure("TLS: this ringrpc-server was built without TLS (meson -Dtls=enabled)");
#endif
  if (!cfg.tls.enabled() && (!cfg.tls.key_file.empty() || !cfg.tls.ca_file.empty() || cfg.server.tls_port != 0)) {
    return startup_failure("TLS: tls.key, tls.ca and tls.port need tls.cert (--tls-cert)");
  }

  std::unique_ptr<ringrpc::server> srv;
  // A failed start is one line: the server's own lines of a start it then undoes
  // (server_stopping, server_stopped) are held back until start() has succeeded, and dropped
  // if it has not.
  auto held = std::make_shared<held_lines>();
  try {
    srv = ringrpc::make_server(cfg);  // configures the log (a log file that cannot be opened fails here)
    ringrpc::log::configure(cfg.logging, [held](std::string_view line) { held->add(line); });
    ringrpc::add_builtin_methods(*srv);
    ringrpc::detail::add_response_metadata_methods(*srv);
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
  } catch (const std::bad_alloc&) {
    ringrpc::log::configure(cfg.logging, [](std::string_view) {});
    return startup_failure(
        "cannot start: out of memory: the configuration asks for more than this process may "
        "allocate (see server.handlers x server.handler_queue_size, pools.*.queue, [events] "
        "capacities and receive buffers in docs/configuration.md)");
  } catch (const ringrpc::config_error& e) {
    ringrpc::log::configure(cfg.logging, [](std::string_view) {});
    return startup_failure(e.what());
  } catch (const std::system_error& e) {
    ringrpc::log::configure(cfg.logging, [](std::string_view) {});
    std::string what = std::string("cannot start: ") + e.what();
    if (e.code() == std::errc::resource_unavailable_try_again || e.code() == std::errc::not_enough_memory) {
      what += " (out of memory or threads: lower server.readers, server.handlers or pool threads, "
              "or raise the process's limits)";
    }
    return startup_failure(what);
  } catch (const std::exception& e) {
    ringrpc::log::configure(cfg.logging, [](std::string_view) {});
    return startup_failure(std::string("cannot start: ") + e.what());
  }
  // An IPv6 literal gets brackets, so the line is a HOST:PORT a client can be given as it is.
  const bool v6 = cfg.server.host.find(':') != std::string::npos;
  std::printf(v6 ? "listening on [%s]:%u\n" : "listening on %s:%u\n", cfg.server.host.c_str(),
              static_cast<unsigned>(srv->port()));
#ifdef RINGRPC_HAVE_TLS
  if (tls) {
    std::printf(v6 ? "tls listening on [%s]:%u\n" : "tls listening on %s:%u\n", cfg.server.host.c_str(),
                static_cast<unsigned>(srv->tls_port()));
    ringrpc::log::info("tls_listening", {{"port", std::to_string(srv->tls_port())},
                                         {"record_layer", std::string(tls->name())},
                                         {"certificate", tls->certificate_summary()},
                                         {"client_certificates", cfg.tls.require_client_cert ? "required" : "optional"}});
  }
#endif
  if (cfg.admin.enabled) {
    const bool admin_v6 = cfg.admin.host.find(':') != std::string::npos;
    std::printf(admin_v6 ? "admin on %s://[%s]:%u/\n" : "admin on %s://%s:%u/\n", cfg.admin.tls ? "https" : "http",
                cfg.admin.host.c_str(), static_cast<unsigned>(ringrpc::admin_port(*srv)));
  }
  std::fflush(stdout);

  reloader hup(*srv, sources, cfg);
  int sig = 0;
  for (;;) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    hup.reload();
    if (!cfg.auth.tokens_file.empty()) {
      // The tokens file named at start, read again (a token added or revoked): calls checked
      // from now on use it, connections stay open; a bad or empty file keeps the tokens in effect.
      try {
        std::vector<ringrpc::bearer_token> tokens = cfg.server.bearer_tokens;
        for (auto& t : ringrpc::load_bearer_tokens(cfg.auth.tokens_file)) tokens.push_back(std::move(t));
        const std::size_t n = tokens.size();
        srv->replace_bearer_tokens(std::move(tokens));
        ringrpc::log::info("tokens_reloaded", {{"file", cfg.auth.tokens_file}, {"tokens", std::to_string(n)}});
      } catch (const std::exception& e) {
        ringrpc::log::error("tokens_reload_failed", {{"file", cfg.auth.tokens_file}, {"msg", one_line(e.what())}, {"kept", "the tokens in effect"}});
      }
    }
    if (cfg.admin.enabled && !cfg.admin.tokens_file.empty()) {
      // Likewise the admin pages' tokens; an empty file keeps them too (never opens the pages).
      try {
        std::vector<ringrpc::bearer_token> tokens = ringrpc::load_bearer_tokens(cfg.admin.tokens_file);
        const std::size_t n = tokens.size();
        ringrpc::replace_admin_tokens(*srv, std::move(tokens));
        ringrpc::log::info("admin_tokens_reloaded", {{"file", cfg.admin.tokens_file}, {"tokens", std::to_string(n)}});
      } catch (const std::exception& e) {
        ringrpc::log::error("admin_tokens_reload_failed", {{"file", cfg.admin.tokens_file}, {"msg", one_line(e.what())}, {"kept", "the tokens in effect"}});
      }
    }
#ifdef RINGRPC_HAVE_TLS
    if (tls) {
      // The same files, read again (a renewed certificate): new handshakes get it, connections
      // already open keep theirs; a bad file keeps the certificate in effect.
      try {
        tls->reload();
        ringrpc::log::info("tls_reloaded", {{"certificate", tls->certificate_summary()}});
      } catch (const std::exception& e) {
        ringrpc::log::warn("tls_reload_failed", {{"msg", one_line(e.what())}, {"kept", tls->certificate_summary()}});
      }
    }
#endif
  }

  // stop() blocks this thread for up to the drain timeout; another thread keeps listening, so
  // an operator who does not want to wait can say so again.
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
    srv->stop();
    const auto s = srv->stats();
    std::fprintf(stderr,
                 "ringrpc-server: stopped on %s: %llu connections, %llu calls, %llu busy, "
                 "%llu bad frames\n",
                 signal_name(sig), static_cast<unsigned long long>(s.connections_accepted),
                 static_cast<unsigned long long>(s.calls_received),
                 static_cast<unsigned long long>(s.calls_rejected_busy),
                 static_cast<unsigned long long>(s.bad_frames));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", one_line(e.what()).c_str());
    rc = exit_failure;
  }
  stopped.store(true);
  watcher.join();
  return rc;
}

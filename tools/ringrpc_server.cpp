// ringrpc-server: the ringrpc server with the built-in echo, sleep and burn methods, configured
// from a TOML file (--config) and/or flags; flags override the file.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "ringrpc/config.hpp"
#include "ringrpc/server.hpp"

namespace {

/// A flag that, when given, overrides one configuration key.
struct flag_override {
  std::string key;
  std::optional<std::string> value;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringrpc-server: io_uring RPC server with built-in echo, sleep and burn methods.\n"
               "Prints 'listening on HOST:PORT' once ready; SIGINT/SIGTERM drain and exit 0.\n"
               "Every knob is a key of the --config file (docs/configuration.md); flags win."};
  std::string config_file;
  app.add_option("-c,--config", config_file, "TOML configuration file")->check(CLI::ExistingFile);
  std::vector<flag_override> flags = {
      {"server.host", {}},          {"server.port", {}},
      {"server.readers", {}},       {"server.handlers", {}},
      {"server.handler_queue_size", {}}, {"server.max_frame_bytes", {}},
      {"server.backlog", {}},       {"server.drain_timeout_ms", {}},
      {"server.default_policy", {}}, {"server.idle_timeout_ms", {}},
      {"server.max_connections", {}}, {"server.slow_call_threshold_us", {}},
      {"server.metrics", {}},       {"admin.host", {}},
      {"admin.port", {}},           {"logging.level", {}},
  };
  auto flag = [&](const char* names, std::size_t i, const char* help) {
    app.add_option_function<std::string>(names, [&flags, i](const std::string& v) { flags[i].value = v; }, help);
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
  flag("--max-connections", 10, "connections open at once; 0 = no limit [server.max_connections]");
  flag("--slow-call-us", 11, "log calls running longer; 0 = off [server.slow_call_threshold_us]");
  flag("--metrics", 12, "per-call metrics: true or false [server.metrics]");
  flag("--admin-host", 13, "address of the status pages [admin.host]");
  flag("--admin-port", 14, "serve /metrics, /status, ... on this port (0 picks one) [admin.port]");
  flag("--log-level", 15, "trace, debug, info, warn, error, critical, off [logging.level]");
  std::vector<std::string> sets;
  app.add_option("--set", sets, "KEY=VALUE: any configuration key, e.g. --set pools.slow.threads=4");
  CLI11_PARSE(app, argc, argv);

  ringrpc::server_config cfg;
  try {
    if (!config_file.empty()) cfg = ringrpc::load_config_file(config_file);
    std::vector<ringrpc::config_override> overrides;
    for (const auto& f : flags) {
      if (!f.value) continue;
      overrides.emplace_back(f.key, *f.value);
      if (f.key == "admin.port" || f.key == "admin.host") overrides.emplace_back("admin.enabled", "true");
    }
    for (const auto& s : sets) overrides.push_back(ringrpc::parse_override(s));
    ringrpc::apply_overrides(cfg, overrides);
  } catch (const ringrpc::config_error& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", e.what());
    return 2;
  }

  // Block the stop signals in every thread; main waits for them synchronously below, so no
  // handler runs at an arbitrary point of a ring loop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    ringrpc::server srv(cfg);
    ringrpc::add_builtin_methods(srv);
    srv.start();
    std::printf("listening on %s:%u\n", cfg.server.host.c_str(), static_cast<unsigned>(srv.port()));
    if (cfg.admin.enabled) {
      std::printf("admin on http://%s:%u/\n", cfg.admin.host.c_str(), static_cast<unsigned>(srv.admin_port()));
    }
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    srv.stop();
    const auto s = srv.stats();
    std::fprintf(stderr,
                 "ringrpc-server: stopped on signal %d: %llu connections, %llu calls, %llu busy, "
                 "%llu bad frames\n",
                 sig, static_cast<unsigned long long>(s.connections_accepted),
                 static_cast<unsigned long long>(s.calls_received),
                 static_cast<unsigned long long>(s.calls_rejected_busy),
                 static_cast<unsigned long long>(s.bad_frames));
  } catch (const ringrpc::config_error& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", e.what());
    return 1;
  }
  return 0;
}

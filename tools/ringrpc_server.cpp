// ringrpc-server: the ringrpc server with the built-in echo, sleep and burn methods.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>

#include "ringrpc/server.hpp"

int main(int argc, char** argv) {
  ringrpc::server_options o;
  CLI::App app{"ringrpc-server: io_uring RPC server with built-in echo, sleep and burn methods.\n"
               "Prints 'listening on HOST:PORT' once ready; SIGINT/SIGTERM drain and exit 0."};
  app.add_option("--host", o.host, "address to bind")->capture_default_str();
  app.add_option("-p,--port", o.port, "port; 0 picks a free one")->capture_default_str();
  app.add_option("--readers", o.readers, "reader rings; 0 = one per usable CPU")->capture_default_str();
  app.add_option("--handlers", o.handlers, "handler threads; 0 = one per usable CPU")
      ->capture_default_str();
  app.add_option("--handler-queue-size", o.handler_queue_size,
                 "call queue slots per handler (queue = handlers x this)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-frame-bytes", o.max_frame_bytes, "largest accepted frame body")
      ->capture_default_str()
      ->check(CLI::Range(16u, 1u << 30));
  app.add_option("--backlog", o.backlog, "listen backlog")->capture_default_str();
  std::int64_t drain_ms = o.drain_timeout.count();
  app.add_option("--drain-timeout-ms", drain_ms, "how long a stop waits for accepted calls")
      ->capture_default_str();
  std::string dispatch = "all";
  app.add_option("--dispatch", dispatch,
                 "where the built-in methods run: all (handler pool), direct (reader thread), "
                 "message, execution, connection; see docs/execution.md")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "direct", "message", "execution", "connection"}));
  CLI11_PARSE(app, argc, argv);
  o.drain_timeout = std::chrono::milliseconds(drain_ms);
  ringrpc::parse_dispatch_policy(dispatch, o.default_policy);

  // Block the stop signals in every thread; main waits for them synchronously below, so no
  // handler runs at an arbitrary point of a ring loop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    ringrpc::server srv(o);
    ringrpc::add_builtin_methods(srv);
    srv.start();
    std::printf("listening on %s:%u\n", o.host.c_str(), static_cast<unsigned>(srv.port()));
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-server: %s\n", e.what());
    return 1;
  }
  return 0;
}

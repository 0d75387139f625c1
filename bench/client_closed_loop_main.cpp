// Closed-loop throughput of the ringrpc *client library* (not ringrpc-load's own engine):
//   client_closed_loop                     against an in-process server on a free port
//   client_closed_loop HOST PORT [CONNS DEPTH SECONDS]
// Prints calls/s and latency percentiles; compare with ringrpc-load on the same server to see
// what the client library costs.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "closed_loop.hpp"
#include "ringrpc/server.hpp"

int main(int argc, char** argv) {
  ringrpc::tools::closed_loop_config cfg;
  std::unique_ptr<ringrpc::server> local;
  if (argc >= 3) {
    cfg.host = argv[1];
    cfg.port = static_cast<std::uint16_t>(std::atoi(argv[2]));
  } else {
    local = std::make_unique<ringrpc::server>();
    ringrpc::add_builtin_methods(*local);
    local->start();
    cfg.port = local->port();
  }
  if (argc >= 4) cfg.connections = static_cast<unsigned>(std::atoi(argv[3]));
  if (argc >= 5) cfg.depth = static_cast<unsigned>(std::atoi(argv[4]));
  cfg.duration = std::chrono::milliseconds(argc >= 6 ? std::atoi(argv[5]) * 1000 : 5000);
  const auto r = ringrpc::tools::run_closed_loop(cfg);
  std::printf("client library closed loop: %u connections x depth %u: %.0f calls/s, p50 %.1f us, "
              "p99 %.1f us, errors %zu kinds\n",
              cfg.connections, cfg.depth, r.calls_per_sec(),
              static_cast<double>(r.latency_ns.value_at_percentile(50)) / 1000.0,
              static_cast<double>(r.latency_ns.value_at_percentile(99)) / 1000.0, r.errors.size());
  return 0;
}

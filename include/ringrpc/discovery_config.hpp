#pragma once
/// \file `[discovery]` of the configuration file: how a server registers in etcd. Its own
/// header so that both the configuration (libringrpc_ops, ringrpc/config.hpp) and the discovery
/// library (ringrpc/discovery.hpp) use it without depending on each other.

#include <chrono>
#include <cstdint>
#include <string>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// `[discovery]`: registration of this server in etcd (docs/deployment.md has the key layout).
/// Used by ringrpc-server when built with the discovery library (-Ddiscovery=enabled); an
/// embedder passes it to ringrpc::discovery::etcd_registration (ringrpc/discovery.hpp).
struct discovery_config {
  std::string etcd;                        ///< etcd client URL, e.g. "http://127.0.0.1:2379"; empty = off
  std::string service;                     ///< service name: letters, digits, '_', '-', '.'
  std::string advertise;                   ///< HOST:PORT clients dial; empty = server host:port
  std::uint32_t weight = 1;                ///< relative share of calls (recorded; see deployment.md)
  std::string zone;                        ///< free text, e.g. "eu-west-1a"
  std::string version;                     ///< free text, e.g. the build's version
  bool tls = false;                        ///< whether clients must speak TLS to this member
  std::string prefix = "/ringrpc/services";  ///< key prefix; keys are PREFIX/SERVICE/HOST:PORT
  std::chrono::seconds lease_ttl{10};      ///< the lease's TTL; kept alive every third of it
  /// After deregistering and before the phased stop: how long the server keeps serving while
  /// clients' watches remove it.
  std::chrono::milliseconds deregister_grace{2000};
};

}  // namespace ringrpc

RINGRPC_API_END

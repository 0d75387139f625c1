#pragma once
// The downstreams a server's on-shard handlers call (ringrpc/downstream.hpp): what
// add_downstream() recorded before start(). Read-only once the server runs; each shard keeps
// its own connection to each of them (shard_downstreams.hpp).

#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "ringrpc/downstream.hpp"
#include "server/server_attachment.hpp"

namespace ringrpc::detail {

class server_core;

struct downstream_spec {
  std::string name;
  std::string target;  // "host:port" as given, for messages
  sockaddr_storage address{};
  socklen_t address_bytes = 0;
  downstream_options options;
  unsigned index = 0;  // among its server's downstreams: the slot each shard keeps for it
  const server_core* core = nullptr;
};

/// Held by the server as an attachment (it lives and dies with the server).
class downstream_registry final : public server_attachment {
 public:
  void start() override {}
  void stop() noexcept override {}
  std::vector<std::unique_ptr<downstream_spec>> specs;
};

/// What a downstream handle points to.
struct downstream_access {
  static const downstream_spec* spec(const downstream& d) noexcept {
    return static_cast<const downstream_spec*>(d._spec);
  }
};

}  // namespace ringrpc::detail

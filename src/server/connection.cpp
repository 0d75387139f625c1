#include "server/connection.hpp"

#include <unistd.h>

#include "server/reader.hpp"

namespace ringrpc::detail {

connection::~connection() {
  // Here, not when the connection finishes: calls still in flight count against the share.
  if (shared_by_address != nullptr) shared_by_address->release(peer_host);
  ::close(fd);
  owner->connection_destroyed();
}

}  // namespace ringrpc::detail

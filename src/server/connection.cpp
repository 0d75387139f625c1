#include "server/connection.hpp"

#include <unistd.h>

#include "server/shard.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

connection::~connection() {
  // Here, not when the connection finishes: calls still in flight count against the share.
  if (share != &own_share) {
    try {
      owner->core().callers().release(address.host());
    } catch (const std::bad_alloc&) {
      // No memory to name the address: its share's entry stays (its counts are already back).
    }
  }
  delete rare.load(std::memory_order_relaxed);
  ::close(fd);
  owner->connection_destroyed();
}

}  // namespace ringrpc::detail

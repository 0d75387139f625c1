#include "server/connection.hpp"

#include <unistd.h>

#include "server/reader.hpp"

namespace ringrpc::detail {

connection::~connection() {
  ::close(fd);
  owner->connection_destroyed();
}

}  // namespace ringrpc::detail

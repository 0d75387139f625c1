#include "uring/ring_turn.hpp"

#include <cstdio>
#include <cstring>
#include <exception>

namespace ringrpc::detail {

void terminate_on_fatal::operator()(int rc) const noexcept {
  if (index >= 0) {
    std::fprintf(stderr, "ringrpc: %s %d: io_uring_enter failed: %s\n", who, index, std::strerror(-rc));
  } else {
    std::fprintf(stderr, "ringrpc: %s: io_uring_enter failed: %s\n", who, std::strerror(-rc));
  }
  std::terminate();
}

}  // namespace ringrpc::detail

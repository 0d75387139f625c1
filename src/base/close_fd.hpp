#pragma once
// Closing a descriptor a struct owns: the field is left at -1, so closing twice is harmless and
// a later look at it sees that nothing is open.
#include <unistd.h>

namespace ringrpc::detail {

/// Closes `fd` if it is open and sets it to -1.
inline void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace ringrpc::detail

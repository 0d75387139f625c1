#include "parking.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ringrpc::detail {

// std::atomic::wait exists in C++20, but libstdc++ routes it through a shared table of waiter
// counts and may spin first; the raw futex keeps the cost predictable and visible.
void parking::wait(std::uint32_t epoch) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&_epoch), FUTEX_WAIT_PRIVATE, epoch, nullptr,
          nullptr, 0);
  _waiters.fetch_sub(1, std::memory_order_relaxed);
}

void parking::futex_wake(int n) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&_epoch), FUTEX_WAKE_PRIVATE, n, nullptr,
          nullptr, 0);
}

}  // namespace ringrpc::detail

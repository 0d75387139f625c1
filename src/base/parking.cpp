#include "base/parking.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace ringrpc::detail {

// std::atomic::wait exists in C++20, but libstdc++ routes it through a shared table of waiter
// counts and may spin first; the raw futex keeps the cost predictable and visible.
void parking::wait(std::uint32_t epoch) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&_epoch), FUTEX_WAIT_PRIVATE, epoch, nullptr,
          nullptr, 0);
  _waiters.fetch_sub(1, std::memory_order_relaxed);
}

bool parking::wait_for(std::uint32_t epoch, std::chrono::nanoseconds timeout) noexcept {
  const auto ns = timeout.count() > 0 ? timeout.count() : 0;
  // FUTEX_WAIT takes a relative timeout measured on CLOCK_MONOTONIC.
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  const long rc = syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&_epoch), FUTEX_WAIT_PRIVATE,
                          epoch, &ts, nullptr, 0);
  const bool timed_out = rc != 0 && errno == ETIMEDOUT;
  _waiters.fetch_sub(1, std::memory_order_relaxed);
  return !timed_out;
}

void parking::futex_wake(int n) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&_epoch), FUTEX_WAKE_PRIVATE, n, nullptr,
          nullptr, 0);
}

}  // namespace ringrpc::detail

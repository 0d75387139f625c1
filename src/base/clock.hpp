#pragma once
// The pipeline's one clock: steady-clock nanoseconds (queue time, deadlines, timeouts), and its
// coarse twin for checks whose thresholds are milliseconds anyway (a few ns instead of ~27 ns
// a read here; the resolution is the kernel tick).

#include <time.h>

#include <chrono>
#include <cstdint>

namespace ringrpc::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline std::int64_t coarse_now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// A reading of now_ns() as a std::chrono time point (for what the public API reports).
inline std::chrono::steady_clock::time_point steady_time_at(std::int64_t ns) noexcept {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace ringrpc::detail

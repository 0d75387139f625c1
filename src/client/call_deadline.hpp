#pragma once
// A client call's deadline from its options, its connection's default and its parent call,
// without overflow: no deadline stays "none" (never max() added to now), a budget beyond
// 10^15 us means none (as on the server, shard_frames.cpp), a negative one has passed already.

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "base/cancel_hub.hpp"
#include "base/clock.hpp"

namespace ringrpc::detail {

struct call_deadline {
  static constexpr std::int64_t max_budget_us = 1'000'000'000'000'000;
  std::int64_t at_ns = 0;  ///< steady clock; 0 = none
  std::int64_t now = 0;    ///< when it was computed (0 when there is no deadline)
  bool expired = false;    ///< passed already: refuse the call unsent

  /// `timeout` zero takes `fallback` (the connection's default, or a sync call's); `parent`
  /// (may be null) caps it with the parent call's deadline.
  static call_deadline of(std::chrono::microseconds timeout, std::chrono::microseconds fallback,
                          const cancel_hub* parent) noexcept {
    call_deadline d;
    const std::int64_t us = timeout.count() != 0 ? timeout.count() : fallback.count();
    if (us < 0) {
      d.expired = true;
      return d;
    }
    const std::int64_t inherited = parent != nullptr ? parent->deadline_ns() : 0;
    if ((us == 0 || us > max_budget_us) && inherited == 0) return d;
    d.now = now_ns();
    if (us > 0 && us <= max_budget_us) d.at_ns = d.now + us * 1000;  // <= 10^18: fits
    if (inherited != 0 && (d.at_ns == 0 || inherited < d.at_ns)) d.at_ns = inherited;
    d.expired = d.at_ns <= d.now;
    return d;
  }

  /// The budget the frame carries (the server counts from its receipt): at least 1 us.
  std::uint64_t wire_timeout_us() const noexcept {
    if (at_ns == 0) return 0;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(1, (at_ns - now + 999) / 1000));
  }
};

}  // namespace ringrpc::detail

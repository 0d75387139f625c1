#pragma once
// The channel's retry budget, after gRPC's retry throttling (gRFC A6): tokens start at max;
// each failed attempt takes one, each success gives back `ratio`; retries are allowed only
// while more than half of max remains. So when most calls fail (a fleet-wide outage) retries
// stop instead of multiplying the load, and they resume as successes refill the budget.
// Milli-tokens in one atomic; a success writes it only when the budget is not full, so a
// healthy channel's calls do not contend on it.

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ringrpc::detail {

class retry_budget {
 public:
  retry_budget(double max_tokens, double ratio) noexcept
      : _max(static_cast<std::int64_t>(max_tokens * 1000)), _ratio(static_cast<std::int64_t>(ratio * 1000)),
        _tokens(_max) {}

  void on_success() noexcept {
    std::int64_t cur = _tokens.load(std::memory_order_relaxed);
    while (cur < _max) {
      if (_tokens.compare_exchange_weak(cur, std::min(_max, cur + _ratio), std::memory_order_relaxed)) return;
    }
  }
  void on_failure() noexcept {
    std::int64_t cur = _tokens.load(std::memory_order_relaxed);
    while (cur > 0) {
      if (_tokens.compare_exchange_weak(cur, std::max<std::int64_t>(0, cur - 1000), std::memory_order_relaxed)) return;
    }
  }
  bool retry_allowed() const noexcept { return _tokens.load(std::memory_order_relaxed) * 2 > _max; }
  double tokens() const noexcept { return static_cast<double>(_tokens.load(std::memory_order_relaxed)) / 1000; }

 private:
  std::int64_t _max;
  std::int64_t _ratio;
  std::atomic<std::int64_t> _tokens;
};

}  // namespace ringrpc::detail

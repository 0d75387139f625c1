#pragma once
// A token bucket for a peer's floods (rapid reset, empty frames, SETTINGS): `burst` tokens at
// first, refilled at `per_second`; each event takes one, and an event with none left is the
// flood. Owned by one connection's thread: no atomics.

#include <algorithm>
#include <cstdint>

namespace ringrpc::detail {

class token_bucket {
 public:
  token_bucket(unsigned burst, unsigned per_second) noexcept
      : _tokens(burst), _burst(burst), _per_second(per_second) {}

  /// Takes a token at `now_ns`; false when none is left.
  bool take(std::int64_t now_ns) noexcept {
    if (_refilled_ns != 0) {
      const double refill = static_cast<double>(now_ns - _refilled_ns) * 1e-9 * _per_second;
      _tokens = std::min<double>(_burst, _tokens + refill);
    }
    _refilled_ns = now_ns;
    if (_tokens < 1) return false;
    _tokens -= 1;
    return true;
  }

 private:
  double _tokens;
  std::int64_t _refilled_ns = 0;
  unsigned _burst;
  unsigned _per_second;
};

}  // namespace ringrpc::detail

#pragma once
// The balancing policies as pure functions over "how loaded is member i", so they are tested
// without connections (tests/channel/balancer_test.cpp). Per-thread state only: a call's pick
// writes no shared memory.

#include <cstddef>
#include <cstdint>

#include "ringrpc/channel.hpp"

namespace ringrpc::detail {

/// Per-thread pick state: a round-robin cursor and a xorshift generator.
struct pick_state {
  std::uint64_t cursor = 0;
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::uint64_t next_random() noexcept {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

/// Index in [0, n) of the member a call goes to; n > 0. `load(i)` is member i's calls in
/// flight. Ties between equally loaded members rotate, so least_outstanding does not pile
/// onto the first member when every load is zero.
template <class Load>
std::size_t pick_member(balancing_policy policy, std::size_t n, const Load& load, pick_state& st) noexcept {
  if (n == 1) return 0;
  switch (policy) {
    case balancing_policy::round_robin:
      return static_cast<std::size_t>(st.cursor++ % n);
    case balancing_policy::least_outstanding: {
      const std::size_t start = static_cast<std::size_t>(st.cursor++ % n);
      std::size_t best = start;
      std::uint64_t best_load = load(start);
      for (std::size_t k = 1; k < n && best_load > 0; ++k) {
        const std::size_t i = (start + k) % n;
        const std::uint64_t l = load(i);
        if (l < best_load) {
          best = i;
          best_load = l;
        }
      }
      return best;
    }
    case balancing_policy::power_of_two_choices: {
      const std::size_t a = static_cast<std::size_t>(st.next_random() % n);
      std::size_t b = static_cast<std::size_t>(st.next_random() % (n - 1));
      if (b >= a) ++b;  // two distinct members
      return load(b) < load(a) ? b : a;
    }
  }
  return 0;
}

}  // namespace ringrpc::detail

#pragma once
// What a fuzz target decides beside its input's bytes (slice boundaries, a handler's next step)
// comes from this PRNG seeded with a hash of the input, so every input replays the same way and
// the seeds in corpus/ stay plain wire bytes.

#include <cstddef>
#include <cstdint>

namespace ringrpc::fuzz {

/// splitmix64: small, good enough to spread choices.
struct prng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// In [0, n); 0 when n is 0.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
};

/// FNV-1a of the input: the PRNG's seed.
inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace ringrpc::fuzz

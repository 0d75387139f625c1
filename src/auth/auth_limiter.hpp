#pragma once
// Failed authentications per source address: a token bucket per address, spent by every token
// presented and not accepted. Once an address's bucket is empty, its calls carrying a token are
// refused without the token being looked at until the bucket has refilled by one, so guessing
// proceeds at the refill rate at most (docs/security.md, "Guessing tokens").
//
// Two parts, so a caller whose token is good pays no lock:
// - the buckets, an address-keyed table under a mutex, touched on failures only;
// - the blocked set, a fixed array of atomic words (address tag + blocked-until) that every
//   check reads with relaxed loads from one cache line and that only failures write.
// The table is capped (max_addresses); when it is full and nothing in it can be dropped, a
// failing address it has no room for is blocked at once for one refill interval instead of
// getting a bucket: the limiter fails closed, never open.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "log/event_log.hpp"
#include "ringrpc/server.hpp"
#include "base/peer_address.hpp"
#include "base/shared_internal.hpp"

namespace ringrpc::detail {

class RINGRPC_SHARED_INTERNAL auth_limiter {
 public:
  /// Addresses the table holds at most: under 100 bytes each with the map's node, so < 2 MB.
  static constexpr std::size_t default_max_addresses = 16384;

  /// `where` names the port in log lines ("rpc", "admin").
  auth_limiter(const auth_failure_limits& limits, const char* where,
               std::size_t max_addresses = default_max_addresses);

  bool enabled() const noexcept { return _burst != 0; }
  unsigned per_connection() const noexcept { return _per_connection; }

  /// Any thread, lock-free: 0 when `a` may have its token checked at `now_ns` (steady clock),
  /// else how many ms until it may (at least 1).
  std::uint32_t blocked_ms(const peer_address& a, std::int64_t now_ns) const noexcept;

  /// Any thread (takes the table's lock): a token from `a` was not accepted at `now_ns`.
  /// Returns how many ms `a` is now blocked for; 0 while its bucket still holds some.
  std::uint32_t note_failure(const peer_address& a, std::int64_t now_ns) noexcept;

  /// Addresses in the table now (tests; bounded by max_addresses).
  std::size_t tracked() const;

 private:
  struct key {
    std::array<std::uint8_t, 17> b{};  // family, then the address bytes; no port
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    std::uint64_t seed;
    std::size_t operator()(const key& k) const noexcept;
  };
  struct bucket {
    double tokens = 0;
    std::int64_t refilled_ns = 0;
  };
  static key key_of(const peer_address& a) noexcept;
  void refill(bucket& b, std::int64_t now_ns) const noexcept;
  std::uint64_t interval_ns() const noexcept;
  bool make_room(std::int64_t now_ns) noexcept;  // with _mu held
  void block(const key& k, std::int64_t until_ns) noexcept;
  void log_blocked(const peer_address& a, std::uint32_t ms, bool untracked) noexcept;

  // Blocked set: sets of 8 words, one cache line each. A word is a 32-bit tag of the address
  // (never 0: 0 is a free word) and, below it, when its block ends: the steady clock in ms,
  // modulo 2^32 (49 days; blocks last at most a minute, and an expired word is cleared by the
  // first check that finds it).
  static constexpr std::size_t set_count = 512;
  static constexpr std::size_t ways = 8;
  struct alignas(64) line {
    std::array<std::atomic<std::uint64_t>, ways> w{};
  };
  std::uint64_t tag_of(std::uint64_t hash) const noexcept;
  static std::uint32_t clock_ms(std::int64_t now_ns) noexcept;

  const unsigned _burst;
  const unsigned _per_minute;
  const unsigned _per_connection;
  const std::size_t _max_addresses;
  const char* const _where;
  const key_hash _hash;
  // Mutable: a check clears its own expired word (blocked_ms).
  mutable std::array<line, set_count> _blocked{};

  mutable std::mutex _mu;
  std::unordered_map<key, bucket, key_hash> _buckets;
  std::int64_t _next_prune_ns = 0;
  log::rate_limiter _log_lines{10};
};

}  // namespace ringrpc::detail

#include "auth/auth_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "base/clock.hpp"
#include "log/log.hpp"

namespace ringrpc::detail {

namespace {

std::uint64_t mix(std::uint64_t x) noexcept {
  // The finaliser of splitmix64: every input bit reaches every output bit.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t random_seed() noexcept {
  // Keyed per process, so nobody can pick addresses that share a tag with someone else's.
  try {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(now_ns());
  } catch (...) {
    return mix(static_cast<std::uint64_t>(now_ns()));
  }
}

}  // namespace

auth_limiter::auth_limiter(const auth_failure_limits& limits, const char* where, std::size_t max_addresses)
    : _burst(limits.burst),
      _per_minute(std::max(1u, limits.per_minute)),
      _per_connection(limits.per_connection),
      _max_addresses(std::max<std::size_t>(1, max_addresses)),
      _where(where),
      _hash{random_seed()},
      _buckets(16, _hash) {}

std::size_t auth_limiter::key_hash::operator()(const key& k) const noexcept {
  std::uint64_t a = 0, b = 0;
  std::memcpy(&a, k.b.data(), 8);
  std::memcpy(&b, k.b.data() + 8, 8);
  return mix(mix(a ^ seed) ^ b ^ (static_cast<std::uint64_t>(k.b[16]) << 56));
}

auth_limiter::key auth_limiter::key_of(const peer_address& a) noexcept {
  key k;
  k.b[0] = a.family;
  std::memcpy(k.b.data() + 1, a.bytes.data(), a.bytes.size());
  return k;
}

std::uint64_t auth_limiter::tag_of(std::uint64_t hash) const noexcept {
  const std::uint64_t t = hash >> 32;
  return t == 0 ? 1 : t;
}

std::uint32_t auth_limiter::clock_ms(std::int64_t now_ns) noexcept {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(now_ns) / 1'000'000u);
}

std::uint64_t auth_limiter::interval_ns() const noexcept { return 60'000'000'000ull / _per_minute; }

std::uint32_t auth_limiter::blocked_ms(const peer_address& a, std::int64_t now_ns) const noexcept {
  if (_burst == 0) return 0;
  const std::uint64_t h = _hash(key_of(a));
  const std::uint64_t tag = tag_of(h);
  auto& words = _blocked[h % set_count].w;
  const std::uint32_t now_ms = clock_ms(now_ns);
  for (auto& w : words) {
    std::uint64_t v = w.load(std::memory_order_relaxed);
    if ((v >> 32) != tag) continue;
    const auto left = static_cast<std::int32_t>(static_cast<std::uint32_t>(v) - now_ms);
    if (left > 0) return static_cast<std::uint32_t>(left);
    // Over: cleared once, by this address's own check (a stale word must not come back to life
    // when the clock wraps); a writer replacing it meanwhile wins.
    w.compare_exchange_strong(v, 0, std::memory_order_relaxed);
  }
  return 0;
}

void auth_limiter::block(const key& k, std::int64_t until_ns) noexcept {
  const std::uint64_t h = _hash(k);
  const std::uint64_t tag = tag_of(h);
  auto& words = _blocked[h % set_count].w;
  const std::uint32_t now_ms = clock_ms(now_ns());
  // This address's word, else a free or expired one, else the one whose block ends first:
  // an address pushed out is checked again, and its bucket (in the table) blocks it again.
  std::size_t pick = 0;
  std::int64_t pick_left = INT64_MAX;
  for (std::size_t i = 0; i < ways; ++i) {
    const std::uint64_t v = words[i].load(std::memory_order_relaxed);
    if ((v >> 32) == tag) {
      pick = i;
      break;
    }
    const std::int64_t left = v == 0 ? -1 : static_cast<std::int32_t>(static_cast<std::uint32_t>(v) - now_ms);
    if (left < pick_left) {
      pick = i;
      pick_left = left;
    }
  }
  // Rounded up: a check in the last partial millisecond must still be refused.
  const std::uint32_t until_ms = clock_ms(until_ns + 999'999);
  words[pick].store((tag << 32) | until_ms, std::memory_order_relaxed);
}

void auth_limiter::refill(bucket& b, std::int64_t now_ns) const noexcept {
  const double add = static_cast<double>(std::max<std::int64_t>(0, now_ns - b.refilled_ns)) /
                     static_cast<double>(interval_ns());
  b.tokens = std::min<double>(_burst, b.tokens + add);
  b.refilled_ns = now_ns;
}

bool auth_limiter::make_room(std::int64_t now_ns) noexcept {
  // A full bucket says nothing a fresh one would not: those go. At most once an interval, so a
  // full table of addresses still failing costs one scan an interval, not one a failure.
  if (now_ns >= _next_prune_ns) {
    _next_prune_ns = now_ns + static_cast<std::int64_t>(interval_ns());
    for (auto it = _buckets.begin(); it != _buckets.end();) {
      refill(it->second, now_ns);
      it = it->second.tokens >= _burst ? _buckets.erase(it) : std::next(it);
    }
  }
  return _buckets.size() < _max_addresses;
}

std::uint32_t auth_limiter::note_failure(const peer_address& a, std::int64_t now_ns) noexcept {
  if (_burst == 0) return 0;
  const key k = key_of(a);
  std::uint32_t ms = 0;
  bool untracked = false;
  {
    std::lock_guard lock(_mu);
    auto it = _buckets.find(k);
    if (it == _buckets.end() && make_room(now_ns)) {
      try {
        it = _buckets.emplace(k, bucket{static_cast<double>(_burst), now_ns}).first;
      } catch (const std::bad_alloc&) {
        it = _buckets.end();
      }
    }
    std::int64_t block_ns = 0;
    if (it == _buckets.end()) {
      // No room: blocked for one interval, as if its bucket were empty (fail closed).
      untracked = true;
      block_ns = static_cast<std::int64_t>(interval_ns());
    } else {
      bucket& b = it->second;
      refill(b, now_ns);
      // Never below 0: failures that raced past a block on other readers add no debt.
      b.tokens = std::max(0.0, b.tokens - 1);
      if (b.tokens < 1) block_ns = static_cast<std::int64_t>(std::ceil((1 - b.tokens) * static_cast<double>(interval_ns())));
    }
    if (block_ns == 0) return 0;
    block(k, now_ns + block_ns);
    ms = static_cast<std::uint32_t>((block_ns + 999'999) / 1'000'000);
  }
  log_blocked(a, ms, untracked);
  return ms;
}

void auth_limiter::log_blocked(const peer_address& a, std::uint32_t ms, bool untracked) noexcept {
  const auto d = _log_lines.admit();
  if (!d.write) return;
  try {
    log::warn("auth_failures_limited",
              {{"port", _where},
               {"peer", a.host()},
               {"blocked_ms", static_cast<std::int64_t>(ms)},
               {"burst", static_cast<std::int64_t>(_burst)},
               {"per_minute", static_cast<std::int64_t>(_per_minute)},
               {"suppressed_before", static_cast<std::int64_t>(d.suppressed_before)},
               {"msg", untracked ? "failed authentication from an address the full table has no room for; its "
                                   "tokens are refused unchecked for one interval"
                                 : "too many failed authentications from this address; its tokens are refused "
                                   "unchecked until its budget refills"}});
  } catch (...) {
    // No memory for the line: the counters still say it.
  }
}

std::size_t auth_limiter::tracked() const {
  std::lock_guard lock(_mu);
  return _buckets.size();
}

}  // namespace ringrpc::detail

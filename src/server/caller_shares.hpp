#pragma once
// Who a "caller" is for the fair share of the pools' queues (server_options::fair_share_by):
// each connection on its own, or every connection from one peer address together, so a host
// cannot get more than its share by opening more connections.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

/// What a call costs for the fair share: one unit per `cost_unit_ticks` (5 ms) of its
/// connection's recent handler time per call, and at least one (a call is a call, however
/// short). Handler time is measured by the reading the server takes anyway for its processing
/// time metrics: one call in 8 per worker, plus every call of a connection that is already
/// heavy (server_calls.cpp). The recent cost is kept per connection (connection::recent_cost,
/// in cost_tick_us ticks): with fair_share_by = address, each call weighs what its own
/// connection's calls cost.
constexpr std::uint32_t cost_unit_ticks = 50;
constexpr std::uint32_t max_call_units = 1'000;

/// Units a call of a connection whose recent calls took `recent` ticks each is charged.
inline std::uint32_t call_units(std::uint16_t recent) noexcept {
  return 1 + std::min<std::uint32_t>(max_call_units - 1, recent / cost_unit_ticks);
}

/// The recent cost per call after a call that took `sample_ns`: a moving average that moves a
/// quarter of the way (a connection that turns slow is heavy after a call or two), in ticks of
/// cost_tick_us, saturating at 6.5 s.
inline std::uint16_t next_recent_cost(std::uint16_t recent, std::int64_t sample_ns) noexcept {
  constexpr std::int64_t tick_ns = std::int64_t{cost_tick_us} * 1000;
  const std::int64_t sample = std::clamp<std::int64_t>(sample_ns / tick_ns, 0, UINT16_MAX);
  const std::int64_t r = recent;
  return static_cast<std::uint16_t>(r + (sample - r) / 4);
}

/// The counters the fair share reads per call. A connection has its own; connections from one
/// address share one from caller_shares. Only the connections of that caller touch it.
struct caller_share {
  std::atomic<std::uint32_t> units_in_flight{0};  // call_units of admitted calls not yet released
  /// Calls admitted over the share and not yet released: while any are, later calls of the
  /// caller follow them into the over-share queue, so its calls are not reordered.
  std::atomic<std::int32_t> over_share_pending{0};
};

/// Adds `delta` (wrapping: pass a negated value to subtract) to one of a share's counters and
/// returns what it held before. A connection's own share is written by its shard's thread
/// alone (its reader charges, its responder releases): a plain load and store, no locked
/// instruction on the call path. A share of every connection from one address is written by
/// several shards: an atomic add.
template <class T>
inline T add_to_share(std::atomic<T>& counter, std::type_identity_t<T> delta, bool own) noexcept {
  if (!own) return counter.fetch_add(delta, std::memory_order_relaxed);
  const T before = counter.load(std::memory_order_relaxed);
  counter.store(static_cast<T>(before + delta), std::memory_order_relaxed);
  return before;
}

/// The shares of callers keyed by address. Touched when a connection opens and when its last
/// reference goes (never per call), so one mutex is enough; any thread may call it.
class caller_shares {
 public:
  /// The share of `address`, created if need be; give it back with release().
  caller_share* acquire(const std::string& address) {
    std::lock_guard lock(_mu);
    entry& e = _by_address[address];
    ++e.refs;
    return &e.share;
  }
  void release(const std::string& address) noexcept {
    std::lock_guard lock(_mu);
    auto it = _by_address.find(address);
    if (it != _by_address.end() && --it->second.refs == 0) _by_address.erase(it);
  }
  std::size_t size() const {
    std::lock_guard lock(_mu);
    return _by_address.size();
  }

 private:
  struct entry {
    caller_share share;
    unsigned refs = 0;
  };
  mutable std::mutex _mu;
  std::unordered_map<std::string, entry> _by_address;  // nodes stay put: pointers stay valid
};

}  // namespace ringrpc::detail

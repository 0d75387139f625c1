#pragma once
// Who a "caller" is for the fair share of the pools' queues (server_options::fair_share_by):
// each connection on its own, or every connection from one peer address together, so a host
// cannot get more than its share by opening more connections.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ringrpc::detail {

/// The counters the fair share reads per call. A connection has its own; connections from one
/// address share one from caller_shares. Only the connections of that caller touch it.
struct caller_share {
  std::atomic<std::uint32_t> in_flight{0};  // admitted calls not yet released
  /// Calls admitted over the share and not yet released: while any are, later calls of the
  /// caller follow them into the over-share queue, so its calls are not reordered.
  std::atomic<std::int32_t> over_share_pending{0};
};

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

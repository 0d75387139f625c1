#pragma once
// Streams open per source address (server_options::max_streams_per_address): one host's
// connections together may not hold every stream slot of the server.

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ringrpc::detail {

/// One counter per source address, shared by that address's connections. A connection looks
/// its counter up once, at its first stream (a lock and a lookup then), and each stream holds
/// a reference until its end, so an open and an end cost one atomic each and the counter
/// outlives every stream that counts in it, even past its connection.
class address_streams {
 public:
  class count {
   public:
    /// A stream from this address wants in: false, and nothing taken, at `max`.
    bool take(unsigned max) noexcept {
      if (_open.fetch_add(1, std::memory_order_relaxed) < max) return true;
      _open.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    void give_back() noexcept { _open.fetch_sub(1, std::memory_order_relaxed); }
    unsigned open() const noexcept { return _open.load(std::memory_order_relaxed); }

   private:
    std::atomic<unsigned> _open{0};
  };

  /// The counter of `host` (an address without its port), made if need be. Throws bad_alloc.
  std::shared_ptr<count> of(const std::string& host);
  /// Streams open from `host` now (for tests and pages).
  unsigned open_from(const std::string& host) const;

 private:
  /// Drops the entries no connection or stream holds any more (caller holds _mu).
  void prune() noexcept;

  mutable std::mutex _mu;
  // Weak: an address's counter lives as long as a connection or stream of it holds it; the
  // table forgets dead ones when it has doubled since it last did (amortised, not per call).
  std::unordered_map<std::string, std::weak_ptr<count>> _by_host;
  std::size_t _prune_at = 64;
};

}  // namespace ringrpc::detail

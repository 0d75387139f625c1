#pragma once
// Limits per source address: connections open at once, the rate of new ones and TLS handshakes
// under way, so one host cannot take every max_connections slot nor every handshake slot.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringrpc::detail {

/// Touched once per accepted and once per closed connection, never per call, so one mutex is
/// cheap enough; any reader thread may call it.
class peer_limits {
 public:
  enum class verdict { admitted, too_many, too_fast };

  /// `max_open` 0: no cap per address. `rate_per_sec` 0: no rate limit; otherwise a token
  /// bucket per address refilled at that rate, holding at most `burst` connects.
  /// `max_handshakes` 0: TLS handshakes under way are not counted per address.
  peer_limits(unsigned max_open, unsigned rate_per_sec, unsigned burst, unsigned max_handshakes = 0) noexcept
      : _max_open(max_open), _rate(rate_per_sec), _burst(burst == 0 ? 1 : burst), _max_handshakes(max_handshakes) {}

  /// A connection from `address` (no port) wants in at `now_ns` (steady clock). On
  /// `admitted` the caller must release() it when the connection closes.
  verdict admit(const std::string& address, std::int64_t now_ns);
  void release(const std::string& address) noexcept;

  /// Connections open from `address` now (for tests and /connections).
  unsigned open_from(const std::string& address) const;

  /// A TLS handshake from `address` wants to start. `counted`: it holds one of the address's
  /// handshake slots, to be given back with end_handshake(); `uncounted`: let in without one
  /// (no cap, or the table is full); `refused`: the address has max_handshakes under way.
  enum class handshake_verdict { counted, uncounted, refused };
  handshake_verdict admit_handshake(const std::string& address, std::int64_t now_ns);
  void end_handshake(const std::string& address) noexcept;
  /// Handshakes under way from `address` (for tests).
  unsigned handshakes_from(const std::string& address) const;

 private:
  struct entry {
    unsigned open = 0;
    unsigned handshakes = 0;
    double tokens = 0;
    std::int64_t refilled_ns = 0;
  };
  void refill(entry& e, std::int64_t now_ns) const noexcept;
  void prune(std::int64_t now_ns) noexcept;
  /// The entry of `address`, made if need be; null if the table is full (caller holds _mu).
  entry* find_or_add(const std::string& address, std::int64_t now_ns);
  /// Drops `it` once nothing of it is counted any more and its bucket needs no memory.
  void erase_if_unused(std::unordered_map<std::string, entry>::iterator it) noexcept;

  // Addresses tracked at once. Past this, entries with nothing open and a full bucket are
  // dropped first; if none can be, new addresses are let in untracked (and counted as such
  // nowhere else: a flood of distinct addresses is max_connections' job, not this table's).
  static constexpr std::size_t max_entries = 65536;

  const unsigned _max_open;
  const unsigned _rate;
  const unsigned _burst;
  const unsigned _max_handshakes;
  mutable std::mutex _mu;
  std::unordered_map<std::string, entry> _by_address;
};

}  // namespace ringrpc::detail

#pragma once
// A connection's peer as 20 bytes of binary address, formatted only when someone reads it
// (events, /connections, limits): two std::strings of text cost 64 bytes on every idle
// connection.

#include <array>
#include <cstdint>
#include <string>
#include "base/shared_internal.hpp"

namespace ringrpc::detail {

struct RINGRPC_SHARED_INTERNAL peer_address {
  std::array<std::uint8_t, 16> bytes{};  // IPv4 in the first 4
  std::uint16_t port = 0;
  std::uint8_t family = 0;  // AF_INET, AF_INET6, or 0: unknown

  /// The peer of connected socket `fd` (family 0 if it cannot be read).
  static peer_address of_socket(int fd) noexcept;
  /// "1.2.3.4:80", "[::1]:80", or "unknown".
  std::string text() const;
  /// The address alone ("1.2.3.4", "::1"): what per-address limits and shares are kept for.
  /// Empty when unknown.
  std::string host() const;
};

}  // namespace ringrpc::detail

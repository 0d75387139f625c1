#pragma once
// "HOST:PORT" and "[V6]:PORT" as channel targets and registration values spell members.

#include <charconv>
#include <optional>
#include <string_view>

#include "ringrpc/channel.hpp"

namespace ringrpc::detail {

inline std::optional<member_address> parse_host_port(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return std::nullopt;
  std::string_view host = s.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt;  // a bare IPv6 literal is ambiguous: brackets needed
  }
  unsigned port = 0;
  const auto ps = s.substr(colon + 1);
  const auto [end, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), port);
  if (ec != std::errc() || end != ps.data() + ps.size() || port == 0 || port > 65535) return std::nullopt;
  member_address m;
  m.host = std::string(host);
  m.port = static_cast<std::uint16_t>(port);
  return m;
}

}  // namespace ringrpc::detail

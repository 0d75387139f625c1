#include "base/peer_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>

namespace ringrpc::detail {

peer_address peer_address::of_socket(int fd) noexcept {
  peer_address p;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return p;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    std::memcpy(p.bytes.data(), &a->sin_addr, 4);
    p.port = ntohs(a->sin_port);
    p.family = AF_INET;
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    std::memcpy(p.bytes.data(), &a->sin6_addr, 16);
    p.port = ntohs(a->sin6_port);
    p.family = AF_INET6;
  }
  return p;
}

std::string peer_address::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == 0 || ::inet_ntop(family, bytes.data(), buf, sizeof(buf)) == nullptr) return {};
  return buf;
}

std::string peer_address::text() const {
  const std::string h = host();
  if (h.empty()) return "unknown";
  char port_text[8];
  const auto end = std::to_chars(port_text, port_text + sizeof(port_text), port).ptr;
  std::string out;
  out.reserve(h.size() + 8);
  if (family == AF_INET6) out.append("[").append(h).append("]"); else out.append(h);
  out.append(":").append(port_text, end);
  return out;
}

}  // namespace ringrpc::detail

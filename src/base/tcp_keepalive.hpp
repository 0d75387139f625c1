#pragma once
// TCP keepalive for connections that may stay silent on purpose: an open stream (a
// subscription may say nothing for an hour) keeps its connection from ever counting as idle,
// so a peer that vanished without a FIN or RST (power lost, cable pulled, a NAT that forgot the
// flow) would hold it for good. The kernel's probes find such a peer with no frame of ours and
// no wakeup of our threads, and they work with every client of the protocol, whatever its
// language: a live peer's kernel answers them however quiet its program is.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>

namespace ringrpc::detail {

/// Probes after `idle` without traffic, then every `interval`, and fails the socket (the next
/// receive ends with ETIMEDOUT) after `count` unanswered: a dead peer is found within
/// idle + interval * count. Each time is taken in whole seconds within what Linux accepts
/// (1 to 32,767). False when the socket refused an option (not TCP); keepalive is then off.
inline bool enable_keepalive(int fd, std::chrono::seconds idle, std::chrono::seconds interval, int count) noexcept {
  const auto seconds = [](std::chrono::seconds t) {
    return static_cast<int>(t.count() < 1 ? 1 : t.count() > 32767 ? 32767 : t.count());
  };
  const int on = 1;
  const int idle_s = seconds(idle);
  const int interval_s = seconds(interval);
  // The timings first: a socket that refuses one is not left probing on the system's defaults.
  return ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) == 0 &&
         ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) == 0 &&
         ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) == 0 &&
         ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0;
}

}  // namespace ringrpc::detail

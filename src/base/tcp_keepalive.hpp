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
/// idle + interval * count. False when the socket refused an option (not TCP).
inline bool enable_keepalive(int fd, std::chrono::seconds idle, std::chrono::seconds interval, int count) noexcept {
  const int on = 1;
  const int idle_s = static_cast<int>(idle.count() > 0 ? idle.count() : 1);
  const int interval_s = static_cast<int>(interval.count() > 0 ? interval.count() : 1);
  return ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0 &&
         ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) == 0 &&
         ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) == 0 &&
         ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) == 0;
}

}  // namespace ringrpc::detail

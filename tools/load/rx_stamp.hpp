#pragma once
// When a reply arrived, from the kernel rather than from the loop that woke up for it.
//
// A loop turn that waits for several replies (wake_batch.hpp) reads the clock once after the
// wait; every reply it handles would then look as late as the last one. A socket with
// SO_TIMESTAMPNS instead carries, with each receive, the time its last segment reached the
// stack: one stamp per receive (replies sharing it share the stamp). The kernel stamps on
// CLOCK_REALTIME and the engine counts on CLOCK_MONOTONIC, so each turn notes the offset
// between the two, read side by side at its wake-up.
#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <span>

namespace ringrpc::load {

/// The msghdr that describes a multishot recvmsg's layout in each provided buffer: no address,
/// room for one timestamp message.
inline constexpr std::size_t rx_stamp_control_bytes = CMSG_SPACE(sizeof(timespec));

/// Converts the kernel's receive stamps of one loop turn to the loop's clock.
class rx_clock {
 public:
  /// At the turn's wake-up: the monotonic `now` and CLOCK_REALTIME read right after it.
  void wake(std::int64_t mono_now, std::int64_t real_now) noexcept {
    _now = mono_now;
    _offset = real_now - mono_now;
  }

  /// The monotonic time of a receive the kernel stamped `real_stamp` (0: no stamp, so `now`).
  /// Never later than the wake-up (a step of the wall clock must not make a reply arrive in
  /// the future); on_reply keeps it no earlier than the call's send.
  std::int64_t received(std::int64_t real_stamp) const noexcept {
    if (real_stamp == 0) return _now;
    return std::min(real_stamp - _offset, _now);
  }

  std::int64_t now() const noexcept { return _now; }

 private:
  std::int64_t _now = 0;
  std::int64_t _offset = 0;
};

/// A reply's latency: from `from` (its send, or its scheduled send) to the receive that
/// completed it, `received`; a receive stamped before the send (clocks read on different
/// CPUs, a wall-clock step) counts as arriving at the send. Never negative.
inline std::uint64_t reply_latency(std::int64_t from, std::int64_t sent, std::int64_t received) noexcept {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(std::max(received, sent) - from, 0));
}

/// One multishot recvmsg completion's buffer: its payload and the kernel's stamp (CLOCK_REALTIME
/// ns; 0 when the receive carried none).
struct stamped_bytes {
  std::span<const std::byte> payload;
  std::int64_t real_stamp = 0;
  bool valid = false;  ///< false: the buffer was shorter than its header
};

/// Reads a buffer laid out as struct io_uring_recvmsg_out, then `layout.msg_namelen` bytes of
/// address, `layout.msg_controllen` of control messages, then the payload.
inline stamped_bytes parse_recvmsg(std::byte* buffer, int length, msghdr& layout) noexcept {
  stamped_bytes out;
  io_uring_recvmsg_out* o = io_uring_recvmsg_validate(buffer, length, &layout);
  if (o == nullptr) return out;
  out.valid = true;
  out.payload = {static_cast<const std::byte*>(io_uring_recvmsg_payload(o, &layout)),
                 io_uring_recvmsg_payload_length(o, length, &layout)};
  for (cmsghdr* m = io_uring_recvmsg_cmsg_firsthdr(o, &layout); m != nullptr;
       m = io_uring_recvmsg_cmsg_nexthdr(o, &layout, m)) {
    if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_TIMESTAMPNS &&
        m->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
      timespec ts;
      std::copy_n(reinterpret_cast<const std::byte*>(CMSG_DATA(m)), sizeof ts, reinterpret_cast<std::byte*>(&ts));
      out.real_stamp = static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    }
  }
  return out;
}

}  // namespace ringrpc::load

#pragma once
// The receive side of a client connection on a ring: one multishot recv into provided buffers.
// The client runtime (client_loop) and ringrpc-load (tools/load/engine.cpp) both run it.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>

#include "uring/cqe_tag.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"

namespace ringrpc::detail {

/// Arms a multishot recv on `fd` whose completions carry `owner` in a `tag` tag (a ring whose
/// loop receives for more than one kind of owner names the others' op).
template <class Owner>
void arm_multishot_recv(ring& r, provided_buffers& buffers, int fd, Owner* owner, op tag = op::recv) noexcept {
  io_uring_sqe* sqe = r.get_sqe();
  buffers.prep_recv_multishot(sqe, fd);
  io_uring_sqe_set_data64(sqe, make_tag(tag, owner));
}

/// What a recv completion left of the request.
enum class recv_left {
  armed,  ///< more completions follow
  /// It ended but the stream goes on: re-arm. Either no buffer was free (-ENOBUFS; they come
  /// back at the commit), or the kernel stopped it after delivering these bytes because it
  /// could not post another completion (a full completion queue: thousands of connections
  /// answering in one burst). Neither loses a byte; the rest waits in the socket. (A recvmsg
  /// multishot's last completion carries its header even at the end of the stream: its caller
  /// tells that case by the empty payload.)
  rearm,
  ended,  ///< it ended: end of stream (res 0) or an error (res < 0)
};

/// Handles one completion: passes the bytes it carries to `on_bytes(std::span<const std::byte>)`
/// unless `discard` (a dead connection), then gives the buffer back (at the next commit).
template <class OnBytes>
recv_left take_recv(provided_buffers& buffers, const io_uring_cqe& cqe, bool discard, OnBytes&& on_bytes) {
  if (cqe.flags & IORING_CQE_F_BUFFER) {
    const auto id = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    if (cqe.res > 0 && !discard) on_bytes(buffers.bytes(id, static_cast<std::size_t>(cqe.res)));
    buffers.recycle(id);
  }
  if (cqe.flags & IORING_CQE_F_MORE) return recv_left::armed;
  return cqe.res > 0 || cqe.res == -ENOBUFS ? recv_left::rearm : recv_left::ended;
}

}  // namespace ringrpc::detail

#pragma once
// A provided buffer ring: the kernel picks a free buffer for each multishot recv completion.

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ringrpc::detail {

/// Owned by the thread that owns `ring`. Buffers handed out by completions must be given back
/// with recycle() as soon as their bytes are consumed, and published with commit() once per
/// loop turn (one release store for the whole batch).
class provided_buffers {
 public:
  /// `count` is rounded up to a power of two (the kernel requires it). Throws std::system_error.
  provided_buffers(io_uring* ring, std::uint16_t group_id, unsigned count, unsigned buffer_bytes);
  ~provided_buffers();
  provided_buffers(const provided_buffers&) = delete;
  provided_buffers& operator=(const provided_buffers&) = delete;

  std::uint16_t group_id() const noexcept { return _group; }
  unsigned buffer_bytes() const noexcept { return _size; }
  unsigned count() const noexcept { return _count; }

  std::span<const std::byte> bytes(std::uint16_t id, std::size_t len) const noexcept {
    return {_memory.get() + static_cast<std::size_t>(id) * _size, len};
  }

  /// Prepares a multishot receive on `fd` whose data lands in buffers of this ring. Re-arm it
  /// when a completion comes without IORING_CQE_F_MORE.
  void prep_recv_multishot(io_uring_sqe* sqe, int fd) const noexcept {
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = _group;
  }

  void recycle(std::uint16_t id) noexcept;
  void commit() noexcept;

 private:
  io_uring* _ring;
  io_uring_buf_ring* _br = nullptr;
  std::size_t _br_bytes = 0;
  std::unique_ptr<std::byte[]> _memory;
  std::uint16_t _group;
  unsigned _count;
  unsigned _size;
  int _pending = 0;
};

}  // namespace ringrpc::detail

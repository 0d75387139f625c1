#include "uring/provided_buffers.hpp"

#include <sys/mman.h>

#include <bit>
#include <cerrno>
#include <system_error>

namespace ringrpc::detail {

provided_buffers::provided_buffers(io_uring* ring, std::uint16_t group_id, unsigned count,
                                   unsigned buffer_bytes)
    : _ring(ring), _group(group_id), _count(std::bit_ceil(count < 1 ? 1u : count)),
      _size(buffer_bytes) {
  // liburing 2.3 has no io_uring_setup_buf_ring(): map the shared ring memory ourselves and
  // register it. The kernel wants it page aligned, which an anonymous mapping is.
  _br_bytes = sizeof(io_uring_buf) * _count;
  void* mem = mmap(nullptr, _br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mem == MAP_FAILED) throw std::system_error(errno, std::system_category(), "mmap buffer ring");
  _br = static_cast<io_uring_buf_ring*>(mem);

  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(_br);
  reg.ring_entries = _count;
  reg.bgid = _group;
  const int rc = io_uring_register_buf_ring(_ring, &reg, 0);
  if (rc < 0) {
    munmap(_br, _br_bytes);
    throw std::system_error(-rc, std::system_category(), "io_uring_register_buf_ring");
  }
  io_uring_buf_ring_init(_br);
  _memory = std::make_unique<std::byte[]>(static_cast<std::size_t>(_count) * _size);
  for (unsigned i = 0; i < _count; ++i) recycle(static_cast<std::uint16_t>(i));
  commit();
}

provided_buffers::~provided_buffers() {
  io_uring_unregister_buf_ring(_ring, _group);
  munmap(_br, _br_bytes);
}

void provided_buffers::recycle(std::uint16_t id) noexcept {
  io_uring_buf_ring_add(_br, _memory.get() + static_cast<std::size_t>(id) * _size, _size, id,
                        io_uring_buf_ring_mask(_count), _pending);
  ++_pending;
}

void provided_buffers::commit() noexcept {
  if (_pending == 0) return;
  io_uring_buf_ring_advance(_br, _pending);
  _pending = 0;
}

}  // namespace ringrpc::detail

#pragma once
// What a gathered write needs while the kernel holds it: the msghdr and its iovecs. Only
// connections with a write in flight need one, so the responder lends them out instead of
// every connection carrying 1 KiB of iovecs while it sits idle.

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <new>
#include <utility>

namespace ringrpc::detail {

struct write_slot {
  static constexpr std::size_t max_iov = 64;  // sendmsg's gather list per write
  msghdr msg{};
  iovec iov[max_iov];
  write_slot* next_free = nullptr;
};

/// A free list owned by the responder thread. It grows to the most writes ever in flight at
/// once and keeps up to `keep` slots for reuse, so a steady state allocates nothing.
class write_slots {
 public:
  write_slots() = default;
  write_slots(const write_slots&) = delete;
  write_slots& operator=(const write_slots&) = delete;
  ~write_slots() {
    while (_free != nullptr) delete std::exchange(_free, _free->next_free);
  }

  /// A slot, or null when none is free and memory for one is not to be had.
  write_slot* take() noexcept {
    if (_free == nullptr) return new (std::nothrow) write_slot;
    write_slot* s = _free;
    _free = s->next_free;
    --_free_count;
    return s;
  }

  void give_back(write_slot* s) noexcept {
    if (_free_count >= keep) {
      delete s;
      return;
    }
    s->next_free = _free;
    _free = s;
    ++_free_count;
  }

 private:
  static constexpr std::size_t keep = 1024;  // ~1.1 MiB at most held for reuse
  write_slot* _free = nullptr;
  std::size_t _free_count = 0;
};

}  // namespace ringrpc::detail

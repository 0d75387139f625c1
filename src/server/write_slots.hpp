#pragma once
// What a connection needs while it has replies to write: the queue of replies, the msghdr and
// iovecs of the gathered write the kernel holds, and the responder's links. Only connections
// with replies queued need one, so the responder lends them out instead of every connection
// carrying ~1.1 KiB while it sits idle.

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "base/write_queue.hpp"
#include "server/call.hpp"

namespace ringrpc::detail {

struct connection;

struct write_slot {
  // sendmsg's gather list per write: 32 replies per write (a write of more continues in the
  // next); it keeps the slot within malloc's per-thread cache sizes.
  static constexpr std::size_t max_iov = 32;
  write_queue<call> replies;
  connection* conn = nullptr;
  write_slot* prev = nullptr;  // the responder's list of connections with replies queued
  write_slot* next = nullptr;
  /// When replies began waiting with no byte accepted since (0: none wait). The reader's
  /// sweep sheds a connection whose peer has not read for write_stall_timeout.
  std::int64_t stalled_since_ns = 0;
  bool in_flight = false;  // a sendmsg of this connection is with the kernel
  bool dirty = false;      // got replies this turn: written at the end of the turn
  bool shut_down = false;  // the responder shut the socket down while stopping
  bool deferred = false;   // in the responder's list of writes waiting for a handler's own
  msghdr msg{};
  iovec iov[max_iov];
};

/// A free list owned by the responder's thread. It grows to the most connections waiting to be
/// written at once and keeps up to `keep` slots for reuse, so a steady state allocates nothing;
/// trim() (each sweep) frees the slots no turn needed since the last trim, so a burst's slots
/// do not stay with a server gone idle.
class write_slots {
 public:
  write_slots() = default;
  write_slots(const write_slots&) = delete;
  write_slots& operator=(const write_slots&) = delete;
  ~write_slots() {
    while (_free != nullptr) delete std::exchange(_free, _free->next);
  }

  /// A slot for `c`, or null when none is free and memory for one is not to be had.
  write_slot* take(connection* c) noexcept {
    write_slot* s = _free;
    if (s == nullptr) {
      s = new (std::nothrow) write_slot;
      if (s == nullptr) return nullptr;
    } else {
      _free = s->next;
      if (--_free_count < _low_water) _low_water = _free_count;
    }
    s->conn = c;
    s->prev = s->next = nullptr;
    s->stalled_since_ns = 0;
    s->in_flight = s->dirty = s->shut_down = s->deferred = false;
    return s;
  }

  /// Frees the slots that stayed unused since the last trim.
  void trim() noexcept {
    for (; _low_water > 0 && _free != nullptr; --_low_water, --_free_count) {
      delete std::exchange(_free, _free->next);
    }
    _low_water = _free_count;
  }

  /// Slots kept for reuse now.
  std::size_t idle() const noexcept { return _free_count; }

  /// `s` must have no reply queued and no write in flight.
  void give_back(write_slot* s) noexcept {
    if (_free_count >= keep) {
      delete s;
      return;
    }
    s->conn = nullptr;
    s->next = _free;
    _free = s;
    ++_free_count;
  }

 private:
  // ~40 KiB at most held for reuse. Beyond that a slot comes from malloc's per-thread cache
  // (it is sized for it, see max_iov), which costs little more, while a free list as long as
  // the largest burst ever pins that burst's memory for good (malloc keeps what is freed).
  static constexpr std::size_t keep = 64;
  write_slot* _free = nullptr;
  std::size_t _free_count = 0;
  std::size_t _low_water = 0;  // fewest free since the last trim()
};

}  // namespace ringrpc::detail

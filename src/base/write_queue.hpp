#pragma once
// The per-connection queue of outgoing frames, with at most one gathered write in flight:
// the client runtime's and ringrpc-load's send path (the server's responder gathers its own).

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace ringrpc::detail {

/// Intrusive FIFO of items that expose `Item* wq_next` and `std::span<const std::byte>
/// wq_bytes()`. Owned by one thread. Items stay owned by the caller; the queue only links them.
///
/// A write that the kernel takes only partly leaves the unwritten remainder at the HEAD, so the
/// next write continues exactly where this one stopped: bytes of two frames never interleave and
/// frames leave in queue order.
template <class Item>
class write_queue {
 public:
  void push_back(Item* item) noexcept {
    item->wq_next = nullptr;
    if (_tail) _tail->wq_next = item; else _head = item;
    _tail = item;
    _bytes += item->wq_bytes().size();
    ++_items;
  }

  /// Puts `item` ahead of everything queued, its first `written` bytes already sent by someone
  /// else (the server's handler threads, which write a reply themselves when they can). Only
  /// between writes: the current head must not be partly written.
  void push_front(Item* item, std::size_t written) noexcept {
    item->wq_next = _head;
    _head = item;
    if (_tail == nullptr) _tail = item;
    _bytes += item->wq_bytes().size();
    ++_items;
    _head_offset = written;
  }

  bool empty() const noexcept { return _head == nullptr; }
  std::size_t bytes() const noexcept { return _bytes - _head_offset; }  ///< not yet written
  std::size_t items() const noexcept { return _items; }
  Item* front() const noexcept { return _head; }

  /// Fills up to `max` iovecs from the head, starting after the bytes already written.
  /// Returns how many were filled.
  std::size_t gather(iovec* iov, std::size_t max) const noexcept {
    std::size_t n = 0;
    std::size_t skip = _head_offset;
    for (Item* it = _head; it != nullptr && n < max; it = it->wq_next) {
      auto b = it->wq_bytes();
      iov[n].iov_base = const_cast<std::byte*>(b.data() + skip);
      iov[n].iov_len = b.size() - skip;
      skip = 0;
      ++n;
    }
    return n;
  }

  /// Records that the kernel wrote `written` bytes from the head. Every item written completely
  /// is unlinked and passed to `done(Item*)`. Returns true when the write ended inside an item,
  /// i.e. its remainder was put back at the head.
  template <class Done>
  bool consume(std::size_t written, Done&& done) noexcept {
    while (_head != nullptr) {
      const std::size_t left = _head->wq_bytes().size() - _head_offset;
      if (written < left) {
        if (written == 0) return false;  // ended exactly between two items
        _head_offset += written;
        return true;
      }
      written -= left;
      Item* item = _head;
      _head = item->wq_next;
      if (_head == nullptr) _tail = nullptr;
      _bytes -= item->wq_bytes().size();
      --_items;
      _head_offset = 0;
      done(item);
    }
    return false;
  }

  /// Unlinks every item (a failed connection), passing each to `done`.
  template <class Done>
  void clear(Done&& done) noexcept {
    while (_head != nullptr) {
      Item* item = _head;
      _head = item->wq_next;
      done(item);
    }
    _tail = nullptr;
    _bytes = 0;
    _items = 0;
    _head_offset = 0;
  }

 private:
  Item* _head = nullptr;
  Item* _tail = nullptr;
  std::size_t _bytes = 0;
  std::size_t _items = 0;
  std::size_t _head_offset = 0;
};

/// One connection's send path: its write_queue and the msghdr/iovecs of its one gathered
/// sendmsg in flight (the kernel reads them until the completion, so they live here, not on a
/// stack). Owned by one thread; the caller submits the msghdr and reports the result.
template <class Item, std::size_t MaxIov = 64>
class gathered_writer {
 public:
  write_queue<Item>& queue() noexcept { return _queue; }
  const write_queue<Item>& queue() const noexcept { return _queue; }
  bool in_flight() const noexcept { return _in_flight; }

  /// The msghdr of the next sendmsg (up to MaxIov items from the head), or null when a write
  /// is in flight already or nothing is queued. Non-null marks a write in flight.
  msghdr* next() noexcept {
    if (_in_flight) return nullptr;
    const std::size_t n = _queue.gather(_iov, MaxIov);
    if (n == 0) return nullptr;
    _msg.msg_iov = _iov;
    _msg.msg_iovlen = n;
    _in_flight = true;
    return &_msg;
  }

  /// The completion of the sendmsg from next(): `res` bytes written, or an error (< 0) or
  /// `drop` (the connection is dead), which let go of everything queued. Every item that is
  /// done with is passed to `done(Item*)`. Returns true when bytes are left to send.
  template <class Done>
  bool completed(int res, bool drop, Done&& done) noexcept {
    _in_flight = false;
    if (res < 0 || drop) {
      _queue.clear(done);
      return false;
    }
    _queue.consume(static_cast<std::size_t>(res), done);
    return !_queue.empty();
  }

 private:
  write_queue<Item> _queue;
  bool _in_flight = false;
  msghdr _msg{};
  iovec _iov[MaxIov];
};

}  // namespace ringrpc::detail

#pragma once
// A server stream's receive credit (the rules of wire/stream_credit.hpp's receive_credit), split
// between the two threads that use it: the connection's thread checks each arriving message
// against what was granted, the stream's lane consumes messages and grants credit back. Each
// side writes only its own counts and the lane publishes its granted totals with release
// stores, so an arrival costs two loads: no lock and no read-modify-write per message.
//
// A stale read is harmless: the connection's thread can only see granted totals that are too
// low, never too high, and a peer may only rely on a grant it has received. That grant's frame
// was written by this same connection's thread after it took the lane's post of it, which came
// after the stores; so a message sent on the grant is checked where the stores are visible.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "wire/stream_credit.hpp"

namespace ringrpc::detail {

class stream_receive_credit {
 public:
  stream_receive_credit() noexcept = default;
  stream_receive_credit(const stream_receive_credit&) = delete;
  stream_receive_credit& operator=(const stream_receive_credit&) = delete;

  /// The connection's thread: a message of `bytes` arrived. False when the peer had no credit
  /// for it (a message may take the byte credit below zero by itself, as send_credit allows).
  bool arrive(std::size_t bytes) noexcept {
    if (_arrived_messages >= _granted_messages.load(std::memory_order_acquire) ||
        _arrived_bytes >= _granted_bytes.load(std::memory_order_acquire)) {
      return false;
    }
    ++_arrived_messages;
    _arrived_bytes += bytes;
    return true;
  }

  /// The lane: a message of `bytes` was consumed. Returns what to grant now (owed_credit's
  /// rule, as every receiver batches its grants).
  credit_grant consumed(std::size_t bytes) noexcept {
    const credit_grant g = _owed.consumed(bytes);
    if (g) {
      // Single writer: a load and a store, no read-modify-write.
      _granted_bytes.store(_granted_bytes.load(std::memory_order_relaxed) + g.bytes, std::memory_order_release);
      _granted_messages.store(_granted_messages.load(std::memory_order_relaxed) + g.messages,
                              std::memory_order_release);
    }
    return g;
  }

 private:
  // The connection's thread.
  std::uint64_t _arrived_messages = 0;
  std::uint64_t _arrived_bytes = 0;
  // The lane's: written by it alone, read by the connection's thread.
  std::atomic<std::uint64_t> _granted_messages{default_stream_window_messages};
  std::atomic<std::uint64_t> _granted_bytes{default_stream_window_bytes};
  owed_credit _owed{default_stream_window_messages, default_stream_window_bytes};  // the lane's
};

}  // namespace ringrpc::detail

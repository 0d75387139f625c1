#pragma once
// The user_data of every SQE we submit, and so of every CQE we get back.

#include <cstdint>

namespace ringrpc::detail {

/// What a completion is about. One byte, so it packs beside a pointer. These are the
/// operations every ring loop here has; a loop that needs more gives the owned_* slots names
/// of its own, next to its code (the server's are in server/shard_ops.hpp), so this module
/// knows no one's protocol.
enum class op : std::uint8_t {
  accept = 1,          // multishot accept on a listening socket
  msg_ring = 2,        // a message another ring sent to this one (IORING_OP_MSG_RING)
  msg_ring_sent = 3,   // the sender's own completion for that message
  recv = 4,            // multishot recv of a connection
  send = 5,            // a (gathered) write of a connection
  cancel = 6,          // an ASYNC_CANCEL we issued; only its failure is interesting
  wake = 7,            // read on the thread's eventfd: other threads queued work for us
  timeout = 9,         // a timer of the owning loop
  // Slots a ring loop names for operations of its own.
  owned_0 = 128,
  owned_1,
  owned_2,
  owned_3,
  owned_4,
  owned_5,
};

// Layout: bits 0..7 are the op, bits 8..63 a pointer (or zero). User-space pointers on x86-64
// and arm64 fit in 56 bits, so shifting left by 8 loses nothing. No generation counter is
// needed: the object a tag points to holds a reference for every request armed on it and is
// freed only after that request's final CQE (the one without IORING_CQE_F_MORE), so a
// completion can never name an object that was freed or reused.
inline std::uint64_t make_tag(op o, const void* p = nullptr) noexcept {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)) << 8 |
         static_cast<std::uint8_t>(o);
}

inline op tag_op(std::uint64_t tag) noexcept { return static_cast<op>(tag & 0xff); }

template <class T>
T* tag_ptr(std::uint64_t tag) noexcept {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(tag >> 8));
}

}  // namespace ringrpc::detail

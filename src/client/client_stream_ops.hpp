#pragma once
// A client stream's operations under its lock, shared by the blocking handle
// (client_stream.cpp, where they are defined) and its coroutine forms (client_stream_coro.cpp).

#include <cstddef>
#include <span>

#include "client/client_stream_state.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/stream.hpp"

namespace ringrpc::detail {

/// write() with s.mu held: `would_block` when the server's credit or the connection's
/// max_pending_bytes is used up. Throws std::bad_alloc (nothing taken).
write_result write_locked(client_stream_state& s, std::span<const std::byte> m);
/// Gives back the credit of a message of `bytes` the reader took; s.mu held.
void consumed_locked(client_stream_state& s, std::size_t bytes);
/// cancel(): ends the stream with `o`, dropping what was not read; false when it had ended.
/// Takes s.mu.
bool cancel_with(client_stream_state& s, const call_outcome& o) noexcept;

}  // namespace ringrpc::detail

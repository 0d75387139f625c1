#pragma once
// The way back, part one: a call's answer encoded into the call itself (c.reply) on whichever
// thread answers — a pool worker, a shard running a direct endpoint or refusing a frame, a
// thread answering a deferred reply, a stopping server. Each thread has its own encoder, so
// nothing is shared and nothing is allocated once it has warmed up.
//
// A reply's whole path, from a handler's return to the send completion, is three files:
//   answer.cpp        encode (here), then server_core::finish hands the call to its shard's
//                     responder (on the shard's thread: queued at once; elsewhere: posted to
//                     its inbox, the shard woken once per burst of a pool worker);
//   responder.cpp     the connection's write queue, one gathered sendmsg per connection per
//                     turn, partial writes requeued at the head, the call released once written;
//   responder_tls.cpp the same for a TLS connection: sealed into records before the write.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ringrpc/status.hpp"
#include "server/call.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::detail {

class server_core;
struct deferred_state;

/// This thread's frame encoder (its buffers are reused call after call).
inline frame_encoder& thread_encoder() {
  thread_local frame_encoder encoder;
  return encoder;
}

/// A frame of `kind` (Error, Pong, Reply) answering c, with `code` and `message` (and a
/// retry hint for SERVER_BUSY, structured `details` for an Error), and the response headers
/// and trailers the handler added, if any. Throws std::bad_alloc.
inline void encode_answer(call& c, wire::Kind kind, status code, std::string_view message,
                          std::uint32_t retry_after_ms = 0, std::span<const std::byte> details = {},
                          std::span<const std::byte> payload = {}) {
  frame_view f;
  f.call_id = c.id;
  f.kind = kind;
  f.code = code;
  f.message = message;
  f.retry_after_ms = retry_after_ms;
  f.payload = payload;
  f.details = details;
  metadata_to_send headers, trailers;
  if (c.response_md && kind != wire::Kind::Pong) {
    headers.pairs = c.response_md->headers;
    trailers.pairs = c.response_md->trailers;
    f.metadata_out = &headers;
    f.trailers_out = &trailers;
  }
  thread_encoder().encode_into(f, c.reply);
  c.answer_status = code;
}

/// A handler's reply: `payload` as c's answer frame. Throws std::bad_alloc. A call without
/// response metadata (nearly all) takes the hand-laid encoding: one branch, no builder.
inline void encode_reply(call& c, std::span<const std::byte> payload) {
  if (c.response_md) [[unlikely]] {
    encode_answer(c, wire::Kind::Reply, status::ok, {}, 0, {}, payload);
    return;
  }
  encode_reply_frame(c.id, payload, c.reply);
  c.answer_status = status::ok;
}

/// A handler's error: never OK on the wire (an error frame must say what went wrong).
inline void encode_error(call& c, status code, std::string_view message,
                         std::span<const std::byte> details = {}) {
  encode_answer(c, wire::Kind::Error, code == status::ok ? status::internal : code, message, 0, details);
}

/// A deferred_reply's one answer (`code` ok: `payload`, else an error with `message`): the
/// first caller takes the call and sends it; later callers, and a stopping server's answer
/// after them, find none and get false.
bool answer_deferred(std::shared_ptr<deferred_state> state, status code, std::string_view message,
                     std::span<const std::byte> payload, std::span<const std::byte> details = {});

/// Pool workers of `core`: the shards this worker answers for are woken at the end of its
/// burst (flush_reply_wakeups, the pools' burst hook), not once per reply.
void batch_reply_wakeups(const server_core* core) noexcept;
/// The burst hook of the server's pools: wakes each shard that got replies in the burst.
void flush_reply_wakeups() noexcept;

}  // namespace ringrpc::detail

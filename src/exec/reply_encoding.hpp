#pragma once
// A call's answer encoded into the call itself (c.reply) on whichever thread answers: pool
// workers, readers running direct endpoints, threads answering deferred replies. Each thread
// has its own encoder, so nothing is shared and nothing is allocated once it has warmed up.

#include <span>
#include <string_view>

#include "exec/call.hpp"
#include "ringrpc/status.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::detail {

/// Encodes a call's answer into c.reply on whichever thread answers (pool workers, readers
/// running direct endpoints, threads answering deferred replies), with that thread's encoder.
inline frame_encoder& thread_encoder() {
  thread_local frame_encoder encoder;
  return encoder;
}
inline void encode_reply(call& c, std::span<const std::byte> payload) {
  encode_reply_frame(c.id, payload, c.reply);
  // A call that carried a big reply gives the memory back when it is recycled (call_pool).
  c.answer_status = status::ok;
}
inline void encode_error(call& c, status code, std::string_view message) {
  frame_view f;
  f.call_id = c.id;
  f.kind = wire::Kind::Error;
  f.code = code == status::ok ? status::internal : code;
  f.message = message;
  thread_encoder().encode_into(f, c.reply);
  c.answer_status = f.code;
}

}  // namespace ringrpc::detail

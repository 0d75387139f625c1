#pragma once
// What a deferred_reply (ringrpc/call_context.hpp) shares with the server: the call it will
// answer, until it is answered or the stopping server answers it instead.

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "server/call.hpp"

namespace ringrpc::detail {

class server_core;

/// The state a deferred_reply shares with the server (see call_context::defer).
struct deferred_state : std::enable_shared_from_this<deferred_state> {
  std::mutex mu;
  call* c = nullptr;  // null once answered
  server_core* core = nullptr;
  bool listed = false;  // in the core's pending list (guarded by the core's mutex)
  /// Answered by the stopping server at its drain timeout (abandon_deferred): the request's
  /// bytes were moved here, so a payload() span the holder still reads stays valid until the
  /// handle is destroyed. Guarded by mu.
  std::vector<std::byte> kept_request;
  std::span<const std::byte> kept_payload;
};

}  // namespace ringrpc::detail

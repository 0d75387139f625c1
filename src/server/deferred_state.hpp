#pragma once
// What a deferred_reply (ringrpc/call_context.hpp) shares with the server: the call it will
// answer, until it is answered or the stopping server answers it instead.

#include <memory>
#include <mutex>

#include "server/call.hpp"

namespace ringrpc::detail {

class server_core;

/// The state a deferred_reply shares with the server (see call_context::defer).
struct deferred_state : std::enable_shared_from_this<deferred_state> {
  std::mutex mu;
  call* c = nullptr;  // null once answered
  server_core* core = nullptr;
  bool listed = false;  // in the core's pending list (guarded by the core's mutex)
};

}  // namespace ringrpc::detail

#pragma once
// The frames of a server's coroutine handlers (ringrpc/coro_handler.hpp) as the server sees
// them: each frame's context (its home pool, the incoming call its calls follow, its own
// cancellation) and the registry stop() uses to cancel the frames and wait for every one of
// them before the pools they resume on shut down.
//
// Why a registry and not a count alone: a frame may outlive its call (it answered, then awaits
// more) or await calls that do not follow the call (`detached`, another parent), so the call's
// cancellation does not reach it. stop() fires every frame's own cancellation instead, which
// every call awaited in the frame carries (coro_abi::prepare_call), answered or not.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ringrpc/call_parent.hpp"
#include "ringrpc/coro.hpp"
#include "exec/coro_home.hpp"

namespace ringrpc::detail {
class coro_frame_registry;
class server_core;
class shard;
}  // namespace ringrpc::detail

namespace ringrpc::coro_abi {

/// Lives in a handler frame's promise (src/server/coro_server.cpp); touched by the frame's
/// steps, one at a time, and by stop() through the registry (`cancelled`, `stop`: under its
/// mutex).
struct frame_context {
  detail::server_core* core = nullptr;
  detail::coro_frame_registry* registry = nullptr;
  coro_home* home = nullptr;
  // A frame that started on a shard's thread stays there: `home` is `on_shard`, which queues
  // its resumptions on `shard` (server/shard_coroutines.cpp) until to_pool moves it.
  coro_home on_shard{};
  detail::shard* shard = nullptr;
  deferred_reply* reply = nullptr;  // the runner's; null once the frame stops making calls
  // The incoming call's parent, resolved on the first call (the hub is made then, not before).
  std::optional<call_parent> parent;
  // The frame's cancellation, made on the first call (std::stop_source allocates its state).
  std::optional<std::stop_source> stop;
  bool cancelled = false;
  bool stop_fired = false;  // cancel_all() has fired `stop` (under the registry's mutex)
  // For a call whose options name their own token: one source both cancel (reused per call).
  struct forward {
    std::stop_source* to;
    void operator()() const noexcept { to->request_stop(); }
  };
  std::optional<std::stop_source> merged;
  std::optional<std::stop_callback<forward>> from_user;
  std::optional<std::stop_callback<forward>> from_frame;
  // The registry's list, and the method for stop()'s warnings (cut to fit; no allocation).
  frame_context* prev = nullptr;
  frame_context* next = nullptr;
  char method[48] = {};

  /// Drops what the frame's calls used; the frame makes no more calls.
  void release() noexcept;
};

}  // namespace ringrpc::coro_abi

namespace ringrpc::detail {

class coro_frame_registry {
 public:
  /// A handler frame is about to start; false once the server has stopped waiting for frames
  /// (the handler then must not run: nothing would wait for it).
  bool enter() noexcept;
  /// The frame started by enter() could not be made.
  void cancel_enter() noexcept;
  /// The frame's context, listed until leave().
  void link(coro_abi::frame_context& f) noexcept;
  /// Last thing a frame does: after it, stop() may go on and destroy the pools and the server.
  void leave(coro_abi::frame_context& f) noexcept;
  /// The frame's cancellation token (made on first use; already fired if stop() cancelled).
  std::stop_token token_of(coro_abi::frame_context& f);
  /// Fires the cancellation of every frame alive and of every frame made later.
  void cancel_all() noexcept;
  /// True, and closed for good, when no frame is alive or about to start.
  bool close_if_empty() noexcept;
  std::uint64_t alive() const noexcept;
  /// The methods of the frames alive (for stop()'s warnings).
  std::vector<std::string> methods() const;

 private:
  mutable std::mutex _mu;
  std::uint64_t _count = 0;  // entered and not left
  coro_abi::frame_context* _head = nullptr;
  bool _cancelled = false;
  bool _closed = false;
};

}  // namespace ringrpc::detail

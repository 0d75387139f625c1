#pragma once
/// \file Awaiting ringrpc calls from coroutines, and moving a coroutine to a pool
/// (docs/execution.md, "Coroutines").
///
///     ringrpc::task<std::string> fetch(ringrpc::client& c) {
///       ringrpc::call_result r = co_await ringrpc::co_call(c, "echo", bytes);
///       co_return std::string(r.payload_string());
///     }
///
/// Where a coroutine resumes after `co_await co_call(...)` (the resume rule):
/// - A coroutine handler's frame (ringrpc/coro_handler.hpp), and every task it awaits, directly
///   or through other tasks, resumes at the frame's home: the pool the handler started on, the
///   shard it started on (a `direct` endpoint, ringrpc::on_shard), or the pool
///   `co_await ringrpc::to_pool(server, "name")` moved it to (a pool of the handler's own
///   server). On a pool the resumption is queued apart from the call queue (as an endpoint's
///   event lane is), so it is never refused for a full queue; on a shard it is queued for the
///   shard's loop. The server's stop() waits for every handler frame before its pools shut
///   down; a frame still alive once its shard's loop has ended (it answered and awaits more)
///   resumes on the thread that completes what it awaits.
/// - Any other coroutine has no home: a task handed to start_detached (from a handler or not;
///   the context follows awaits, not threads), or one of your own coroutine type. It resumes on
///   the client's I/O thread that completed the call, inline: the same thread and the same
///   restrictions as a call_async callback (keep it short, never block: a synchronous call() or
///   a reply_future's get() there throws std::logic_error). `to_pool` moves such a coroutine
///   once, without making the pool its home.
/// - A call refused at once (client_busy, an expired deadline, ...), or answered before the
///   coroutine has finished suspending, does not suspend at all: the coroutine goes on on the
///   thread that awaited, with no hop.
///
/// Cancellation and deadlines: a call awaited in a coroutine handler's frame has the handler's
/// call as its parent while that call is unanswered, unless its options name another (or
/// `detached`): it ends by the handler's deadline and is cancelled when the handler's caller
/// cancels or disconnects, and the coroutine resumes with call_error::cancelled or timeout.
/// Every call awaited in the frame, answered or not, `detached` or not, also carries the
/// frame's own cancellation (merged with the options' `cancel` token if they name one): the
/// server's stop() fires it once the drain timeout has passed, then waits for the frame.
/// Outside handler frames a call follows only what its options (or the thread's running
/// handler, ringrpc/call_parent.hpp) say.
///
/// Cost: the awaitable lives in the coroutine's frame; the completion callback handed to
/// call_async captures one pointer (no std::function allocation). What remains per call is the
/// client's own (the request frame) and call_result's copies of the reply.

#include "ringrpc/cxx20.hpp"

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <span>
#include <stop_token>
#include <string_view>
#include <utility>

#include "ringrpc/call_parent.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/export.hpp"
#include "ringrpc/task.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class server;

namespace coro_abi {

// What inline code in these headers calls in the library. The namespace is part of the checked
// ABI (abi/suppressions.abignore leaves out only ringrpc::detail and ringrpc::log); the frame
// context is opaque, so its layout is not baked into user frames.

/// A place a coroutine resumes: one of a server's pools, or the shard a handler frame started
/// on (src/exec/coro_home.hpp).
struct coro_home;

/// The home of a coroutine handler's frame (null: none, resume inline).
coro_home* frame_home(frame_context* ctx) noexcept;
/// The parent the calls of a handler's frame follow: its incoming call while it is unanswered
/// (the call's cancellation hub, made on the first call); null once answered.
const call_parent* frame_parent(frame_context* ctx);
/// The token a call of a handler's frame is cancelled by: the frame's own cancellation (fired by
/// the server's stop() whether or not the call was answered), merged with `user` when the call's
/// options name one. Throws std::bad_alloc.
std::stop_token frame_cancel(frame_context* ctx, const std::stop_token& user);

/// The options a call awaited in a frame gets: the frame's parent unless they name one (or
/// `detached`), and the frame's cancellation. Nothing for a coroutine outside a handler frame.
template <class Options>
void prepare_call(frame_context* ctx, Options& o) {
  if (ctx == nullptr) return;
  if (!o.parent && !o.detached) {
    if (const call_parent* p = frame_parent(ctx)) o.parent = *p;
  }
  o.cancel = frame_cancel(ctx, o.cancel);
}

/// A suspended coroutine waiting to be resumed, with room for the pool's task link, so that
/// queueing the resumption allocates nothing. Lives in the awaiting coroutine's frame.
struct resume_slot {
  alignas(void*) unsigned char link[64];
  std::coroutine_handle<> handle;
  coro_home* home = nullptr;
};

/// Queues slot.handle on `home`. False when the home takes no more (a pool that has shut
/// down, a shard whose loop has ended): nothing queued.
bool post(coro_home* home, resume_slot& slot) noexcept;

/// The resume rule: on the slot's home when it has one that takes it, else here.
inline void resume(resume_slot& slot) noexcept {
  if (slot.home == nullptr || !post(slot.home, slot)) slot.handle.resume();
}

/// Moves the coroutine in `slot` to pool `name` of `s`; a handler frame of `s` (ctx) keeps it as
/// its home. Sets `moved` before the coroutine can run there; false (and `moved` false) when
/// the pool has shut down. Throws std::invalid_argument (no such pool).
bool move_to_pool(server& s, std::string_view name, resume_slot& slot, frame_context* ctx, bool& moved);

/// The suspend/complete hand-off of an awaited call. The completion may come before the
/// awaiting side has finished suspending (a call refused at once completes inside call_async,
/// a fast reply on the I/O thread): whichever side comes second continues the coroutine.
class call_awaiter_base {
 public:
  call_awaiter_base() noexcept = default;
  call_awaiter_base(const call_awaiter_base&) = delete;
  call_awaiter_base& operator=(const call_awaiter_base&) = delete;
  bool await_ready() const noexcept { return false; }
  call_result await_resume() noexcept { return std::move(_result); }

 protected:
  enum : int { idle, suspended, completed };

  /// Records where to resume, runs `start(ctx)` (which makes the call), then suspends unless
  /// the call completed meanwhile. `ctx`: the awaiting handler frame's context, or null.
  template <class P, class Start>
  bool suspend_with(std::coroutine_handle<P> h, Start&& start) {
    frame_context* ctx = context_of(h);
    _slot.handle = h;
    _slot.home = frame_home(ctx);
    start(ctx);
    return _state.exchange(suspended, std::memory_order_acq_rel) != completed;
  }
  /// For call_async: runs once, on whichever thread completes the call. Never throws: without
  /// memory for the reply's copy the coroutine still resumes, with call_error::connection_closed,
  /// status::resource_exhausted, "out of memory".
  auto callback() noexcept {
    return [this](const call_outcome& o) noexcept {
      try {
        _result = call_result::from(o);
      } catch (...) {
        // As a reply lost in flight: the call may have run, its answer is not here.
        _result = call_result{};
        _result.error = call_error::connection_closed;
        _result.code = status::resource_exhausted;
        _result.message = "out of memory";  // fits the string's local buffer
      }
      if (_state.exchange(completed, std::memory_order_acq_rel) == suspended) resume(_slot);
    };
  }

  resume_slot _slot{};
  std::atomic<int> _state{idle};
  call_result _result;
};

}  // namespace coro_abi

/// `co_await co_call(client, ...)`: client::call_async as an awaitable yielding call_result.
/// `method` and `payload` need to stay valid only until the co_await starts (the client copies
/// them), so temporaries in the co_await's expression are fine.
class client_call_awaitable : public coro_abi::call_awaiter_base {
 public:
  client_call_awaitable(client& c, std::string_view method, std::span<const std::byte> payload,
                        call_options options) noexcept
      : _client(c), _method(method), _payload(payload), _options(std::move(options)) {}
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    return suspend_with(h, [this](coro_abi::frame_context* ctx) {
      coro_abi::prepare_call(ctx, _options);
      _client.call_async(_method, _payload, callback(), std::move(_options));
    });
  }

 private:
  client& _client;
  std::string_view _method;
  std::span<const std::byte> _payload;
  call_options _options;
};

/// `co_await co_call(channel, ...)`: channel::call_async as an awaitable yielding call_result.
class channel_call_awaitable : public coro_abi::call_awaiter_base {
 public:
  channel_call_awaitable(channel& ch, std::string_view method, std::span<const std::byte> payload,
                         channel_call_options options) noexcept
      : _channel(ch), _method(method), _payload(payload), _options(std::move(options)) {}
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    return suspend_with(h, [this](coro_abi::frame_context* ctx) {
      coro_abi::prepare_call(ctx, _options);
      _channel.call_async(_method, _payload, callback(), std::move(_options));
    });
  }

 private:
  channel& _channel;
  std::string_view _method;
  std::span<const std::byte> _payload;
  channel_call_options _options;
};

inline client_call_awaitable co_call(client& c, std::string_view method, std::span<const std::byte> payload,
                                     call_options options = {}) {
  return client_call_awaitable(c, method, payload, std::move(options));
}
inline client_call_awaitable co_call(client& c, std::string_view method, std::string_view payload,
                                     call_options options = {}) {
  return co_call(c, method, std::as_bytes(std::span(payload.data(), payload.size())), std::move(options));
}
inline channel_call_awaitable co_call(channel& ch, std::string_view method, std::span<const std::byte> payload,
                                      channel_call_options options = {}) {
  return channel_call_awaitable(ch, method, payload, std::move(options));
}
inline channel_call_awaitable co_call(channel& ch, std::string_view method, std::string_view payload,
                                      channel_call_options options = {}) {
  return co_call(ch, method, std::as_bytes(std::span(payload.data(), payload.size())), std::move(options));
}

/// `co_await to_pool(server, "name")`: the rest of the coroutine runs on a worker of the
/// server's pool `name` (one of server::add_pool, or "default", the handlers' pool; an
/// endpoint's own_pool is not reachable by name), which also becomes its home for
/// later resumptions (the resume rule above). Yields true once there; false when the pool has
/// shut down (the coroutine goes on where it was). Throws std::invalid_argument when the
/// server has no such pool or is not started. Like resumptions, it is queued apart from the
/// pool's call queue and never refused for a full one.
class to_pool {
 public:
  to_pool(server& s, std::string_view pool) noexcept : _server(s), _pool(pool) {}
  to_pool(const to_pool&) = delete;
  to_pool& operator=(const to_pool&) = delete;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    _slot.handle = h;
    return coro_abi::move_to_pool(_server, _pool, _slot, coro_abi::context_of(h), _moved);
  }
  bool await_resume() const noexcept { return _moved; }

 private:
  server& _server;
  std::string_view _pool;
  coro_abi::resume_slot _slot{};
  bool _moved = false;
};

}  // namespace ringrpc

RINGRPC_API_END

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
/// - If the coroutine has a home pool, on that pool: it has one when it was started on a
///   worker of a ringrpc server pool (a coroutine handler, ringrpc/coro_handler.hpp, starts on
///   its endpoint's pool) or after `co_await ringrpc::to_pool(server, "name")`. The resumption
///   is queued apart from the pool's call queue (as an endpoint's event lane is), so it is never
///   refused for a full queue; only a pool that has shut down refuses it, and then the
///   coroutine resumes as if it had no home.
/// - Otherwise, on the client's I/O thread that completed the call, inline: the same thread
///   and the same restrictions as a call_async callback (keep it short, never block: a
///   synchronous call() or a reply_future's get() there throws std::logic_error).
/// - A call refused at once (client_busy, an expired deadline, ...), or answered before the
///   coroutine has finished suspending, does not suspend at all: the coroutine goes on on the
///   thread that awaited, with no hop.
///
/// A coroutine with a home must finish before that server is destroyed (its pools go with it);
/// coroutine handlers do, as stop() waits for them.
///
/// Cancellation and deadlines: a call awaited by a coroutine handler has the handler's call as
/// its parent unless its options name another (or `detached`), on whatever thread the
/// coroutine runs by then: the call ends by the handler's deadline and is cancelled when the
/// handler's caller cancels, disconnects or the server stops past its drain timeout, and the
/// coroutine resumes with call_error::cancelled or timeout.
///
/// Cost: the awaitable lives in the coroutine's frame; the completion callback handed to
/// call_async captures one pointer (no std::function allocation). What remains per call is the
/// client's own (the request frame) and call_result's copies of the reply.

#include "ringrpc/cxx20.hpp"

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <span>
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

namespace detail {

/// A place a coroutine resumes: one of a server's pools (src/exec/coro_resume.cpp).
struct coro_home;

/// What a coroutine step carries across suspensions: its home, and the incoming call its
/// client calls serve (a coroutine handler's; null for other coroutines).
struct coro_step {
  coro_home* home = nullptr;
  const call_parent* parent = nullptr;
};

/// The step running on this thread; empty outside ringrpc's coroutine steps.
coro_step& current_coro_step() noexcept;
/// The home a coroutine suspending on this thread keeps: its step's, else the pool this thread
/// is a worker of, else none.
coro_home* coro_home_here() noexcept;
/// The pool `name` of `s` (a started server); null when there is none.
coro_home* coro_home_of(server& s, std::string_view name) noexcept;

/// A suspended coroutine waiting to be resumed, with room for the pool's task link, so that
/// queueing the resumption allocates nothing. Lives in the awaiting coroutine's frame.
struct resume_slot {
  alignas(void*) unsigned char link[64];
  std::coroutine_handle<> handle;
  coro_step step;
};

/// Queues slot.handle on `home`, to run with slot.step as its step. False when the pool has
/// shut down (nothing queued).
bool coro_post(coro_home* home, resume_slot& slot) noexcept;
/// Resumes `h` on this thread with `step` as its step, restoring this thread's step after.
void coro_resume_here(std::coroutine_handle<> h, const coro_step& step) noexcept;

/// The resume rule: on the slot's home when it has one that takes it, else here.
inline void coro_resume(resume_slot& slot) noexcept {
  if (slot.step.home == nullptr || !coro_post(slot.step.home, slot)) coro_resume_here(slot.handle, slot.step);
}

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

  /// Records where to resume, runs `start` (which makes the call), then suspends unless the
  /// call completed meanwhile.
  template <class Start>
  bool suspend_with(std::coroutine_handle<> h, Start&& start) {
    _slot.handle = h;
    _slot.step = coro_step{coro_home_here(), current_coro_step().parent};
    start();
    return _state.exchange(suspended, std::memory_order_acq_rel) != completed;
  }
  /// The parent a call gets from its coroutine when its options name none.
  template <class Options>
  void inherit_parent(Options& o) const {
    if (!o.parent && !o.detached && _slot.step.parent != nullptr) o.parent = *_slot.step.parent;
  }
  /// For call_async: runs once, on whichever thread completes the call.
  auto callback() noexcept {
    return [this](const call_outcome& o) {
      _result = call_result::from(o);
      if (_state.exchange(completed, std::memory_order_acq_rel) == suspended) coro_resume(_slot);
    };
  }

  resume_slot _slot{};
  std::atomic<int> _state{idle};
  call_result _result;
};

}  // namespace detail

/// `co_await co_call(client, ...)`: client::call_async as an awaitable yielding call_result.
/// `method` and `payload` need to stay valid only until the co_await starts (the client copies
/// them), so temporaries in the co_await's expression are fine.
class client_call_awaitable : public detail::call_awaiter_base {
 public:
  client_call_awaitable(client& c, std::string_view method, std::span<const std::byte> payload,
                        call_options options) noexcept
      : _client(c), _method(method), _payload(payload), _options(std::move(options)) {}
  bool await_suspend(std::coroutine_handle<> h) {
    return suspend_with(h, [this] {
      inherit_parent(_options);
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
class channel_call_awaitable : public detail::call_awaiter_base {
 public:
  channel_call_awaitable(channel& ch, std::string_view method, std::span<const std::byte> payload,
                         channel_call_options options) noexcept
      : _channel(ch), _method(method), _payload(payload), _options(std::move(options)) {}
  bool await_suspend(std::coroutine_handle<> h) {
    return suspend_with(h, [this] {
      inherit_parent(_options);
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
  bool await_suspend(std::coroutine_handle<> h);
  bool await_resume() const noexcept { return _moved; }

 private:
  server& _server;
  std::string_view _pool;
  detail::resume_slot _slot{};
  bool _moved = false;
};

}  // namespace ringrpc

RINGRPC_API_END

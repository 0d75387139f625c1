#pragma once
// A coroutine parked until something lets it go on: a stream's reader waiting for a message, a
// writer waiting for credit (client/client_stream_coro.cpp, server/coro_streams.cpp). The
// structure that parks it (a stream's state) keeps a pointer to the waiter under its own lock,
// and whoever takes that pointer out wakes it once, after unlocking.
//
// Why the three-state hand-off: a wake may come before the parking coroutine has finished
// suspending (on another thread, or inline: a stop callback that fires as it is registered).
// Whichever side comes second continues the coroutine, so it is neither lost nor resumed twice,
// and nothing touches the waiter after its wake (the coroutine may be gone by then).

#include <atomic>
#include <coroutine>
#include <utility>

#include "ringrpc/coro.hpp"
#include "ringrpc/task.hpp"

namespace ringrpc::detail {

struct coro_waiter {
  coro_abi::resume_slot slot{};
  std::atomic<int> state{idle};
  coro_waiter* next = nullptr;  // a list of waiters woken together (after an unlock)

  enum : int { idle, suspended, woken };

  /// Continues the parked coroutine by the resume rule (ringrpc/coro.hpp), or lets
  /// park_awaitable go on without suspending when the wake came first. The last touch.
  void wake() noexcept {
    if (state.exchange(woken, std::memory_order_acq_rel) == suspended) coro_abi::resume(slot);
  }
  /// wake(), resuming on this thread: for a caller already at the coroutine's home (a worker of
  /// its pool), where queueing the resumption would only add a hop.
  void wake_here() noexcept {
    if (state.exchange(woken, std::memory_order_acq_rel) == suspended) slot.handle.resume();
  }
};

/// Wakes every waiter of a list linked by `next` (each read before its wake).
inline void wake_all(coro_waiter* w) noexcept {
  while (w != nullptr) std::exchange(w, w->next)->wake();
}

/// `co_await park_awaitable{park}`: calls `park(waiter)`, which either finds there is no need to
/// wait (false) or registers the waiter where a wake will find it (true); then suspends until
/// that wake. Resumes on the awaiting frame's home, or inline on the waking thread without one.
template <class Park>
class park_awaitable {
 public:
  explicit park_awaitable(Park park) : _park(std::move(park)) {}
  park_awaitable(const park_awaitable&) = delete;
  park_awaitable& operator=(const park_awaitable&) = delete;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    _waiter.slot.handle = h;
    _waiter.slot.home = coro_abi::frame_home(coro_abi::context_of(h));
    if (!_park(_waiter)) return false;
    return _waiter.state.exchange(coro_waiter::suspended, std::memory_order_acq_rel) != coro_waiter::woken;
  }
  void await_resume() const noexcept {}

 private:
  Park _park;
  coro_waiter _waiter;
};

/// `co_await current_context{}`: the awaiting coroutine's handler-frame context (null outside
/// one), without suspending.
struct current_context {
  coro_abi::frame_context* context = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    context = coro_abi::context_of(h);
    return false;
  }
  coro_abi::frame_context* await_resume() const noexcept { return context; }
};

}  // namespace ringrpc::detail

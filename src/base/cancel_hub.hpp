#pragma once
// The cancellation of one incoming call as the code waiting on it sees it: hooks a handler
// registered (call_context::on_cancel) and the client calls it made (call_options::parent),
// fired once by whichever server thread notices the cancellation, closed when the call is
// answered. Created only for calls that use it: a call that nobody listens to has none.
//
// Thread rules (docs/execution.md, "Deadlines and cancellation"): fire() and close() may race
// from any threads; a listener runs at most once, never after close() has returned, and close()
// and unlisten() wait for a listener that another thread is running at that moment (not for
// one running on their own thread: a hook may answer its own call).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ringrpc::detail {

class cancel_hub {
 public:
  /// `deadline_ns`: the call's deadline on the steady clock (base/clock.hpp), 0 for none.
  explicit cancel_hub(std::int64_t deadline_ns) noexcept : _deadline_ns(deadline_ns) {}
  cancel_hub(const cancel_hub&) = delete;
  cancel_hub& operator=(const cancel_hub&) = delete;

  std::int64_t deadline_ns() const noexcept { return _deadline_ns; }

  using token = std::uint64_t;
  enum class listen_result { listening, ran_now, closed };
  /// Adds `fn`, run once when the hub fires. If it has fired already, `fn` runs now on this
  /// thread (ran_now); if it is closed, `fn` is dropped unrun (closed). `t` names it for
  /// unlisten(). A `child` listener (a client call made for this call) runs before the hooks,
  /// so that a hook answering the call (and so closing the hub) does not keep the children
  /// from being cancelled. Throws std::bad_alloc.
  listen_result listen(std::function<void()> fn, token& t, bool child = false);
  /// Removes a listener; once this returns it does not run, and is not running elsewhere.
  void unlisten(token t) noexcept;
  /// Runs the listeners (exceptions are dropped: the caller is a server thread). False if it
  /// had fired or was closed before.
  bool fire() noexcept;
  /// The call was answered: no listener runs from now on.
  void close() noexcept;
  bool fired() const noexcept {
    std::lock_guard lock(_mu);
    return _fired;
  }

 private:
  struct listener {
    token id;
    std::function<void()> fn;
    bool child = false;
  };
  void wait_for_running(std::unique_lock<std::mutex>& lock, token t) noexcept;

  const std::int64_t _deadline_ns;
  mutable std::mutex _mu;
  std::condition_variable _idle;
  std::vector<listener> _listeners;  // added, not yet run
  std::vector<listener> _firing;     // taken by fire(); an entry with an empty fn is skipped
  token _next = 1;
  token _running = 0;                // the listener fire() runs now (0: none)
  std::thread::id _running_on;
  bool _fired = false;
  bool _closed = false;
};

/// The incoming call whose handler this thread runs, as client calls made here see it: set by
/// the server around each handler (server_calls.cpp), read by client::call_async and channels.
/// `hub(arg)` gives that call's hub (made on first use), or null when it has none to give.
struct current_parent {
  std::shared_ptr<cancel_hub> (*hub)(void* arg) = nullptr;
  void* arg = nullptr;
};
extern thread_local constinit current_parent current_call_parent;

/// The hub of the call this thread's handler serves, or null outside a handler.
inline std::shared_ptr<cancel_hub> current_parent_hub() {
  const current_parent& p = current_call_parent;
  return p.hub != nullptr ? p.hub(p.arg) : nullptr;
}

}  // namespace ringrpc::detail

#include "base/cancel_hub.hpp"

#include <algorithm>
#include <utility>

namespace ringrpc::detail {

thread_local constinit current_parent current_call_parent{};

cancel_hub::listen_result cancel_hub::listen(std::function<void()> fn, token& t, bool child) {
  std::unique_lock lock(_mu);
  t = 0;
  if (_closed) return listen_result::closed;
  if (_fired) {
    lock.unlock();
    // Already cancelled and not yet answered: the caller owns the call meanwhile (a handler,
    // or a deferred reply's holder), so running it here cannot outlive the call.
    try {
      fn();
    } catch (...) {
    }
    return listen_result::ran_now;
  }
  t = _next++;
  _listeners.push_back({t, std::move(fn), child});
  return listen_result::listening;
}

void cancel_hub::wait_for_running(std::unique_lock<std::mutex>& lock, token t) noexcept {
  // A listener may answer its own call (and so close the hub) or end its own child call:
  // waiting for itself would never end.
  if (_running_on == std::this_thread::get_id()) return;
  _idle.wait(lock, [&] { return _running == 0 || (t != 0 && _running != t); });
}

void cancel_hub::unlisten(token t) noexcept {
  if (t == 0) return;
  std::function<void()> dropped;  // destroyed after the lock: it may own anything
  std::unique_lock lock(_mu);
  for (auto* list : {&_listeners, &_firing}) {
    for (auto& l : *list) {
      if (l.id == t && l.fn) {
        dropped = std::move(l.fn);
        l.fn = nullptr;
      }
    }
  }
  std::erase_if(_listeners, [](const listener& l) { return !l.fn; });
  if (_running == t) wait_for_running(lock, t);
  lock.unlock();
}

bool cancel_hub::fire() noexcept {
  std::unique_lock lock(_mu);
  if (_fired || _closed) return false;
  _fired = true;
  _firing = std::move(_listeners);
  _listeners.clear();
  // Children first: they only post a cancel to their runtime, and a hook may close the hub.
  std::stable_partition(_firing.begin(), _firing.end(), [](const listener& l) { return l.child; });
  for (std::size_t i = 0; i < _firing.size(); ++i) {
    if (_closed) break;
    if (!_firing[i].fn) continue;
    std::function<void()> fn = std::move(_firing[i].fn);
    _firing[i].fn = nullptr;
    _running = _firing[i].id;
    _running_on = std::this_thread::get_id();
    lock.unlock();
    try {
      fn();
    } catch (...) {
      // A hook that throws on a server thread has nobody to throw to (documented).
    }
    fn = nullptr;
    lock.lock();
    _running = 0;
    _running_on = std::thread::id();
    _idle.notify_all();
  }
  _firing.clear();
  return true;
}

void cancel_hub::close() noexcept {
  std::vector<listener> dropped;
  std::unique_lock lock(_mu);
  _closed = true;
  dropped.swap(_listeners);
  for (auto& l : _firing) {
    if (l.fn) dropped.push_back(std::move(l));
    l.fn = nullptr;
  }
  if (_running != 0) wait_for_running(lock, 0);
  lock.unlock();
}

}  // namespace ringrpc::detail

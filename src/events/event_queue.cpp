// The busy half of a queue: posting, which any thread does and which must never block, and the
// one dispatch thread, which as the only consumer owns the ring's head and the lifecycle lane's
// front without further synchronisation.

#include "base/thread_name.hpp"
#include "events/event_queue.hpp"

#include <pthread.h>

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>

namespace ringrpc::detail {

event_queue::event_queue(std::string name, std::size_t capacity, bus_context& ctx)
    : _name(std::move(name)),
      _ctx(ctx),
      _ring(capacity),
      _subs(std::make_shared<const subscription_list>()) {}

void event_queue::post(const event_ptr& e) noexcept {
  if (is_lifecycle(e->kind)) {
    post_lifecycle(e);
    return;
  }
  switch (_ring.try_push(e)) {
    case event_ring::push_result::ok:
      _parking.wake(1);
      return;
    case event_ring::push_result::full:
      count_drop(e->kind);
      return;
    case event_ring::push_result::closed:
      _rejected.fetch_add(1, std::memory_order_relaxed);
      return;
  }
}

void event_queue::count_drop(event_kind k) noexcept {
  // Kind first, total second: the monitor reads the total first, so the kinds never lag it.
  _dropped_by_kind[static_cast<std::size_t>(k)].fetch_add(1, std::memory_order_relaxed);
  _dropped.fetch_add(1, std::memory_order_seq_cst);  // pairs with the monitor's flag reset
  _ctx.signal_drop();
}

void event_queue::post_lifecycle(const event_ptr& e) noexcept {
  bool out_of_memory = false;
  {
    std::lock_guard lock(_lifecycle_mutex);
    if (_lifecycle_closed) {
      _rejected.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    try {
      // Read under the lock, so that barriers never decrease along the lane.
      _lifecycle.push_back({_ring.claimed(), e});
      _lifecycle_accepted.fetch_add(1, std::memory_order_relaxed);
      _lifecycle_queued.fetch_add(1, std::memory_order_release);
    } catch (...) {
      out_of_memory = true;
    }
  }
  if (out_of_memory) {
    count_drop(e->kind);
  } else {
    _parking.wake(1);
  }
}

void event_queue::start() {
  _thread = std::thread([this] { run(); });
  std::lock_guard lock(_subs_mutex);
  // Until now everything was buffered for listeners still to come; from now on a kind nobody
  // here wants costs this queue neither capacity nor a wake-up.
  _started = true;
  _accepted_kinds.store(wanted_kinds_locked(), std::memory_order_relaxed);
}

void event_queue::close() noexcept {
  const std::size_t end = _ring.close();
  {
    std::lock_guard lock(_lifecycle_mutex);
    _lifecycle_closed = true;
    _lifecycle.push_back({end, nullptr});  // the poison pill, after everything else
    _lifecycle_queued.fetch_add(1, std::memory_order_release);
  }
  _parking.wake(1);
}

void event_queue::run() noexcept {
  name_this_thread(std::string("rr-evt-").append(_name));

  std::shared_ptr<const subscription_list> subs;
  std::uint64_t subs_version = 0;
  // The barrier of the lifecycle lane's head, once looked at: only this thread pops the lane,
  // so it stays valid until popped, and the lock is taken once per lifecycle event.
  std::optional<std::size_t> barrier;
  event_ptr e;
  for (;;) {
    if (!subs || _subs_version.load(std::memory_order_acquire) != subs_version) {
      std::lock_guard lock(_subs_mutex);
      subs = _subs;
      subs_version = _subs_version.load(std::memory_order_relaxed);
    }
    if (!barrier && _lifecycle_queued.load(std::memory_order_acquire) != 0) {
      std::lock_guard lock(_lifecycle_mutex);
      barrier = _lifecycle.front().barrier;
    }
    if (barrier && *barrier <= _ring.consumed()) {
      lifecycle_item item;
      {
        std::lock_guard lock(_lifecycle_mutex);
        item = std::move(_lifecycle.front());
        _lifecycle.pop_front();
      }
      _lifecycle_queued.fetch_sub(1, std::memory_order_relaxed);
      barrier.reset();
      if (!item.ev) return;
      deliver(*item.ev, *subs);
      continue;
    }
    if (_ring.try_pop(e)) {
      deliver(*e, *subs);
      e.reset();  // the last queue to let go frees the event, off the posting thread
      continue;
    }
    if (barrier) {
      // A position below the barrier is claimed but its poster has not written it yet; that
      // takes nanoseconds unless the poster was preempted. Not worth a sleep.
      std::this_thread::yield();
      continue;
    }
    const std::uint32_t epoch = _parking.prepare_wait();
    if (_ring.ready() || _lifecycle_queued.load(std::memory_order_relaxed) != 0) {
      _parking.cancel_wait();
      continue;
    }
    _parking.wait(epoch);
  }
}

void event_queue::deliver(const event& e, const subscription_list& subs) noexcept {
  const auto start = std::chrono::steady_clock::now();
  for (const subscription& s : subs) {
    if (!s.kinds.contains(e.kind)) continue;
    try {
      s.listener->on_event(e);
    } catch (const std::exception& ex) {
      on_listener_error(e.kind, ex.what());
    } catch (...) {
      on_listener_error(e.kind, "an exception not derived from std::exception");
    }
  }
  const auto ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  _processing_ns.add(ns);
  if (ns > _processing_max.load(std::memory_order_relaxed)) {
    _processing_max.store(ns, std::memory_order_relaxed);
  }
  _delivered.add();
}

void event_queue::on_listener_error(event_kind k, const char* what) noexcept {
  _listener_errors.add();
  const steady_time now = _ctx.now();
  if (_last_error_log && now - *_last_error_log < _ctx.interval) return;
  _last_error_log = now;
  try {
    _ctx.log("event bus: queue '" + _name + "': a listener threw on " +
             std::string(to_string(k)) + ": " + what + " (" +
             std::to_string(_listener_errors.get()) + " listener errors so far)");
  } catch (...) {
    // Out of memory while formatting: the counter still has it.
  }
}

}  // namespace ringrpc::detail

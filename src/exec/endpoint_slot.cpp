#include "exec/endpoint_slot.hpp"

#include <climits>
#include <exception>
#include <string>
#include <utility>


namespace ringrpc::detail {

namespace {

bool is_message(call_purpose p) noexcept {
  return p == call_purpose::request || p == call_purpose::one_way || p == call_purpose::local_message;
}

// Slices of work a serial endpoint runs before it lets the pool's other work in.
constexpr unsigned drain_slice = 64;

}  // namespace

run_place place_for(dispatch_policy policy, call_purpose purpose) noexcept {
  switch (purpose) {
    case call_purpose::request:
      return policy == dispatch_policy::direct ? run_place::caller : run_place::pool;
    case call_purpose::one_way:
    case call_purpose::local_message:
      return policy == dispatch_policy::direct || policy == dispatch_policy::execution
                 ? run_place::caller
                 : run_place::pool;
    case call_purpose::connected:
    case call_purpose::disconnected:
    case call_purpose::network_error:
      if (policy == dispatch_policy::all) return run_place::pool;
      if (policy == dispatch_policy::connection) return run_place::ordered;
      return run_place::caller;
  }
  return run_place::caller;
}

endpoint_slot::endpoint_slot(exec_host& host, std::string name, std::shared_ptr<endpoint> ep,
                             endpoint_options options, thread_pool* pool,
                             std::unique_ptr<thread_pool> own_pool, thread_pool* ordered)
    : _host(host),
      _name(std::move(name)),
      _endpoint(std::move(ep)),
      _options(std::move(options)),
      _pool(pool),
      _own_pool(std::move(own_pool)),
      _event_pool(!serial() && _options.policy == dispatch_policy::connection ? ordered : pool) {
  _drain.slot = this;
  _drain.run = &endpoint_slot::drain_task;
  _drain.label = _name;
  _lane_drain.slot = this;
  _lane_drain.run = &endpoint_slot::lane_task;
  _lane_drain.label = _name;
}

endpoint_slot::~endpoint_slot() = default;

std::string endpoint_slot::describe() const {
  return std::string("policy ")
      .append(to_string(_options.policy))
      .append(", pool ")
      .append(_pool != nullptr ? _pool->name() : std::string("(reader thread)"))
      .append(serial() ? ", serial" : ", concurrent");
}

void endpoint_slot::start() {
  _endpoint->on_start();
  _host.endpoint_started(*this);
}

void endpoint_slot::begin_stop() noexcept {
  auto expected = state::running;
  if (!_state.compare_exchange_strong(expected, state::stopping, std::memory_order_seq_cst)) return;
  maybe_run_on_stop();
}

bool endpoint_slot::enter() noexcept {
  // Paired with begin_stop(): either this sees the stop, or the stop sees this message in
  // flight and leaves on_stop() to whoever finishes it (both sides seq_cst).
  _inflight.enter();
  if (_state.load(std::memory_order_seq_cst) != state::running) {
    leave();
    return false;
  }
  return true;
}

void endpoint_slot::leave() noexcept {
  _inflight.leave();
  // The count is spread over threads (no one leave sees it reach zero): while stopping, every
  // leave looks at the total. Running, this is one load of a line nobody writes.
  if (_state.load(std::memory_order_seq_cst) == state::stopping) maybe_run_on_stop();
}

void endpoint_slot::maybe_run_on_stop() noexcept {
  if (_state.load(std::memory_order_seq_cst) != state::stopping) return;
  if (_inflight.total() != 0) return;
  if (_stop_claimed.exchange(true, std::memory_order_acq_rel)) return;
  _host.guarded(*this, "on_stop", [&] { _endpoint->on_stop(); });
  _state.store(state::stopped, std::memory_order_release);
  _host.endpoint_stopped(*this);
}

endpoint_slot::admit_result endpoint_slot::admit(work_item* item) noexcept {
  if (!enter()) return admit_result::stopped;
  if (serial()) return admit_serial(item);
  switch (place_for(_options.policy, item->purpose)) {
    case run_place::caller: run(item); return admit_result::ran;
    case run_place::pool:
      if (!is_message(item->purpose)) return admit_event(item);
      item->run = &endpoint_slot::run_task;
      item->label = _name;  // outlives the call: the report may read it after the call is gone
      if (_pool->try_submit(item)) return admit_result::submitted;
      break;
    case run_place::ordered: return admit_event(item);
  }
  leave();
  _busy.fetch_add(1, std::memory_order_relaxed);
  return admit_result::busy;
}

endpoint_slot::admit_result endpoint_slot::admit_event(work_item* item) noexcept {
  // Every event waits in the lane, even when the lane is idle: an event that went straight to
  // the pool could overtake one still waiting there (on_disconnected before on_connected).
  // A connection posts at most three (connected, network_error, disconnected), each in a call
  // of its own, so the lane is bounded by the connections alive and needs no capacity.
  if (_lane.push(item) == serial_lane::push_result::queued) return admit_result::taken;
  if (_event_pool == nullptr || !_event_pool->submit_singleton(&_lane_drain)) {
    // Refused only by a pool that is not started or already shut down: no endpoint can reach
    // either (pools start before readers and are joined after them). Run the lane here rather
    // than lose what it holds.
    drain_lane(UINT_MAX);
  }
  return admit_result::taken;
}

endpoint_slot::admit_result endpoint_slot::admit_serial(work_item* item) noexcept {
  const bool message = is_message(item->purpose);
  // Events bypass the capacity: they are bounded by the connections alive (see admit_event).
  switch (_inbox.push(item, message ? _options.inbox_capacity : UINT32_MAX)) {
    case serial_lane::push_result::refused:
      leave();
      _busy.fetch_add(1, std::memory_order_relaxed);
      return admit_result::busy;
    case serial_lane::push_result::queued: return admit_result::taken;
    case serial_lane::push_result::owner: break;  // we own the inbox until release()
  }
  return schedule_drain(!message);
}

endpoint_slot::admit_result endpoint_slot::schedule_drain(bool event) noexcept {
  if (_pool == nullptr) {
    drain(UINT_MAX);  // a serial `direct` endpoint: its inbox runs here
    return admit_result::ran;
  }
  _drain.run = &endpoint_slot::drain_task;
  if (event) {
    // An event is never refused: the drain goes in as a singleton (see the class comment).
    if (_pool->submit_singleton(&_drain)) return admit_result::taken;
    drain(UINT_MAX);  // the pool is not running (see admit_event)
    return admit_result::ran;
  }
  if (_pool->try_submit(&_drain)) return admit_result::submitted;
  refuse_queued();
  return admit_result::answered;
}

void endpoint_slot::drain_lane(unsigned limit) noexcept {
  do {
    unsigned n = 0;
    while (work_item* item = _lane.pop()) {
      run(item);
      if (++n >= limit && _lane.waiting() != 0) {
        // Let the pool's other work in: the rest of the lane goes behind it, as a singleton.
        if (_event_pool->submit_singleton(&_lane_drain)) return;
        n = 0;  // the pool is shutting down: go on here
      }
    }
  } while (_lane.release());
}

void endpoint_slot::drain(unsigned limit) noexcept {
  if (work_item* item = std::exchange(_carried, nullptr)) run(item);  // an event refuse_queued() handed over
  do {
    unsigned n = 0;
    while (work_item* item = _inbox.pop()) {
      run(item);
      if (++n >= limit && _inbox.waiting() != 0) {
        // Let the pool's other work in: queue the rest of this inbox behind it.
        if (_pool->submit_now(&_drain)) return;
        n = 0;  // the pool is full; we are already one of its threads, so go on here
      }
    }
  } while (_inbox.release());
}

void endpoint_slot::refuse_queued() noexcept {
  // We own the inbox (our push found it idle) but the pool will not run its drain. Every
  // message in it gets its answer now, not just the one that found the pool full (Dubbo's
  // batch loop left the rest waiting for their timeouts). An event is never refused and never
  // runs here (this may be a reader): it and the rest of the inbox go to the pool as a
  // singleton drain.
  for (;;) {
    while (work_item* item = _inbox.pop()) {
      if (!is_message(item->purpose)) {
        _carried = item;
        if (_pool->submit_singleton(&_drain)) return;
        drain(UINT_MAX);  // the pool is not running (see admit_event)
        return;
      }
      _busy.fetch_add(1, std::memory_order_relaxed);
      _host.refuse(item, status::server_busy,
                   "pool '" + _pool->name() + "' is full; endpoint '" + _name +
                       "' cannot run its inbox (" + _host.pool_state(*_pool) + ")");
      leave();
    }
    if (!_inbox.release()) return;
    if (_pool->submit_now(&_drain)) return;
  }
}

void endpoint_slot::run(work_item* item) noexcept {
  _host.run_item(*this, item);
  leave();
}

void endpoint_slot::run_task(pool_task* t) noexcept {
  work_item* item = work_item::from_task(t);
  item->target->run(item);
}

void endpoint_slot::drain_task(pool_task* t) noexcept {
  static_cast<drain_work*>(t)->slot->drain(drain_slice);
}

void endpoint_slot::lane_task(pool_task* t) noexcept {
  static_cast<drain_work*>(t)->slot->drain_lane(drain_slice);
}

}  // namespace ringrpc::detail

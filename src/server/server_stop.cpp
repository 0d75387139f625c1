// The phased stop (docs/architecture.md, "Stopping"): one stop at a time, asynchronous when
// called from the server's own user code, bounded by drain_timeout for everything but
// handlers still running user code.

#include "server/server_core.hpp"
#include "server/shard.hpp"

#include "ringrpc/reply_future.hpp"
#include "ringrpc/server.hpp"
#include "server/interceptors.hpp"
#include "server/registration_attachment.hpp"
#include "server/running_calls.hpp"
#include "server/stop_clock.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/thread_name.hpp"
#include "exec/worker_pool.hpp"
#include "log/log.hpp"
#include "server/user_code.hpp"

namespace ringrpc::detail {


void server_core::join_async_stop() noexcept {
  std::thread t;
  {
    std::lock_guard lock(_async_stop_mu);
    if (!_async_stop.joinable() || _async_stop.get_id() == std::this_thread::get_id()) return;
    t = std::move(_async_stop);
  }
  t.join();
}

template <class Pred>
bool server_core::wait_until(Pred pred, std::chrono::steady_clock::time_point deadline) {
  while (!pred()) {
    if (stop_now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void server_core::stop() {
  if (stopping_server == this) return;  // from on_stop() or a listener while this thread stops us
  if (starting_server == this) {
    // From on_start(), under the dispatcher's mutex, with the readers not started yet: stopping
    // here would take our stop mutex inside the dispatcher's (stop takes them the other way
    // round) and leave start() to go on starting. start() stops when it has finished.
    _stop_after_start = true;
    return;
  }
  // A handler cannot wait for itself, nor can a coroutine handler resumed elsewhere: stop()
  // waits for its frame, and then joins the pools and the shards. After a co_await a frame may
  // go on on any of this server's pools (named, an endpoint's own, connection events), on the
  // shard it started on (a `direct` endpoint's frame), or, when it has no home, on a client's
  // I/O thread. From there stop on a thread of its own, which drains as usual (this handler's
  // call included) while the caller returns. ~server joins it. The pool and shard checks take
  // no lock. (Not covered: a frame that moved to another server's pool with to_pool.)
  const shard* here = shard::here();
  if (running_user_code_of == this || _dispatcher.owns(thread_pool::current()) ||
      (here != nullptr && &here->core() == this) || on_client_runtime_thread()) {
    std::lock_guard lock(_async_stop_mu);
    if (!_async_stop.joinable() && state() == server_state::running) {
      try {
        _async_stop = std::thread([this] {
          name_this_thread("rr-stop");
          stop_blocking();
        });
      } catch (const std::system_error& e) {
        log::warn("stop_failed", {{"msg", std::string("cannot start the stopping thread: ") + e.what()}});
      }
    }
    return;
  }
  stop_blocking();
  join_async_stop();  // a stop a handler asked for has finished too when this returns
}

void server_core::stop_blocking() {
  // Several threads may call stop(): one stops, the others wait until it has finished.
  std::lock_guard serial(_stop_mu);
  stopping_server = this;
  struct clear_stopping {
    ~clear_stopping() { stopping_server = nullptr; }
  } clear;
  // 0. Deregister first, serving as usual meanwhile, so callers move away before anything is
  //    refused (the registration's grace); stop() calls are serialised by _stop_mu.
  if (state() == server_state::running) {
    _leaving.store(true, std::memory_order_relaxed);
    for (auto& part : _attachments) {
      if (auto* reg = dynamic_cast<registration_attachment*>(part.get())) reg->before_stop();
    }
  }
  auto expected = server_state::running;
  if (!_state.compare_exchange_strong(expected, server_state::draining)) return;
  const auto deadline = stop_now() + _options.drain_timeout;
  post_event(event_kind::server_stopping, [] { return event{}; });

  // 1. No new connections.
  if (_acceptor) _acceptor->stop_and_join();
  // 2. New frames are answered SHUTTING_DOWN by the readers from now on (state is draining);
  //    calls already admitted run to completion.
  bool drained = wait_until([&] { return _settled.get() == calls_enqueued(); }, deadline);
  // 3. Stop reading, then wait until every call ever created has been answered and written
  //    (deferred replies included).
  for (auto& r : _shards) r->quiesce();
  wait_until(
      [&] {
        for (auto& r : _shards) {
          if (!r->quiesced()) return false;
        }
        return true;
      },
      deadline);
  drained = drained && wait_until(
                           [&] {
                             // Released first: if it equals created read afterwards, nothing
                             // was outstanding at the moment released was read.
                             const auto released = calls_released();
                             return released == calls_created();
                           },
                           deadline);
  if (!drained) {
    log::warn("drain_timeout", {{"drain_timeout_ms", static_cast<std::int64_t>(_options.drain_timeout.count())},
                                {"msg", "cancelling what is left"}});
    // Calls still queued run as SHUTTING_DOWN answers (execute checks the flag); running ones
    // see cancelled(); unanswered deferred replies are answered here.
    _abandon.store(true, std::memory_order_release);
    fire_all_hubs();  // on_cancel hooks and the calls' own calls, as cancelled() turns true
    abandon_deferred();
    // Calls queued behind handlers that do not finish are answered from here, unrun.
    _dispatcher.run_queued_here();
    for (auto& r : _shards) r->notify_replies();
    // Handlers that see cancelled() answer within abandon_grace; the calls of those that do
    // not are answered here on their behalf (their late answers are dropped), so every
    // accepted call gets an answer before its connection closes.
    const auto everything_released = [&] {
      const auto released = calls_released();  // first, as above
      return released >= calls_created();
    };
    if (!wait_until(everything_released, std::max(deadline + abandon_grace, stop_now())) &&
        answer_for_running_handlers() > 0) {
      // Another abandon_grace for those answers to be written; only that: what is still
      // unwritten then is owed to peers that are not reading, and closing their connections
      // (step 4) is what releases it.
      wait_until(everything_released, std::max(deadline + 2 * abandon_grace, stop_now()));
    }
  }
  // 4. Close every connection (endpoints hear on_disconnected); readers exit once every
  //    connection is gone, which needs the pools still running.
  for (auto& r : _shards) r->close_all();
  const auto waiting_since = stop_now();
  for (;;) {
    const bool all_exited = wait_until(
        [&] {
          for (auto& r : _shards) {
            if (!r->exited()) return false;
          }
          return true;
        },
        stop_now() + std::chrono::seconds(1));
    if (all_exited) break;
    // Only user code that ignores cancelled() keeps a connection alive now.
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        stop_now() - waiting_since);
    for (const std::string& busy : _dispatcher.busy_pools()) {
      log::warn("stop_waiting_for_handler", {{"waited_ms", static_cast<std::int64_t>(waited.count())},
                                             {"pool", busy},
                                             {"msg", "a handler ignores cancelled(); stop waits for it"}});
    }
  }
  for (auto& r : _shards) r->join();
  wait_for_coroutine_handlers(deadline);
  // 5. on_stop for each endpoint, once it is idle; then the pools' threads are joined.
  if (!_dispatcher.stop_endpoints(std::max(deadline, stop_now() +
                                                         std::chrono::seconds(1)))) {
    log::warn("endpoint_stop_timeout", {{"msg", "an endpoint is still busy; stopping its pool regardless"}});
  }
  _dispatcher.shut_down_pools();
  _state.store(server_state::stopped, std::memory_order_release);
  post_event(event_kind::server_stopped, [] { return event{}; });
  _bus->stop();  // delivers what is queued, then joins its threads
  // Last: the admin server's readiness page said "draining" until the end.
  for (auto& part : _attachments) part->stop();
}

void server_core::wait_for_coroutine_handlers(std::chrono::steady_clock::time_point drain_deadline) noexcept {
  // Their calls are answered by now (by them, or for them at the drain timeout), but a frame
  // may live on: it answered and awaits more, or awaits calls that do not follow its call. The
  // frames resume on the pools, so the pools (and this server) must outlive every one: until
  // the drain deadline they finish on their own; then every call they await is cancelled (the
  // frame's own cancellation, server/coro_frames.hpp); then stop waits as long as it takes, as
  // for handlers that ignore cancelled(), naming what it waits for. Once none is left no new
  // frame starts (close_if_empty).
  const auto empty = [&] { return _coro_frames.close_if_empty(); };
  if (wait_until(empty, drain_deadline)) return;
  _coro_frames.cancel_all();
  const auto waiting_since = stop_now();
  while (!wait_until(empty, stop_now() + std::chrono::seconds(1))) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(stop_now() - waiting_since);
    // The warning allocates; if it throws (no memory) stop goes on waiting rather than unwinding with
    // the server stuck draining and frames still to resume on the pools ~dispatcher frees.
    try {
      for (const std::string& method : _coro_frames.methods()) {
        log::warn("stop_waiting_for_coroutine",
                  {{"waited_ms", static_cast<std::int64_t>(waited.count())},
                   {"method", method},
                   {"msg", "a coroutine handler awaits something that is not a ringrpc call; stop waits for it"}});
      }
    } catch (...) {
    }
  }
}

std::uint64_t server_core::answer_for_running_handlers() noexcept {
  call* spare = nullptr;
  const auto get_spare = [&]() noexcept -> call* {
    try {
      return _pool->get();
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  };
  const std::uint64_t answered = claim_running_calls(this, spare, get_spare, [&](call* c, call* s) {
    answer_for_handler(c, s);
  });
  if (spare != nullptr) _pool->put(spare);
  if (answered > 0) {
    log::warn("stop_answered_for_handler", {{"calls", static_cast<std::int64_t>(answered)},
                                            {"msg", "handlers ignore cancelled(); their calls were answered shutting_down"}});
  }
  return answered;
}

void server_core::answer_for_handler(call* c, call* s) noexcept {
  // `s` stands in for `c` from here on: the responder releases it as it would `c` (its
  // connection's count of calls, its request bytes, its fair share), and the handler's thread
  // recycles `c` unanswered once it returns (server_core::execute).
  stand_in_for(c, s);
  retain(c->conn);  // the handler's call keeps its connection (peer(), cancelled()) until it returns
  c->abandoned.store(true, std::memory_order_relaxed);
  answer(s, wire::Kind::Error, status::shutting_down,
         "server stopped while the handler still ran (it ignored cancellation); its answer is dropped");
}

void server_core::abandon_deferred() noexcept {
  std::vector<std::shared_ptr<deferred_state>> pending;
  {
    std::lock_guard lock(_deferred_mu);
    // A listed state is alive: its handle unlists it (under this mutex) before letting go.
    for (deferred_state* s : _deferred) {
      s->listed = false;
      pending.push_back(s->shared_from_this());
    }
    _deferred.clear();
  }
  for (auto& s : pending) {
    call* c = nullptr;
    {
      std::lock_guard lock(s->mu);
      if (s->c == nullptr) continue;
      c = std::exchange(s->c, nullptr);
      c->abandoned.store(true, std::memory_order_relaxed);
      // The holder may still read a payload() span on another thread: its bytes move to the
      // state (a vector's move keeps its buffer) and live as long as the handle does, while
      // the call is answered and recycled as usual.
      s->kept_payload = c->payload;
      s->kept_request = std::move(c->request);
      c->request.clear();
    }
    close_hub(*c);  // outside s->mu: a hook running now may answer through this very state
    if (c->intercepted_count != 0) [[unlikely]] {  // interceptors.cpp: after_call sees this answer
      c->answer_status = status::shutting_down;
      deferred_complete(_options.interceptors, *c);
    }
    answer(c, wire::Kind::Error, status::shutting_down, "server stopped before the deferred reply came");
  }
}

}  // namespace ringrpc::detail

namespace ringrpc {

void server::add_registration(std::shared_ptr<registration> hook) {
  if (!hook) throw std::invalid_argument("add_registration: null hook");
  _core->attach(std::make_unique<detail::registration_attachment>(*_core, std::move(hook)));
}

}  // namespace ringrpc

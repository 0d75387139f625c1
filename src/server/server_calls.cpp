// Running one admitted call on the thread its endpoint's policy chose: deadline, cancellation,
// the endpoint itself, metrics and slow-call events, then the answer (or a deferred one).

#include "server/server_core.hpp"

#include <time.h>

#include <string>

#include "log/log.hpp"
#include "server/interceptors.hpp"
#include "server/running_calls.hpp"
#include "server/user_code.hpp"

namespace ringrpc::detail {

thread_local constinit const server_core* running_user_code_of = nullptr;
thread_local constinit const server_core* stopping_server = nullptr;
thread_local constinit const server_core* starting_server = nullptr;

namespace {

// The clock is the largest cost of per-call metrics (a steady_clock read is ~27 ns here, and
// timing every call cost ~11% of echo throughput on one core). So counts are exact, but only
// one call in `timing_sample` per thread is timed precisely for the histograms; slow calls are
// caught with one read of the coarse clock (a few ns, a few ms resolution), which suits
// thresholds that are milliseconds anyway. The first call after a thread was idle is always
// timed, so a lightly loaded server has every call timed.
constexpr unsigned timing_sample = 8;  // a power of two
thread_local unsigned timing_tick = 0;

// A handler's call as the client calls made on its thread see it (base/cancel_hub.hpp): set
// around the handler, one thread-local store and restore; the hub is made only if a call asks.
std::shared_ptr<cancel_hub> handler_call_hub(void* ctx) {
  return server_core::context_hub(*static_cast<const call_context*>(ctx));
}

struct parent_scope {
  current_parent previous;
  explicit parent_scope(call_context& ctx) noexcept : previous(current_call_parent) {
    current_call_parent = current_parent{&handler_call_hub, &ctx};
  }
  ~parent_scope() { current_call_parent = previous; }
};

struct user_code_scope {
  const server_core* previous;
  explicit user_code_scope(const server_core* s) noexcept : previous(running_user_code_of) {
    running_user_code_of = s;
  }
  ~user_code_scope() { running_user_code_of = previous; }
};

}  // namespace

void time_next_call() noexcept { timing_tick = timing_sample - 1; }

void server_core::run_item(endpoint_slot& slot, work_item* item) noexcept {
  call* c = call::from_item(item);
  const user_code_scope scope(this);
  // On one of our pool workers, replies wait for the burst hook to wake their shards, which
  // runs before the worker parks (make_pool). Elsewhere (the shard, a stopping thread) each
  // finish() wakes its shard itself.
  batch_reply_wakeups(this);
  switch (c->purpose) {
    case call_purpose::request:
    case call_purpose::one_way:
    case call_purpose::local_message: execute(slot, c); return;
    case call_purpose::connected:
    case call_purpose::disconnected:
    case call_purpose::network_error: {
      const peer_info peer{c->conn->id, c->conn->peer(), c->conn->identity_shared()};
      endpoint& ep = slot.target();
      switch (c->purpose) {
        case call_purpose::connected:
          guarded(slot, "on_connected", [&] { ep.on_connected(peer); });
          break;
        case call_purpose::disconnected:
          guarded(slot, "on_disconnected", [&] { ep.on_disconnected(peer); });
          break;
        default:
          guarded(slot, "on_network_error", [&] { ep.on_network_error(peer, c->event_text); });
          break;
      }
      connection* conn = c->conn;
      _pool->put(c);
      release(conn);
      return;
    }
  }
}

void server_core::execute(endpoint_slot& slot, call* c) noexcept {
  // Once the handler has deferred, the call may be answered and recycled by another thread
  // before the handler even returns: read what is needed afterwards now.
  const bool client = c->from_client();
  const bool request = c->purpose == call_purpose::request;
  const std::string_view method = c->method_name;
  const std::int64_t received = c->received_ns;
  const bool sampled = (++timing_tick & (timing_sample - 1)) == 0;
  bool precise = _options.metrics && sampled;
  bool sample_event = false;
  if (const unsigned every = _options.sample_completions_every; every != 0 && client) {
    thread_local unsigned seen = 0;
    if (++seen >= every) {
      seen = 0;
      sample_event = precise = true;
    }
  }
  // Fair share by cost: the same sampled reading measures what the connection's calls cost
  // (connection::recent_cost). A connection whose calls are already heavy has every call
  // measured, so the estimate follows it down promptly: two clock reads beside 5 ms or more.
  const bool heavy = client && c->conn->recent_cost.load(std::memory_order_relaxed) >= heavy_task_ticks;
  const bool timed = precise || sampled || heavy;
  const std::int64_t start = timed ? now_ns() : 0;
  call_context ctx(*c, this);
  // Engaged only when interceptors are installed (server/interceptors.cpp); else two tests.
  std::optional<intercepted_call> intercepted;
  if (abandoning()) {
    ctx.fail(status::shutting_down, "server stopped before the call could run");
  } else if (const std::int64_t now = c->deadline_ns == 0 ? 0 : timed ? start : now_ns();
             c->deadline_ns != 0 && now > c->deadline_ns) {
    ctx.fail(status::deadline_exceeded,
             "deadline passed after " + std::to_string((now - received) / 1000) +
                 " us in the server's queue; not run");
  } else if (c->conn != nullptr && c->conn->is_cancelled(c->id)) {
    ctx.fail(status::cancelled, "cancelled by the caller before it ran");
  } else {
    endpoint& ep = slot.target();
    // Published for a stop whose drain times out while this handler runs (server_stop.cpp).
    running_slot* running = c->conn != nullptr ? &this_thread_slot() : nullptr;
    if (running != nullptr) {
      running->server.store(this, std::memory_order_relaxed);
      running->running.store(c, std::memory_order_release);
    }
    // Calls made by the interceptors' before_call and by the handler are this call's children.
    const parent_scope parent(ctx);
    if (!_options.interceptors.empty() && client) [[unlikely]] intercepted.emplace(_options.interceptors, ctx, *c);
    if (!intercepted || intercepted->admitted()) try {
      if (c->purpose == call_purpose::request) {
        ep.receive_and_reply(ctx);
      } else {
        ep.receive(ctx);
      }
    } catch (const std::exception& e) {
      report_error(slot, "handler", e.what());
      if (!ctx._deferred) ctx.fail(status::internal, e.what());
    } catch (...) {
      report_error(slot, "handler", "a non-standard exception");
      if (!ctx._deferred) ctx.fail(status::internal, "handler threw a non-standard exception");
    }
    if (running != nullptr &&
        running->running.exchange(nullptr, std::memory_order_acq_rel) == claimed_marker()) {
      // The stopping server answered this call while the handler ignored cancelled(), and
      // released it in that answer's name: this late answer goes nowhere. The stop may still
      // be copying the call: wait until its walk is over (a stop's rare path, not the calls').
      wait_for_claims();
      close_hub(*c);
      if (client) _settled.add();
      connection* conn = c->conn;
      _pool->put(c);
      release(conn);  // the reference the stop took for this handler (answer_for_handler)
      return;
    }
  }
  const std::int64_t end = timed ? now_ns() : 0;
  if (client) _settled.add();
  if (ctx._deferred) return;  // the deferred_reply owns the call now (and held no handler)
  close_hub(*c);  // answered: no on_cancel hook runs from here on
  if (timed && client) {
    connection& conn = *c->conn;  // written by whichever worker ran the call: an estimate
    conn.recent_cost.store(next_recent_cost(conn.recent_cost.load(std::memory_order_relaxed), end - start),
                           std::memory_order_relaxed);
  }
  if (!ctx._answered && request) ctx.reply(std::span<const std::byte>{});
  if (intercepted) [[unlikely]] intercepted->complete(ctx, *c);
  if (_options.metrics && client) {
    thread_metrics& m = _metrics.local();
    m.completed(method, c->answer_status);
    if (precise) m.timed(method, start - received, end - start);
  }
  if (_slow_call_ns > 0 && client) {
    // Time in the server, queue included, against one coarse read: the coarse clock lags the
    // precise one by at most its resolution, so a reported call was slow for sure.
    if (const std::int64_t in_server = (precise ? end : coarse_now_ns()) - received;
        in_server > _slow_call_ns) {
      note_slow_call(c, in_server);
    }
  }
  if (sample_event) {
    post_event(event_kind::call_completed, [&] {
      event e;
      e.peer = c->conn->peer();
      e.name = std::string(method);
      e.duration_ns = static_cast<std::uint64_t>(end - start);
      e.detail = std::string(to_string(c->answer_status));
      e.id = c->id;
      return e;
    });
  }
  finish(c);
}

void server_core::note_slow_call(call* c, std::int64_t processing_ns) noexcept {
  post_event(event_kind::slow_call, [&] {
    event e;
    e.peer = c->conn != nullptr ? c->conn->peer() : std::string();
    e.name = std::string(c->method_name);
    e.duration_ns = static_cast<std::uint64_t>(processing_ns);
    e.value = static_cast<std::uint64_t>(_slow_call_ns);
    e.id = c->id;
    return e;
  });
}

void server_core::report_error(endpoint_slot& slot, const char* what,
                               std::string_view message) noexcept {
  try {
    slot.target().on_error(message);
  } catch (...) {
    log::error("endpoint_on_error_threw", {{"endpoint", slot.name()}, {"during", what}});
  }
}

void server_core::endpoint_started(endpoint_slot& slot) noexcept {
  post_event(event_kind::endpoint_started, [&] {
    event e;
    e.name = slot.name();
    e.detail = slot.describe();
    return e;
  });
}

void server_core::endpoint_stopped(endpoint_slot& slot) noexcept {
  post_event(event_kind::endpoint_stopped, [&] {
    event e;
    e.name = slot.name();
    return e;
  });
}

}  // namespace ringrpc::detail

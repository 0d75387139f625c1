// A call's path through the channel: pick a member from the current snapshot (no lock), send
// on its connection, and on a failure decide between failing over and failing the call.

#include <array>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "channel/balancer.hpp"
#include "channel/call_state_pool.hpp"
#include "channel/channel_core.hpp"
#include "client/call_links.hpp"
#include "client/client_interceptors.hpp"

namespace ringrpc::detail {

/// What a call needs across attempts. The payload is copied only for idempotent calls, the
/// only ones retried after the caller's buffer may be gone (the others are retried only
/// while call_async has not returned). Recycled through a per-thread pool: a call costs no
/// allocation once the pool is warm, and the callback given to the member's client holds
/// two pointers, small enough for std::function to keep without allocating either.
struct channel_core::call_state {
  std::string method;
  std::vector<std::byte> payload;
  call_callback done;
  channel_call_options options;
  unsigned attempts = 0;
  const member_conn* last = nullptr;  // the member of the attempt that failed: avoided next
  std::shared_ptr<member_conn> member;  // of the attempt in flight: keeps its connection open
  std::span<const std::byte> caller_payload;  // valid only while call_async has not returned
  std::shared_ptr<cancel_hub> parent;  // resolved once at call_async (client/call_links.hpp)
  call_state* next_free = nullptr;
  std::unique_ptr<client_chain_run> intercepted;  // channel interceptors ran for this call

  void recycle() noexcept {
    done = nullptr;
    parent.reset();
    options.parent = call_parent();
    options.cancel = std::stop_token();
    intercepted.reset();
    options.metadata.clear();
    member.reset();
    last = nullptr;
    attempts = 0;
    caller_payload = {};
    if (!options.metadata.empty()) std::vector<metadata_entry>().swap(options.metadata);
    payload.clear();
    // A pooled state must not keep a big call's memory.
    if (payload.capacity() > 4096) std::vector<std::byte>().swap(payload);
    if (method.capacity() > 256) std::string().swap(method);
  }
};

namespace {
using call_state_pool = recycling_pool<channel_core::call_state>;
}  // namespace

void channel_core::finish(call_state* st, const call_outcome& o) noexcept {
  // Recycled even when the callback throws: it is the caller's, and the state is ours.
  struct give_back {
    call_state* st;
    ~give_back() { call_state_pool::put(st); }
  } back{st};
  if (st->intercepted) [[unlikely]] {
    try {
      st->intercepted->after_then(o, st->attempts, st->done);  // done runs last in it
    } catch (...) {
      // What throws here is the caller's callback, once it ran: the client's rule applies.
      std::fprintf(stderr, "ringrpc: a call callback threw\n");
    }
    return;
  }
  run_callback(st->done, o);  // the client's rule for a callback that throws, inline or not
}

namespace {

// Per-thread pick state for the last few channels this thread called, so one channel's
// round-robin cursor is not advanced by calls on another.
struct thread_picks {
  struct slot {
    std::uint64_t channel = 0;
    pick_state st;
  };
  std::array<slot, 8> slots;
  pick_state& of(std::uint64_t channel) noexcept {
    slot& s = slots[channel % slots.size()];
    if (s.channel != channel) {
      s.channel = channel;
      s.st.cursor = 0;
      s.st.rng ^= channel * 0x9e3779b97f4a7c15ull + reinterpret_cast<std::uintptr_t>(this);
      if (s.st.rng == 0) s.st.rng = 1;
    }
    return s.st;
  }
};
thread_local thread_picks picks;

bool not_run_by_server(const call_outcome& o) noexcept {
  // The server refused it before running it: safe to send elsewhere, idempotent or not.
  return o.error == call_error::server_status && (o.code == status::shutting_down || o.code == status::server_busy);
}

}  // namespace

std::shared_ptr<member_conn> channel_core::pick(const member_snapshot& snap, const member_conn* avoid) noexcept {
  const auto& up = snap.up;
  if (up.empty()) return nullptr;
  pick_state& st = picks.of(_id);
  const auto load = [&](std::size_t i) { return up[i]->counters->outstanding.load(std::memory_order_relaxed); };
  std::size_t i = pick_member(_options.policy, up.size(), load, st);
  // A member found dead here, or the one a retry comes from, is passed over for the next.
  for (std::size_t k = 0; k < up.size(); ++k) {
    const auto& m = up[(i + k) % up.size()];
    if (m.get() == avoid && up.size() > 1) continue;
    if (m->failed.load(std::memory_order_relaxed)) continue;
    if (!m->conn.connected()) {
      // Only flagged here: the maintenance thread ejects it within a tick. Taking its lock
      // here could deadlock, as it waits for readers of the snapshot while holding it.
      m->failed.store(true, std::memory_order_release);
      continue;
    }
    return m;
  }
  return nullptr;
}

void channel_core::call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                              channel_call_options options) {
  call_state* st = call_state_pool::get();
  try {
    st->method.assign(method);
    if (options.idempotent) st->payload.assign(payload.begin(), payload.end());
  } catch (...) {
    call_state_pool::put(st);
    throw;
  }
  st->done = std::move(done);
  st->options = std::move(options);
  // Taken here, on the caller's thread: later attempts run on the I/O thread, which is no
  // handler's.
  call_options probe;
  probe.parent = st->options.parent;
  probe.detached = st->options.detached;
  try {
    st->parent = resolve_parent(probe);
  } catch (...) {
    call_state_pool::put(st);
    throw;
  }
  if (_interceptors) [[unlikely]] {  // client_interceptors.cpp: once per logical call
    try {
      st->intercepted = std::make_unique<client_chain_run>();
    } catch (...) {
      call_state_pool::put(st);
      throw;
    }
    client_chain_run& run = *st->intercepted;
    run.chain = _interceptors;
    const auto t = st->options.timeout.count() > 0 ? st->options.timeout : _options.client.default_timeout;
    run.before(method, payload, st->options.metadata, t, false);
    if (run.refused) {
      finish(st, run.refusal());
      return;
    }
  }
  attempt(st, payload);
}

// --- one-way messages through the channel
bool channel_core::send_one_way(std::string_view method, std::span<const std::byte> payload,
                                const channel_call_options& options) {
  if (_closed.load(std::memory_order_acquire)) return false;
  std::shared_ptr<member_conn> m;
  {
    const auto snap = _snap.read();
    m = pick(*snap, nullptr);
  }
  if (!m) {
    _no_member.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  call_options co;
  co.timeout = options.timeout;
  co.metadata = options.metadata;
  return m->conn.send_one_way(method, payload, co);
}

void channel_core::attempt(call_state* st, std::span<const std::byte> payload) noexcept {
  ++st->attempts;
  if (_closed.load(std::memory_order_acquire)) {
    call_outcome o;
    o.error = call_error::client_closed;
    o.message = "channel is closed";
    finish(st, o);
    return;
  }
  std::shared_ptr<member_conn> m;  // held across the send: a refusal may finish the call inside it
  {
    const auto snap = _snap.read();
    m = pick(*snap, st->last);
  }
  if (!m) {
    _no_member.fetch_add(1, std::memory_order_relaxed);
    call_outcome o;
    o.error = call_error::connection_closed;
    o.message = "no live member";  // the fallback when the longer message cannot be made
    std::string why;
    try {
      why = std::string("no live member of ").append(_target);
      o.message = why;
    } catch (const std::bad_alloc&) {
    }
    finish(st, o);
    return;
  }
  member_conn& conn = *m;
  st->member = m;
  conn.counters->outstanding.fetch_add(1, std::memory_order_relaxed);
  conn.counters->calls.fetch_add(1, std::memory_order_relaxed);
  st->caller_payload = payload;
  try {
    call_options co;
    co.timeout = st->options.timeout;
    if (!st->options.metadata.empty()) co.metadata = st->options.metadata;
    if (st->parent) {
      call_parent_access::set(co.parent, st->parent);
    } else {
      co.detached = true;  // resolved at call_async: none (an inline refusal must not pick one up)
    }
    co.cancel = st->options.cancel;
    conn.conn.call_async(
        st->method, payload,
        [this, st](const call_outcome& o) noexcept {
          // The attempt is over: its member reference moves out, so a retry can take another.
          const std::shared_ptr<member_conn> held = std::move(st->member);
          held->counters->outstanding.fetch_sub(1, std::memory_order_relaxed);
          // A callback not on the runtime thread ran inside call_async: nothing was sent, and
          // the caller's payload is still valid.
          const bool sent = _runtime->in_runtime_thread();
          on_outcome(st, *held, o, sent, sent ? std::span<const std::byte>(st->payload) : st->caller_payload);
        },
        co);
  } catch (...) {
    // Nothing was sent and the callback never ran (a retry runs on the I/O thread, where an
    // exception would be swallowed with the call never finished): the call fails here.
    if (const std::shared_ptr<member_conn> held = std::move(st->member)) {
      held->counters->outstanding.fetch_sub(1, std::memory_order_relaxed);
    }
    call_outcome o;
    o.error = call_error::connection_closed;
    o.code = status::resource_exhausted;
    o.message = "call could not be sent";
    finish(st, o);
  }
}

void channel_core::on_outcome(call_state* st, member_conn& m, const call_outcome& o, bool sent,
                              std::span<const std::byte> payload) noexcept {
  if (o.ok()) {
    _budget.on_success();
    finish(st, o);
    return;
  }
  // A protocol_error with the connection still up (response metadata over the client's caps)
  // is that call's alone: the member is not failed for it.
  const bool conn_failed = o.error == call_error::connection_closed ||
                           (o.error == call_error::protocol_error && !m.conn.connected());
  if (conn_failed) report_failed(m);
  const bool refused_unsent = !sent || o.error == call_error::client_busy || not_run_by_server(o);
  const bool retriable = refused_unsent || (conn_failed && st->options.idempotent);
  if (!retriable || o.error == call_error::client_closed) {
    if (conn_failed && !st->options.idempotent) {
      _failed_not_idempotent.fetch_add(1, std::memory_order_relaxed);
      call_outcome out = o;
      std::string why;  // without memory for it the call still finishes, with o's message
      try {
        why = std::string("connection to ")
                  .append(m.label)
                  .append(" failed with the call in flight (")
                  .append(o.message)
                  .append("); not retried: the call is not marked idempotent, it may have run");
        out.message = why;
      } catch (const std::bad_alloc&) {
      }
      finish(st, out);
      return;
    }
    finish(st, o);
    return;
  }
  _budget.on_failure();
  if (st->attempts >= _options.max_attempts) {
    finish(st, o);
    return;
  }
  // A call refused before it was sent, while call_async has not returned, can still use the
  // caller's payload; later ones need the copy, which only idempotent calls keep.
  if (sent && !st->options.idempotent) {
    finish(st, o);
    return;
  }
  if (!_budget.retry_allowed()) {
    _retries_throttled.fetch_add(1, std::memory_order_relaxed);
    call_outcome out = o;
    std::string why;  // as above
    try {
      why = std::string(o.message).append(" (retry budget of the channel exhausted: not retried)");
      out.message = why;
    } catch (const std::bad_alloc&) {
    }
    finish(st, out);
    return;
  }
  _retries.fetch_add(1, std::memory_order_relaxed);
  st->last = &m;
  attempt(st, payload);
}

}  // namespace ringrpc::detail

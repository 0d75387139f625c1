// Bytes to calls: receive completions feed the connection's frame assembler, each whole frame is
// verified and becomes a call dispatched to its endpoint, or is answered at once (bad frame,
// unknown method, busy, shutting down). A connection over its share stops being read.
#include "server/shard.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "server/server_core.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

namespace {
// Reserved: server::register_endpoint refuses every name starting "ringrpc.".
constexpr std::string_view builtin_ping_method = "ringrpc.ping";
}  // namespace

void shard::on_recv(connection* c, const io_uring_cqe& cqe) {
  if (cqe.flags & IORING_CQE_F_BUFFER) {
    const auto id = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    if (cqe.res > 0) {
      _counts[sc::bytes_in].add(static_cast<std::uint64_t>(cqe.res));
      c->last_read_ns = _turn_ns;
      c->liveness_checked = false;
      try {
        const auto bytes = _buffers->bytes(id, static_cast<std::size_t>(cqe.res));
        if (c->protocol == wire_protocol::frames) [[likely]] {
          deliver(c, bytes);
        } else {
          receive_unframed(c, bytes);  // shard_grpc.cpp
        }
      } catch (const std::bad_alloc&) {
        out_of_memory(c, "out of memory receiving from this connection");
      }
      charge_assembler(c);
    }
    // The bytes were copied into calls or the connection's assembly buffer: the kernel may
    // reuse this buffer as soon as the batch is committed.
    _buffers->recycle(id);
  }
  if (cqe.flags & IORING_CQE_F_MORE) return;

  // The multishot receive has ended; decide whether to re-arm it.
  c->receive = recv_state::idle;
  if (cqe.res == 0) {
    // End of the peer's stream: a half-close (shutdown(SHUT_WR)) or a close. Either way every
    // complete request already received is answered (docs/protocol.md); a peer that closed
    // altogether makes the reply's write fail, and that cancels what is still running.
    note_peer_ended(c);
    c->half_closed = true;
  } else if (cqe.res < 0 && cqe.res != -ENOBUFS && cqe.res != -ECANCELED) {
    note_closing(c);  // reset by peer and friends: nothing more will arrive
    mark_gone(c);
    if (c->failure().empty()) c->note_failure(std::string("receive failed: ").append(std::strerror(-cqe.res)));
  } else if (!is_closing(c) && !_quiesced) {
    // -ENOBUFS: every provided buffer was in use. No byte was lost (the data stays in the
    // socket); re-arm once this turn has given its buffers back. -ECANCELED: we paused, but a
    // resume may already have been handled while the cancel was in flight; end_of_turn()
    // re-arms only if the connection is not paused (again) by then.
    retain(c);
    _rearm.push_back(c);
  }
  maybe_finish(c);
}

void shard::deliver(connection* c, std::span<const std::byte> data) {
  if (is_closing(c)) return;
  if (c->paused.load(std::memory_order_relaxed) || c->budget_paused) {
    if (!c->assembler.hold(data)) out_of_memory(c, "out of memory keeping a paused connection's bytes");
    // A paused gRPC connection reads on (reads_while_paused), its calls held here; past the
    // per-connection request cap it stops too, as any paused connection does.
    if (reads_while_paused(c) && c->assembler.buffered() > _core.options().max_inflight_bytes_per_connection) {
      cancel_recv(c);
    }
    return;
  }
  auto sink = [this, c](std::span<const std::byte> f) { return on_frame(c, f); };
  auto r = data.empty() ? c->assembler.drain(sink) : c->assembler.feed(data, sink);
  for (;;) {
    if (r == frame_assembler::result::frame_too_large) {
      _counts[sc::bad_frames].add();
      const std::string msg = "frame body of " + std::to_string(c->assembler.rejected_length()) +
                              " bytes exceeds the server's max_frame_bytes (" +
                              std::to_string(c->assembler.max_body_bytes()) + ")";
      answer(new_call(c), 0, wire::Kind::Error, status::frame_too_large, msg);
      c->note_failure(msg);
      start_close(c);
      return;
    }
    if (r == frame_assembler::result::no_memory) {
      out_of_memory(c, "out of memory assembling a frame; closing the connection");
      return;
    }
    if (r != frame_assembler::result::paused || is_closing(c)) return;
    if (c->budget_paused) return;  // kept; apply_budget() drains it on relief
    if (pause(c)) return;
    r = c->assembler.drain(sink);
  }
}

bool shard::should_pause(connection* c) const noexcept {
  const auto& o = _core.options();
  return over_limits(c, o.max_inflight_per_connection, o.max_inflight_bytes_per_connection) ||
         c->budget_paused;
}

bool shard::pause(connection* c) noexcept {
  c->paused.store(true, std::memory_order_seq_cst);
  // The responder clears the flag when the pressure goes; if it went before the flag was
  // visible, nobody would send the resume, so look again and undo the pause ourselves.
  if (!should_pause(c) && c->paused.exchange(false, std::memory_order_seq_cst)) return false;
  _counts[sc::reads_paused].add();
  _core.post_event(event_kind::limit_hit, [&] {
    event e;
    e.peer = c->peer();
    const auto& o = _core.options();
    if (c->outstanding.load(std::memory_order_relaxed) >= o.max_inflight_per_connection) {
      e.name = "max_inflight_per_connection";
      e.value = o.max_inflight_per_connection;
    } else if (c->request_bytes.load(std::memory_order_relaxed) >= o.max_inflight_bytes_per_connection) {
      e.name = "max_inflight_bytes_per_connection";
      e.value = o.max_inflight_bytes_per_connection;
    } else {
      e.name = "max_queued_reply_bytes";
      e.value = o.max_queued_reply_bytes;
    }
    e.detail = "reading paused";
    e.id = c->id;
    return e;
  });
  // A gRPC connection goes on reading, its new calls held as frames: its replies wait for the
  // client's WINDOW_UPDATEs, which a paused receive would never see. What it holds meanwhile
  // is capped in deliver() (max_inflight_bytes_per_connection).
  if (!reads_while_paused(c)) cancel_recv(c);
  return true;
}

void shard::on_resume(connection* c) {
  if (c->reading != read_state::finished) {
    if (!c->budget_paused) {
      try {
        deliver(c, {});
      } catch (const std::bad_alloc&) {
        out_of_memory(c, "out of memory delivering kept frames");
      }
      charge_assembler(c);
    }
    if ((!c->paused.load(std::memory_order_relaxed) || reads_while_paused(c)) && !c->budget_paused &&
        c->receive == recv_state::idle && c->reading == read_state::open && !_quiesced) {
      arm_recv(c);
    }
    maybe_finish(c);
  }
  _to_release.push_back(c);  // the reference the resume message carried
}

bool shard::on_frame(connection* c, std::span<const std::byte> frame) {
  if (is_closing(c)) return false;
  call* k = new_call(c);
  try {
    k->request.assign(frame.begin(), frame.end());
  } catch (const std::bad_alloc&) {
    // Not even the id can be read without the copy: the connection goes, the server stays.
    std::vector<std::byte>().swap(k->request);
    answer(k, 0, wire::Kind::Error, status::server_busy, "server is out of memory; closing the connection");
    out_of_memory(c, "out of memory copying a frame");
    return false;
  }
  k->request_charged = frame.size();
  _account.charge(static_cast<std::int64_t>(frame.size()));
  c->request_bytes.store(c->request_bytes.load(std::memory_order_relaxed) + frame.size(),
                         std::memory_order_relaxed);
  decoded_frame decoded = decode_frame(k->request);
  frame_view& v = decoded.view;
  switch (decoded.outcome) {
    case decode_outcome::ok: break;
    case decode_outcome::malformed_with_id:
      _counts[sc::bad_frames].add();
      answer(k, v.call_id, wire::Kind::Error, status::bad_request,
             v.kind > wire::Kind::MAX ? "unknown frame kind"
                                      : "frame failed FlatBuffers verification");
      return !should_pause(c);
    case decode_outcome::malformed:
      // Without a trustworthy call id there is nobody to answer; the stream itself is suspect.
      _counts[sc::bad_frames].add();
      answer(k, 0, wire::Kind::Error, status::bad_request,
             "undecodable frame without a readable call id; closing the connection");
      c->note_failure("undecodable frame without a readable call id");
      start_close(c);
      return false;
  }

  if (v.call_id == 0 && v.kind != wire::Kind::Cancel) {
    // Id 0 is reserved for connection-level answers: a client could not tell ours apart.
    _counts[sc::bad_frames].add();
    answer(k, 0, wire::Kind::Error, status::bad_request,
           "call id 0 is reserved for connection-level errors; closing the connection");
    c->note_failure("a frame with the reserved call id 0");
    start_close(c);
    return false;
  }
  switch (v.kind) {
    case wire::Kind::Request:
    case wire::Kind::OneWay:
    case wire::Kind::StreamOpen:
      // A cancel names a call in flight; one left over from an earlier call with this id
      // (a cancel that raced the answer) must not cancel this new one.
      c->forget_cancel(v.call_id);
      _unposted = k;
      try {
        dispatch(k, v);
      } catch (const std::bad_alloc&) {
        // Building a refusal's message (or an event) ran out of memory: this call still gets
        // exactly one answer, unless it already has one.
        _core.note_out_of_memory();
        if (_unposted == k) answer(k, v.call_id, wire::Kind::Error, status::internal, "server is out of memory");
      }
      _unposted = nullptr;
      if (v.kind == wire::Kind::StreamOpen) [[unlikely]] remember_refused_open(c, v.call_id, v.stream_kind);
      break;
    case wire::Kind::Ping: answer(k, v.call_id, wire::Kind::Pong, status::ok, {}); break;
    case wire::Kind::Cancel:
      // The call's handler sees cancelled(); a call still queued is answered CANCELLED unrun.
      // Either way exactly one answer for it still comes.
      _counts[sc::cancel_requests].add();
      if (!cancel_stream(c, v.call_id)) {
        c->note_cancel(v.call_id);
        _hubs.fire(c, v.call_id);  // on_cancel hooks and the call's own calls, after the note
      }
      // Nothing goes back for the cancel itself. Id 0: releasing this call must not forget
      // the cancel it just recorded.
      answer(k, 0, wire::Kind::OneWay, status::ok, {});
      break;
    case wire::Kind::StreamMessage:
    case wire::Kind::StreamHalfClose:
    case wire::Kind::StreamCredit: on_stream_frame(k, v); break;
    default:
      _counts[sc::bad_frames].add();
      answer(k, v.call_id, wire::Kind::Error, status::bad_request,
             "unexpected frame kind from a client");
      break;
  }
  return !is_closing(c) && !should_pause(c);
}

// A call's way to its endpoint, one check after another; each refusal answers the call (and
// may post a call_rejected event) and ends it here. What a plain call to a known method meets
// is written here or in inline steps; the refusals and the rare checks are functions of their
// own, called only when needed.
void shard::dispatch(call* k, const frame_view& v) {
  _counts[sc::calls_received].add();
  const auto refuse_kind = v.kind == wire::Kind::OneWay ? wire::Kind::OneWay : wire::Kind::Error;
  if (const bool no_memory = _core.budget().exhausted(); no_memory || _core.draining()) {
    refuse_by_server(k, v.call_id, refuse_kind, no_memory);
    return;
  }
  // Metadata or server-wide checks (tokens, an authorizer): rare, and off the path of a plain
  // call, which pays these two tests only. A connection with a rare part (every TLS one, any
  // that sent a cancel) needs the guard only for those too; its calls just carry its identity,
  // as the guard would have set it, for call_context::peer() and endpoint authorizers.
  if (v.metadata != nullptr || _core.guard().checks_every_call()) [[unlikely]] {
    if (!admit_caller(k, v, refuse_kind)) return;
  } else if (k->conn->rare.load(std::memory_order_relaxed) != nullptr) [[unlikely]] {
    k->peer = k->conn->identity();
  }
  // Most connections call one method over and over: one compare instead of hashing its name.
  endpoint_slot* slot = _last_slot != nullptr && v.method == _last_method ? _last_slot : look_up(k, v, refuse_kind);
  if (slot == nullptr) return;
  if (const authorizer* a = slot->options().authorizer.get()) [[unlikely]] {
    if (!admit_at_endpoint(k, v, *a, refuse_kind)) return;
  }
  prepare(k, v, slot);
  const std::uint32_t in_flight = charge_share(k);
  if (v.kind == wire::Kind::StreamOpen) [[unlikely]] {
    open_stream(k, v, slot, in_flight);  // the stream's own lane, not the endpoint's queue
    return;
  }
  hand_over(k, v.call_id, slot, in_flight, refuse_kind);
}

// Refusals build their event only if some queue wants call_rejected (post_event), so a server
// nobody listens to pays nothing for them. `name` is a knob, stage, endpoint or pool, never the
// caller's method or metadata: those are the caller's bytes and may hold a token.
void shard::post_rejected(const call* k, std::uint64_t id, std::string_view name, std::string_view detail) noexcept {
  _core.post_event(event_kind::call_rejected, [&] {
    event e;
    e.peer = k->conn->peer();
    e.name = name;
    e.detail = detail;
    e.id = id;
    return e;
  });
}

// What the whole server cannot take, whatever the call: memory (checked first), or a drain.
void shard::refuse_by_server(call* k, std::uint64_t id, wire::Kind refuse_kind, bool no_memory) {
  if (no_memory) {
    // Memory, not a pool, is short: refuse before the call holds anything more.
    _counts[sc::calls_rejected_busy].add();
    _counts[sc::calls_rejected_memory].add();
    post_rejected(k, id, "max_buffered_bytes", "memory_budget");
    answer(k, id, refuse_kind, status::server_busy,
           "server memory budget is exhausted (max_buffered_bytes " +
               std::to_string(_core.budget().limit()) + ")",
           50);
    return;
  }
  _counts[sc::calls_rejected_stopping].add();
  post_rejected(k, id, {}, "shutting_down");
  answer(k, id, refuse_kind, status::shutting_down, "server is shutting down");
}

// A refusal by the call guard (tokens, authorizers), counted by its status.
void shard::refuse_guarded(call* k, std::uint64_t id, wire::Kind refuse_kind, status code, std::string_view why,
                           const char* stage, std::uint32_t retry_after_ms) {
  _core.guard().count(code);
  // Logged rate-limited by the event log; the event names only the stage and the verdict.
  post_rejected(k, id, stage, to_string(code));
  answer(k, id, refuse_kind, code, why, retry_after_ms);
}

// The call guard's verdict on the caller (its token, the server-wide authorizer); false if the
// call was refused (answered), and the connection closed when it failed too often.
bool shard::admit_caller(call* k, const frame_view& v, wire::Kind refuse_kind) {
  std::string why;
  call_guard::refusal r;
  connection* c = k->conn;
  const status s = _core.guard().admit_caller(*c, *k, v, _turn_ns, why, r);  // may throw bad_alloc
  if (s == status::ok) return true;
  refuse_guarded(k, v.call_id, refuse_kind, s, why, "caller", r.retry_after_ms);
  if (r.close) {
    // Answered first: the peer reads why before the close (docs/security.md).
    c->note_failure("closed after auth_failures.per_connection (" +
                    std::to_string(_core.options().auth_failures.per_connection) +
                    ") failed or refused bearer tokens");
    start_close(c);
  }
  return false;
}

// The endpoint's authorizer's verdict; false if the call was refused (answered).
bool shard::admit_at_endpoint(call* k, const frame_view& v, const authorizer& a, wire::Kind refuse_kind) {
  std::string why;
  const status s = _core.guard().admit_endpoint(a, *k, v, why);
  if (s == status::ok) return true;
  refuse_guarded(k, v.call_id, refuse_kind, s, why, "endpoint");
  return false;
}

// The endpoint serving a method other than the last one, or null once the call is answered
// (the built-in ping, or an unknown method).
endpoint_slot* shard::look_up(call* k, const frame_view& v, wire::Kind refuse_kind) {
  if (endpoint_slot* slot = _table->find(v.method)) {
    _last_method.assign(v.method);  // may throw: on_frame answers the call
    _last_slot = slot;
    return slot;
  }
  // The built-in ping is never in the table (names under "ringrpc." are refused at
  // registration), so plain calls pay nothing for it: only a lookup that missed looks here.
  if (v.method == builtin_ping_method) {
    answer_ping(k, v.call_id, refuse_kind);
    return nullptr;
  }
  _counts[sc::calls_unknown].add();
  answer(k, v.call_id, refuse_kind, status::unknown_method, "no method named '" + std::string(v.method) + "'");
  return nullptr;
}

// The call as its handler will see it: what it asks of whom, and by when.
inline void shard::prepare(call* k, const frame_view& v, endpoint_slot* slot) noexcept {
  k->id = v.call_id;
  k->kind = v.kind;
  k->purpose = v.kind == wire::Kind::OneWay ? call_purpose::one_way : call_purpose::request;
  k->target = slot;
  k->method_name = v.method;  // inside k->request
  k->payload = v.payload;
  k->received_ns = _turn_ns;
  // A budget beyond 10^15 us (31 years; e.g. UINT64_MAX) means "no deadline", as documented.
  constexpr std::uint64_t max_budget_us = 1'000'000'000'000'000ull;
  k->deadline_ns = v.timeout_us == 0 || v.timeout_us > max_budget_us
                       ? 0
                       : k->received_ns + static_cast<std::int64_t>(v.timeout_us) * 1000;
}

// Fair share by cost: a caller whose calls in flight already weigh fair_share_calls units or
// more (a call weighs 1 + its connection's recent handler time / 5 ms; caller_shares.hpp) has
// this one wait behind everyone else's (docs/execution.md). A caller is the connection (its
// own counters, written by this thread only: a load and a store) or every connection from
// its address (one relaxed add on a counter only that address's connections touch); nothing
// is shared between callers. Once some of a caller's calls wait over its share, its later
// ones follow them there, so one caller's calls are not reordered between the two queues.
// The pool reads the connection's recent cost (cost_hint) to keep a slow backlog to its
// share of the workers' time (pool_queue.hpp). Returns the caller's units in flight with
// this call.
inline std::uint32_t shard::charge_share(call* k) noexcept {
  caller_share& share = *k->conn->share;
  const std::uint32_t units = call_units(k->conn->recent_cost.load(std::memory_order_relaxed));
  const bool own = &share == &k->conn->own_share;
  const std::uint32_t before = add_to_share(share.units_in_flight, units, own);
  k->share_counted = true;
  k->cost_units = units;
  k->cost_hint = &k->conn->recent_cost;
  k->over_share = before >= _core.options().fair_share_calls ||
                  share.over_share_pending.load(std::memory_order_relaxed) > 0;
  if (k->over_share) add_to_share(share.over_share_pending, 1, own);
  return before + units;
}

// The endpoint takes the call (runs it, queues it, or answers it) or refuses it: full, or
// stopped.
inline void shard::hand_over(call* k, std::uint64_t id, endpoint_slot* slot, std::uint32_t in_flight,
                             wire::Kind refuse_kind) {
  // A direct endpoint runs the call here: its stretch starts now, not at the last mark (the
  // shard's own work since then is not the handler's).
  const bool runs_here = slot->pool() == nullptr;
  if (runs_here) mark_user_code();
  const auto admitted = slot->admit(k);
  if (admitted != endpoint_slot::admit_result::busy && admitted != endpoint_slot::admit_result::stopped) {
    _unposted = nullptr;  // another thread may own (and recycle) k from here on
  }
  switch (admitted) {
    case endpoint_slot::admit_result::submitted:
      _enqueued.add();
      note_submitted(slot->pool());
      return;
    case endpoint_slot::admit_result::ran:
      // Ran here (direct, or an execution endpoint's one-way): its reply may be queued already,
      // and k recycled with the frame's bytes; the slot's name stays.
      _enqueued.add();
      user_code_ran(slot->name());
      return;
    case endpoint_slot::admit_result::taken:
      // Joined an inbox: its reply may be queued already.
      _enqueued.add();
      return;
    case endpoint_slot::admit_result::answered:
      _enqueued.add();
      return;
    case endpoint_slot::admit_result::busy:
      _counts[sc::calls_rejected_busy].add();
      refuse_full(k, id, slot, in_flight, refuse_kind);
      return;
    case endpoint_slot::admit_result::stopped:
      _counts[sc::calls_rejected_stopping].add();
      refuse_stopped(k, id, slot, refuse_kind);
      return;
  }
}

void shard::refuse_stopped(call* k, std::uint64_t id, endpoint_slot* slot, wire::Kind refuse_kind) {
  post_rejected(k, id, slot->name(), "endpoint_stopped");
  answer(k, id, refuse_kind, status::shutting_down, "endpoint '" + slot->name() + "' is stopped");
}

// The endpoint's pool or inbox is full. A caller over its fair share is told so, with a
// back-off that grows with what it has in flight; anyone else is told which queue is full.
void shard::refuse_full(call* k, std::uint64_t id, endpoint_slot* slot, std::uint32_t in_flight,
                        wire::Kind refuse_kind) {
  thread_pool* p = slot->pool();
  if (k->over_share && p != nullptr && !slot->serial()) {
    // Its share's queue is full: back off longer the more it already has in flight.
    const unsigned fair = std::max(1u, _core.options().fair_share_calls);
    const std::uint32_t retry = 10 * std::min<std::uint32_t>(100, in_flight / fair);
    answer(k, id, refuse_kind, status::server_busy,
           (k->conn->share == &k->conn->own_share ? std::string("connection")
                                                   : std::string("address ").append(k->conn->address.host())) +
               " is over its fair share of pool '" + p->name() + "' (calls weighing " +
               std::to_string(in_flight) + " units in flight; fair_share_calls " +
               std::to_string(fair) + ")",
           retry);
    return;
  }
  const bool inbox = p == nullptr || slot->serial();
  post_rejected(k, id, inbox ? slot->name() : p->name(), inbox ? "inbox_full" : "pool_full");
  answer(k, id, refuse_kind, status::server_busy,
         inbox ? "endpoint '" + slot->name() + "' has " + std::to_string(slot->options().inbox_capacity) +
                     " messages waiting (inbox_capacity)"
               : "pool '" + p->name() + "' is full (" + _core.pool_state(*p) + ")",
         10);
}

void shard::answer_ping(call* k, std::uint64_t id, wire::Kind kind) noexcept {
  // Answered here, on the reader: no handler thread, no queue. It says the server is running
  // and reading this connection, and whether it wants new calls (docs/protocol.md, 7.1).
  if (_core.leaving()) {
    answer(k, id, kind, status::shutting_down, "server is stopping; move calls to another member");
    return;
  }
  answer(k, id, kind == wire::Kind::OneWay ? kind : wire::Kind::Reply, status::ok, {});
}

call* shard::new_call(connection* c) noexcept {
  call* k = _calls.get();
  k->conn = c;
  retain_for_call(c);
  k->reply.clear();
  k->payload = {};
  k->deadline_ns = 0;
  k->id = 0;
  k->purpose = call_purpose::request;
  _created.add();
  return k;
}

void shard::answer(call* k, std::uint64_t id, wire::Kind kind, status code,
                    std::string_view message, std::uint32_t retry_after_ms) noexcept {
  k->id = id;
  k->kind = kind;
  if (_unposted == k) _unposted = nullptr;
  _core.answer(k, kind, code, message, retry_after_ms);  // answer.cpp: the one way back
}

}  // namespace ringrpc::detail

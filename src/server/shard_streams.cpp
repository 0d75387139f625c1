// Streams on the shard's thread (docs/design/streams.md, "Server"): a StreamOpen that passed
// dispatch()'s checks becomes a stream in its connection's table; the frames naming an open
// stream go to it; frames naming none are strays; and the ends the shard itself decides — a
// client's Cancel, the deadline (the sweep), the connection gone, the server stopping.
#include "server/shard.hpp"

#include <algorithm>
#include <string>

#include "base/tcp_keepalive.hpp"
#include "server/address_streams.hpp"
#include "server/server_core.hpp"
#include "server/stream_endpoint.hpp"
#include "server/stream_state.hpp"

namespace ringrpc::detail {

namespace {

constexpr std::uint32_t max_stream_protocol_errors = 100;
// The rapid-reset bucket: an open then a cancel before the server wrote anything costs the
// server a stream, a drain and an end, and the client two small frames; past a burst of
// these, at most this many a second per connection.
constexpr double reset_burst = 200;
constexpr double resets_per_second = 100;

stream_table<stream_state>* streams_of(const connection* c) noexcept {
  connection::connection_rare* r = c->rare.load(std::memory_order_relaxed);
  return r != nullptr ? &r->streams : nullptr;
}

// A connection's first stream: from now on it may hold calls that wait on the peer for as long
// as the peer likes (the idle timeout never closes it), so a peer that vanished is found by TCP
// keepalive instead, within idle_timeout: probes after half of it, five more in the other half
// (base/tcp_keepalive.hpp). idle_timeout 0 ("never close") asks for none.
void keep_alive_for_streams(connection* c, connection::connection_rare& rare, std::chrono::milliseconds idle) noexcept {
  if (rare.keepalive_on) return;
  rare.keepalive_on = true;
  if (idle.count() <= 0) return;
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(idle);
  (void)enable_keepalive(c->fd, whole / 2, whole / 10, 5);  // no keepalive on a socket that refuses it
}

}  // namespace

// After every check a Request meets (dispatch()), and charged to the caller's share like one:
// what is left is the method's kind, the connection's cap, and making the stream.
void shard::open_stream(call* k, const frame_view& v, endpoint_slot* slot, std::uint32_t in_flight) {
  connection* c = k->conn;
  const auto* ep = dynamic_cast<const stream_endpoint*>(&slot->target());
  if (ep == nullptr || static_cast<std::uint8_t>(ep->kind()) != v.stream_kind) {
    _counts[sc::bad_frames].add();
    answer(k, v.call_id, wire::Kind::Error, status::bad_request,
           ep == nullptr ? "method '" + std::string(v.method) + "' is not a stream; call it with Request"
                         : stream_kind_mismatch(v.method, ep->kind()));
    stream_protocol_error(c);
    return;
  }
  stream_table<stream_state>& table = c->rare_part().streams;
  if (table.find(v.call_id) != nullptr) {
    _counts[sc::bad_frames].add();
    answer(k, v.call_id, wire::Kind::Error, status::bad_request,
           "stream " + std::to_string(v.call_id) + " is open already");
    stream_protocol_error(c);
    return;
  }
  std::shared_ptr<address_streams::count> from;
  if (!take_stream_slots(k, v.call_id, c, table.size(), from)) return;  // answered
  if (!slot->enter_stream()) {
    give_back_stream_slots(from.get());
    _counts[sc::calls_rejected_stopping].add();
    refuse_stopped(k, v.call_id, slot, wire::Kind::Error);
    return;
  }
  std::shared_ptr<stream_state> s;
  call* end = new_call(c);
  end->id = v.call_id;
  end->deadline_ns = k->deadline_ns;
  try {
    s = std::make_shared<stream_state>(_core, k, end, v, *slot, ep->factory(), ep->kind());
    table.insert(v.call_id, s.get());  // throws only before anything was added: k is answered
  } catch (...) {
    release_quietly(end);
    give_back_stream_slots(from.get());
    slot->leave_stream();
    throw;
  }
  s->hold_address_slot(from);  // before start(): from then on a handler thread may end it
  if (!s->start()) {
    // The pool is full, or this caller is over its share: refused as a call would be, and
    // nothing of the stream is left (the id is remembered as refused: remember_refused_open).
    table.forget(v.call_id);
    call* open = s->take_back_open();
    release_quietly(s->take_back_end());
    s.reset();
    give_back_stream_slots(from.get());
    slot->leave_stream();
    _counts[sc::calls_rejected_busy].add();
    refuse_full(open, v.call_id, slot, in_flight, wire::Kind::Error);
    return;
  }
  _unposted = nullptr;  // the stream owns k now: it carries the stream's end
  _counts[sc::streams_opened].add();
  stream_state* raw = s.get();
  raw->table_ref = std::move(s);
  keep_alive_for_streams(c, c->rare_part(), _core.options().idle_timeout);
}

// The three caps on open streams, in the order a client is most likely to meet them: its
// connection's, its address's (all its connections), the server's. Each refusal is answered
// SERVER_BUSY naming the knob, and counted by which it was; on success the caller holds one
// slot of each (give_back_stream_slots, or the stream's end, returns them).
bool shard::take_stream_slots(call* k, std::uint64_t id, connection* c, std::size_t open_here,
                              std::shared_ptr<address_streams::count>& from) {
  const server_options& o = _core.options();
  // Each open stream holds one of the connection's max_inflight_per_connection calls until
  // it ends, and its end may need frames only the connection's reading brings (a half-close,
  // credit): at least one call must stay free for them, or reading would pause for good.
  const unsigned inflight = o.max_inflight_per_connection;
  const bool by_inflight = o.max_streams_per_connection == 0 || inflight <= o.max_streams_per_connection;
  const std::size_t cap = by_inflight ? (inflight > 0 ? inflight - 1 : 0) : o.max_streams_per_connection;
  if (open_here >= cap) {
    const char* knob = by_inflight ? "max_inflight_per_connection" : "max_streams_per_connection";
    refuse_stream(k, id, sc::streams_refused_per_connection, knob,
                  "connection has " + std::to_string(open_here) + " open streams (" + knob + " " +
                      std::to_string(by_inflight ? inflight : o.max_streams_per_connection) + ")");
    return false;
  }
  connection::connection_rare& rare = c->rare_part();
  if (!rare.streams_from_address) rare.streams_from_address = _core.stream_addresses().of(c->address.host());
  if (!rare.streams_from_address->take(o.max_streams_per_address)) {
    refuse_stream(k, id, sc::streams_refused_per_address, "max_streams_per_address",
                  "server has max_streams_per_address (" + std::to_string(o.max_streams_per_address) +
                      ") open streams from " + c->address.host());
    return false;
  }
  if (!_core.take_stream_slot(o.max_streams)) {
    rare.streams_from_address->give_back();
    refuse_stream(k, id, sc::streams_refused_server, "max_streams",
                  "server has " + std::to_string(o.max_streams) + " open streams (max_streams)");
    return false;
  }
  from = rare.streams_from_address;
  return true;
}

void shard::refuse_stream(call* k, std::uint64_t id, server_counter which, const char* knob, std::string message) {
  _counts[sc::calls_rejected_busy].add();
  _counts[which].add();
  post_rejected(k, id, knob, "streams");
  answer(k, id, wire::Kind::Error, status::server_busy, std::move(message), 10);
}

void shard::give_back_stream_slots(address_streams::count* from) noexcept {
  if (from != nullptr) from->give_back();  // first, as at a stream's end (stream_state.cpp)
  _core.give_back_stream_slot();
}

// An open refused on any ground (dispatch()'s checks, the kind, the caps, a full pool) is
// remembered as an end: the client may have sent messages on its initial credit before the
// refusal reached it, and those are what it had in flight, not strays to count against it.
void shard::remember_refused_open(connection* c, std::uint64_t id, std::uint8_t kind) noexcept {
  // A server stream's client sends nothing after its open but grants, which a refusal does not
  // invite: nothing to excuse, and no ended stream's id pushed out of the table's memory.
  if (kind == static_cast<std::uint8_t>(stream_kind::server)) return;
  try {
    stream_table<stream_state>& table = c->rare_part().streams;
    if (table.find(id) == nullptr) table.remember_end(id);
  } catch (const std::bad_alloc&) {
    // No room for the connection's rare part: its messages count as strays, a bounded harm.
  }
}

void shard::on_stream_frame(call* k, const frame_view& v) noexcept {
  connection* c = k->conn;
  stream_table<stream_state>* table = streams_of(c);
  stream_state* s = table != nullptr ? table->find(v.call_id) : nullptr;
  if (s == nullptr || s->ended()) {
    // What a client had in flight when its stream's end crossed it is dropped, and is no
    // error. A frame for an id that was never open (or ended too long ago to tell) is dropped
    // and counted toward the protocol error cap, but never answered: an answer carries the
    // id, which the client may have given to a new call by now.
    const bool late = s != nullptr || (table != nullptr && table->recently_ended(v.call_id));
    release_quietly(k);
    if (!late) {
      _counts[sc::bad_frames].add();
      stream_protocol_error(c);
    }
    return;
  }
  k->id = v.call_id;
  k->kind = v.kind;
  k->purpose = call_purpose::request;
  switch (v.kind) {
    case wire::Kind::StreamMessage:
      if (s->kind() == stream_kind::server || s->half_closed()) {
        release_quietly(k);
        s->end(status::bad_request,
               s->half_closed() ? "a stream message after the half-close" : "a server stream takes no messages",
               false);
        stream_protocol_error(c);
        return;
      }
      k->payload = v.payload;
      charge_message_share(k);
      _counts[sc::stream_messages_received].add();
      switch (s->on_message(k)) {
        case stream_state::arrival::queued: return;
        case stream_state::arrival::ended: release_quietly(k); return;
        case stream_state::arrival::beyond_credit:
          release_quietly(k);
          stream_protocol_error(c);
          return;
      }
      return;
    case wire::Kind::StreamHalfClose:
      if (s->half_closed()) {
        release_quietly(k);  // said twice: nothing new
        return;
      }
      s->on_half_close(k);
      return;
    default: {  // StreamCredit
      const bool ok = s->on_credit(v.credit_messages, v.credit_bytes);
      release_quietly(k);
      if (!ok) stream_protocol_error(c);
      return;
    }
  }
}

bool shard::cancel_stream(connection* c, std::uint64_t id) noexcept {
  stream_table<stream_state>* table = streams_of(c);
  stream_state* s = table != nullptr ? table->find(id) : nullptr;
  if (s == nullptr) return false;
  if (s->wrote_nothing() && !take_reset_token(*c->rare.load(std::memory_order_relaxed))) {
    // The HTTP/2 "rapid reset" pattern: told why on call id 0, then closed. The stream ends
    // with the connection.
    answer(new_call(c), 0, wire::Kind::Error, status::resource_exhausted,
           "too many streams cancelled before an answer; closing the connection");
    c->note_failure("too many streams cancelled before an answer (rapid reset)");
    start_close(c);
    return true;
  }
  // The client still gets the stream's end (Cancelled, unless another end was on its way), so
  // both sides free the id on a frame.
  s->end(status::cancelled, "cancelled by the client", false);
  return true;
}

bool shard::take_reset_token(connection::connection_rare& r) noexcept {
  if (r.reset_tokens < 0) {
    r.reset_tokens = reset_burst;
    r.reset_refilled_ns = _turn_ns;
  }
  const double refill = static_cast<double>(_turn_ns - r.reset_refilled_ns) * 1e-9 * resets_per_second;
  r.reset_tokens = std::min(reset_burst, r.reset_tokens + refill);
  r.reset_refilled_ns = _turn_ns;
  if (r.reset_tokens < 1) return false;
  r.reset_tokens -= 1;
  return true;
}

void shard::end_streams(connection* c, status code, std::string_view why) noexcept {
  if (stream_table<stream_state>* table = streams_of(c)) {
    table->for_each([&](std::uint64_t, stream_state* s) { s->end(code, why, false); });
  }
}

void shard::expire_streams(connection* c) noexcept {
  stream_table<stream_state>* table = streams_of(c);
  if (table == nullptr || table->empty()) return;
  table->for_each([&](std::uint64_t, stream_state* s) {
    if (s->deadline_ns() != 0 && _turn_ns > s->deadline_ns()) {
      s->end(status::deadline_exceeded, "stream deadline passed", false);
    }
  });
}

void shard::stream_end_taken(call* end) noexcept {
  stream_state* s = end->stream;
  end->stream = nullptr;
  end->stream_end = false;
  stream_table<stream_state>* table = streams_of(end->conn);
  // By identity: the client may already have opened a new stream under this id.
  if (table != nullptr && table->find(s->id()) == s) table->erase(s->id());
  const std::shared_ptr<stream_state> last = std::move(s->table_ref);  // may be the last reference
}

// The responder took a written stream message off the connection's stream cap: once below
// half of it, writers it held back write again (stream_state::write, on_room).
void shard::stream_out_released(connection* c, std::uint32_t bytes) noexcept {
  _counts[sc::stream_messages_sent].add();
  std::atomic<std::size_t>& held = c->rare.load(std::memory_order_relaxed)->stream_out_bytes;
  const std::size_t before = held.fetch_sub(bytes, std::memory_order_seq_cst);
  const std::size_t half = _core.options().max_queued_reply_bytes / 2;
  if (before <= half || before - bytes > half) return;
  if (stream_table<stream_state>* table = streams_of(c)) {
    table->for_each([](std::uint64_t, stream_state* s) { s->on_room(); });
  }
}

// Stray frames, credit violations and kind mismatches: a client past the cap is broken or
// hostile, and the connection goes (answered first, on call id 0).
void shard::stream_protocol_error(connection* c) noexcept {
  connection::connection_rare* r = nullptr;
  try {
    r = &c->rare_part();  // a client that sends only strays has none yet
  } catch (const std::bad_alloc&) {
    return;
  }
  if (++r->stream_protocol_errors <= max_stream_protocol_errors || is_closing(c)) return;
  answer(new_call(c), 0, wire::Kind::Error, status::bad_request,
         "too many stream protocol errors; closing the connection");
  c->note_failure("too many stream protocol errors");
  start_close(c);
}

// Fair share (docs/design/streams.md): a message waiting for or in its handler is one unit of
// its caller's share, as a call is, so a streaming caller's calls go over its share as soon as
// a calling one's would. Released with the message's call (responder::release_call).
void shard::charge_message_share(call* m) noexcept {
  connection* c = m->conn;
  caller_share& share = *c->share;
  if (&share == &c->own_share) {  // this thread alone writes it
    share.units_in_flight.store(share.units_in_flight.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    share.units_in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  m->share_counted = true;
  m->cost_units = 1;
}

// A frame that needs no answer: its call goes back through the responder, which releases it.
void shard::release_quietly(call* k) noexcept { answer(k, 0, wire::Kind::OneWay, status::ok, {}); }

}  // namespace ringrpc::detail

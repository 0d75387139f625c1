// One stream's life on the server: the lane that runs its callbacks one at a time on the
// method's pool, its writes and credit, and its one end (docs/design/streams.md, "Server
// internals: what carries what").
#include "server/stream_state.hpp"

#include <sys/socket.h>

#include <new>
#include <string>
#include <utility>

#include "ringrpc/call_context.hpp"
#include "server/answer.hpp"
#include "server/connection.hpp"
#include "server/server_core.hpp"
#include "server/shard.hpp"
#include "server/user_code.hpp"

namespace ringrpc::detail {

namespace {

// The open's metadata, kept: the open call (and the frame it points into) goes once the
// factory has run, and a handler may look later.
std::vector<metadata_entry> copy_metadata(const frame_view& v) {
  std::vector<metadata_entry> out;
  if (v.metadata == nullptr) return out;
  const metadata_view view(v.metadata);
  out.reserve(view.size());
  for (const metadata_item item : view) out.push_back({std::string(item.key), std::string(item.value)});
  return out;
}

// The identity the open call points at (the connection's, or an accepted token's), shared:
// the connection retires a replaced identity only until it goes, and a handle may outlive it.
std::shared_ptr<const peer_identity> shared_peer(const call& open) {
  if (open.peer == nullptr) return nullptr;
  const connection::connection_rare* r = open.conn->rare.load(std::memory_order_relaxed);
  if (r == nullptr) return nullptr;
  for (const auto& t : r->token_identities) {
    if (t.get() == open.peer) return t;
  }
  std::shared_ptr<const peer_identity> id = open.conn->identity_shared();
  return id.get() == open.peer ? id : nullptr;
}

// The received message whose on_message this thread is running, and its stream: the first
// write from inside that callback may travel in the message's own call (stream_state::_carrier).
struct running_message {
  const stream_state* stream = nullptr;
  call* m = nullptr;
};
thread_local constinit running_message running_here{};

}  // namespace

stream_state::stream_state(server_core& core, call* open, call* end, const frame_view& v, endpoint_slot& slot,
                           std::shared_ptr<const stream_factory> factory, stream_kind kind)
    : _core(core),
      _slot(slot),
      _pool(*slot.pool()),
      _factory(std::move(factory)),
      _id(v.call_id),
      _kind(kind),
      _deadline_ns(end->deadline_ns),
      _method(v.method),
      _metadata(copy_metadata(v)),
      _peer(shared_peer(*open)),
      _request(kind == stream_kind::server ? v.payload : std::span<const std::byte>{}),
      _open(open),
      _end(end),
      _conn(end->conn),
      _out_bytes(end->conn->rare.load(std::memory_order_relaxed)->stream_out_bytes),
      _send(v.credit_messages == 0 ? default_stream_window_messages : v.credit_messages,
            v.credit_bytes == 0 ? default_stream_window_bytes : v.credit_bytes) {
  _drain.self = this;
  _drain.run = &stream_state::drain_entry;
  _drain.label = "stream";
}

stream_state::~stream_state() = default;

bool stream_state::start() noexcept {
  // The lane is new: this push makes the shard its owner, with the drain ours to submit.
  (void)_lane.push(&_open_item);
  // Unlike the drains after it (singletons: what they run was admitted by credit), the open
  // competes with calls: a full pool or a caller over its share is refused here as a call is.
  _drain.over_share = _open->over_share;
  _drain.cost_hint = _open->cost_hint;
  _drain.keep = shared_from_this();
  if (_pool.submit_now(&_drain)) return true;
  _drain.keep.reset();
  return false;
}

// --- the shard's thread

stream_state::arrival stream_state::on_message(call* m) noexcept {
  // An end that comes just after this look finds the message in the lane, which only releases
  // what it takes once the stream has ended.
  if (ended()) return arrival::ended;
  if (_receive.arrive(m->payload.size())) {
    push(m, true);
    return arrival::queued;
  }
  try {
    end(status::resource_exhausted, "stream " + std::to_string(_id) + " wrote beyond its credit", false);
  } catch (const std::bad_alloc&) {
    end(status::resource_exhausted, "stream wrote beyond its credit", false);
  }
  return arrival::beyond_credit;
}

void stream_state::on_half_close(call* h) noexcept {
  _half_closed = true;
  push(h, true);
}

bool stream_state::on_credit(std::uint32_t messages, std::uint64_t bytes) noexcept {
  bool overflow = false;
  bool wake = false;
  {
    std::lock_guard lock(_mu);
    if (_ended) return true;
    if (!_send.grant(messages, bytes)) {
      overflow = true;
    } else if (_want_writable && _send.can_send()) {
      _want_writable = false;
      wake = true;
    }
  }
  if (overflow) {
    end(status::bad_request, "credit overflow", false);
    return false;
  }
  if (wake) poke(signal_writable);
  return true;
}

// --- any thread

bool stream_state::end(status code, std::string_view message, bool by_handler,
                       std::span<const std::byte> reply) noexcept {
  {
    std::lock_guard lock(_mu);
    if (_ended) return false;
    _ended = true;
    _ended_flag.store(true, std::memory_order_release);
    _ended_by_handler = by_handler;
    encode_end_locked(code, message, reply);
    post_end_locked();
  }
  poke(signal_ended);
  return true;
}

void stream_state::encode_end_locked(status code, std::string_view message,
                                     std::span<const std::byte> reply) noexcept {
  call& o = *_end;
  if (_md) {
    if (_headers_sent) _md->headers.clear();  // they went with the first message
    o.response_md = std::move(_md);
  }
  _end_status = code;
  try {
    if (code == status::ok) {
      encode_answer(o, wire::Kind::Reply, status::ok, {}, 0, {}, reply);
    } else {
      encode_error(o, code, message);
      _end_status = o.answer_status;
    }
  } catch (const std::bad_alloc&) {
    // No memory for even the end: the client learns by its connection closing, as for calls.
    o.reply.clear();
    _core.note_out_of_memory();
    ::shutdown(_conn->fd, SHUT_RDWR);
  }
}

void stream_state::post_end_locked() noexcept {
  if (_carrier != nullptr) (void)flush_carrier_locked();  // the end follows every message
  call* o = std::exchange(_end, nullptr);
  // The responder's take of it erases the stream from its connection's table (shard thread).
  o->stream_end = true;
  o->stream = this;
  // Under the lock: the end follows every message written before it in the responder's inbox,
  // and these carriers rely on the end's call to keep the connection alive until they are out.
  _core.post_answer(o);
}

// Credit is the peer's promise to read; the connection's cap (stream_out_bytes, checked under
// the lock that on_room() takes after the responder lowered it, so a wake is never missed) is
// the server's own bound on what written messages may hold, whatever the peer granted.
write_result stream_state::write(std::span<const std::byte> message) noexcept {
  {
    std::lock_guard lock(_mu);
    if (_ended) return write_result::closed;
    const bool credit = _send.can_send();
    if (!credit || _out_bytes.load(std::memory_order_seq_cst) >= _core.options().max_queued_reply_bytes) {
      _want_writable = true;
      _core.note_stream_write_blocked(!credit);
      return write_result::would_block;
    }
    // A message already waiting in the carrier goes first: a second write from one
    // on_message, or a write from another thread while it runs.
    call* out = nullptr;
    const bool carried = running_here.stream == this;  // written from its on_message
    if (_carrier == nullptr || flush_carrier_locked()) {
      try {
        if (carried) {
          out = running_here.m;
          encode_message_locked(message, out->reply);
        } else {
          out = new_message_call_locked();
          try {
            encode_message_locked(message, out->reply);
          } catch (...) {
            _core.pool().put(out);
            throw;
          }
        }
      } catch (const std::bad_alloc&) {
        if (carried) out->reply.clear();
        out = nullptr;
      }
    }
    if (out != nullptr) {
      _headers_sent = true;
      _send.spend(message.size());
      out->stream_out_bytes = static_cast<std::uint32_t>(out->reply.size());
      _out_bytes.fetch_add(out->stream_out_bytes, std::memory_order_seq_cst);
      if (carried) {
        _carrier = out;  // posted by run_message, with the received message's release
      } else {
        _core.post_answer(out);
      }
      return write_result::ok;
    }
  }
  // Out of memory for the message: the stream cannot go on without losing it.
  _core.note_out_of_memory();
  end(status::resource_exhausted, "server is out of memory", false);
  return write_result::closed;
}

// A written message in a call of its own (stream_out: it holds none of the request's counts).
call* stream_state::new_message_call_locked() {
  call* out = _core.pool().get();
  out->conn = _conn;
  out->stream_out = true;
  out->id = _id;
  out->purpose = call_purpose::request;
  out->kind = wire::Kind::StreamMessage;
  return out;
}

void stream_state::encode_message_locked(std::span<const std::byte> message, std::vector<std::byte>& into) {
  if (_headers_sent || !_md || _md->headers.empty()) {
    // Nearly every message: laid out by hand, as a unary reply is (no builder, no copy).
    encode_payload_frame(_id, wire::Kind::StreamMessage, message, into);
    return;
  }
  frame_view f;
  f.call_id = _id;
  f.kind = wire::Kind::StreamMessage;
  f.payload = message;
  metadata_to_send headers;
  headers.pairs = _md->headers;
  f.metadata_out = &headers;
  thread_encoder().encode_into(f, into);
}

// The message waiting in the carrier goes out now in a call of its own, ahead of whatever is
// about to be posted; the received call stays the lane's until its on_message returns. False
// when there was no memory for that call: the message is dropped (its share of the
// connection's cap given back) and the stream has to end.
bool stream_state::flush_carrier_locked() noexcept {
  call* m = std::exchange(_carrier, nullptr);
  call* out = nullptr;
  try {
    out = new_message_call_locked();
  } catch (const std::bad_alloc&) {
    _core.note_out_of_memory();
    _out_bytes.fetch_sub(std::exchange(m->stream_out_bytes, 0), std::memory_order_seq_cst);
    m->reply.clear();
    return false;
  }
  out->reply.swap(m->reply);
  m->reply.clear();
  out->stream_out_bytes = std::exchange(m->stream_out_bytes, 0);
  _core.post_answer(out);
  return true;
}

void stream_state::on_room() noexcept {
  bool wake = false;
  {
    std::lock_guard lock(_mu);
    if (!_ended && _want_writable && _send.can_send()) {
      _want_writable = false;
      wake = true;
    }
  }
  if (wake) poke(signal_writable);
}

bool stream_state::add_pair(bool trailer, std::string_view key, std::string_view value) noexcept {
  std::lock_guard lock(_mu);
  if (_ended || (!trailer && _headers_sent)) return false;
  try {
    if (!_md) _md = std::make_unique<response_metadata>();
    return _md->add(trailer, key, value, _core.options().max_metadata_entries, _core.options().max_metadata_bytes);
  } catch (const std::bad_alloc&) {
    return false;
  }
}

// --- the lane

void stream_state::push(work_item* item, bool on_reader) noexcept {
  if (_lane.push(item) != serial_lane::push_result::owner) return;
  // The lane's owner alone touches _drain until the drain runs: no race on `keep`.
  _drain.keep = shared_from_this();
  // A singleton: each stream's drain waits in the pool at most once, and is never refused for
  // a full queue (the messages it runs were admitted by credit and the connection's caps).
  // From the reader, the wake-up waits for the end of its turn: a burst of messages for many
  // streams costs one wake, not one per stream (and on one core, no switch per message).
  if (!_pool.submit_singleton(&_drain, !on_reader)) {
    drain_entry(&_drain);  // the pool is stopping: run here
  } else if (on_reader) {
    _conn->owner->wake_at_end_of_turn(&_pool);
  }
}

void stream_state::poke(std::uint8_t signals) noexcept {
  _signals.fetch_or(signals, std::memory_order_seq_cst);
  // One poke waiting is enough: it reads every signal set until it runs.
  if (_poke_queued.exchange(true, std::memory_order_seq_cst)) return;
  push(&_poke_item);
}

void stream_state::drain_entry(pool_task* t) noexcept {
  auto* d = static_cast<drain_task*>(t);
  // Ours until the drain ends (the callbacks' handle holds it); a drain due after our
  // release() sets its own.
  d->self->drain(std::move(d->keep));
}

void stream_state::drain(std::shared_ptr<stream_state> keep) noexcept {
  // A callback that calls stop() must not wait for itself (server_stop.cpp).
  const server_core* const outer = std::exchange(running_user_code_of, &_core);
  struct restore {
    const server_core* previous;
    ~restore() { running_user_code_of = previous; }
  } const restore_user_code{outer};
  // Grants and writes from here are posted to the shard, woken once per burst of this worker.
  batch_reply_wakeups(&_core);
  server_stream handle(std::move(keep));  // no count taken per drain: the drain's own
  // Runs of this many items let the pool's other work in between (as a serial endpoint does).
  constexpr unsigned slice = 64;
  do {
    unsigned n = 0;
    while (work_item* w = _lane.pop()) {
      if (w == &_poke_item) {
        _poke_queued.store(false, std::memory_order_seq_cst);  // before reading the signals
        run_signals(handle);
      } else if (w == &_open_item) {
        run_open(handle);
      } else {
        take_received(handle, call::from_item(w));
      }
      if (++n >= slice && _lane.waiting() != 0) {
        _drain.keep = shared_from_this();
        if (_pool.submit_singleton(&_drain)) return;
        _drain.keep.reset();
        n = 0;  // the pool is stopping: go on here
      }
    }
  } while (_lane.release());
}

// A callback that throws fails its stream (its on_done still runs); the lane goes on.
template <class F>
void stream_state::guarded(F&& f) noexcept {
  try {
    f();
  } catch (const std::exception& e) {
    end(status::internal, e.what(), true);
  } catch (...) {
    end(status::internal, "stream handler threw a non-standard exception", true);
  }
}

void stream_state::run_open(server_stream& handle) noexcept {
  // Ended before it ran (cancelled, expired): no handler, and no interceptor saw it, as for a
  // call refused in its queue.
  if (!ended() && (_core.options().interceptors.empty() || intercept_open())) {
    std::unique_ptr<stream_handler> h;
    guarded([&] { h = (*_factory)(handle, _request); });
    _handler = std::move(h);
    if (!_handler) end(status::internal, "the stream's factory made no handler", true);
  }
  release_open();
}

// The interceptors see the open as they see a call, on the open's own call (its method,
// metadata, peer, deadline); a refusal ends the stream with its status before the factory runs.
// False: the stream has ended (refused, out of memory, or ended meanwhile).
bool stream_state::intercept_open() noexcept {
  try {
    _intercepted = std::make_unique<intercepted_stream>();
  } catch (const std::bad_alloc&) {
    _core.note_out_of_memory();
    end(status::resource_exhausted, "server is out of memory", true);
    return false;
  }
  call_context ctx(*_open, &_core);
  const call_verdict v = _intercepted->open(_core.options().interceptors, ctx, *_open, _metadata);
  // The open's call is done with: an on_cancel hook an interceptor added to it never runs (the
  // stream's cancellation is its handler's on_cancel), and the hub leaves the shard's registry.
  _core.close_hub(*_open);
  if (v.refused()) {
    end(v.code(), v.message(), true);  // by_handler: no on_cancel, there is no handler
    return false;
  }
  _annotations = _intercepted->take_notes();
  return !ended();
}

// The open call has done its part (the factory read its request): it goes back through the
// responder, which releases its bytes and its share on the connection's thread.
void stream_state::release_open() noexcept {
  call* o = std::exchange(_open, nullptr);
  _request = {};
  o->reply.clear();
  o->id = 0;  // its release must not forget a cancel noted for a later call under this id
  _core.post_answer(o);
}

void stream_state::run_message(server_stream& handle, call* m) noexcept {
  const bool alive = _handler && !ended();
  if (m->kind == wire::Kind::StreamHalfClose) {
    if (alive) guarded([&] { _handler->on_half_close(handle); });
    m->reply.clear();
    _core.post_answer(m);  // nothing to write: the responder releases it on the shard
    return;
  }
  if (alive) {
    const running_message outer = std::exchange(running_here, running_message{this, m});
    guarded([&] { _handler->on_message(handle, m->payload); });
    running_here = outer;
  }
  std::lock_guard lock(_mu);
  // Still the carrier: it holds the handler's one write, which goes out with this release.
  if (std::exchange(_carrier, nullptr) != m) m->reply.clear();
  if (!_ended) {
    // The message's own call carries the grant it earns back, if any (batched: stream_credit).
    if (const credit_grant g = _receive.consumed(m->payload.size())) {
      frame_view f;
      f.call_id = _id;
      f.kind = wire::Kind::StreamCredit;
      f.credit_messages = g.messages;
      f.credit_bytes = g.bytes;
      const std::size_t carried = m->reply.size();
      try {
        const std::span<const std::byte> grant = thread_encoder().encode(f);
        m->reply.insert(m->reply.end(), grant.begin(), grant.end());
      } catch (const std::bad_alloc&) {
        m->reply.resize(carried);  // the client waits for credit; its stream ends by deadline or cancel
        _core.note_out_of_memory();
      }
    }
  }
  // Under the lock: a grant never follows the stream's end.
  _core.post_answer(m);
}

void stream_state::resume_reading() noexcept {
  _reading_paused.store(false, std::memory_order_seq_cst);
  poke(signal_resume);
}

// A received message or half-close: handled now, or held behind the ones already waiting
// while reading is paused (pause_reading), so the order stays the client's.
void stream_state::take_received(server_stream& handle, call* m) noexcept {
  // Once the stream has ended nothing is handed on: run_message only releases (the end's
  // signal releases what was held).
  if (ended() || (_held_head == nullptr && !_reading_paused.load(std::memory_order_seq_cst))) {
    run_message(handle, m);
    return;
  }
  m->wq_next = nullptr;
  if (_held_tail != nullptr) {
    _held_tail->wq_next = m;
  } else {
    _held_head = m;
  }
  _held_tail = m;
}

// The held calls, in order, until reading is paused again (or all of them once the stream has
// ended: then they are only released).
void stream_state::run_held(server_stream& handle) noexcept {
  while (_held_head != nullptr && (!_reading_paused.load(std::memory_order_seq_cst) || ended())) {
    call* m = std::exchange(_held_head, _held_head->wq_next);
    if (_held_head == nullptr) _held_tail = nullptr;
    m->wq_next = nullptr;
    run_message(handle, m);
  }
}

void stream_state::run_signals(server_stream& handle) noexcept {
  const std::uint8_t signals = _signals.exchange(0, std::memory_order_seq_cst);
  if ((signals & (signal_resume | signal_ended)) != 0) run_held(handle);
  if (_done) return;
  if ((signals & signal_writable) != 0 && _handler && !ended()) {
    guarded([&] { _handler->on_writable(handle); });
  }
  if ((signals & signal_ended) == 0) return;
  bool by_handler = false;
  status final_status = status::ok;
  {
    std::lock_guard lock(_mu);
    by_handler = _ended_by_handler;
    final_status = _end_status;
  }
  if (_handler) {
    if (!by_handler) guarded([&] { _handler->on_cancel(handle); });
    guarded([&] { _handler->on_done(final_status); });
  }
  _handler.reset();
  // One record per stream for the interceptors that saw its open, with its final status.
  if (_intercepted) _intercepted->end(_core.options().interceptors, _method, _id, final_status, _peer.get());
  _intercepted.reset();
  _done = true;
  // The address's slot first: once the server's count (the open_streams gauge) says a stream
  // is gone, both of its slots are.
  if (_from_address) _from_address->give_back();
  _core.give_back_stream_slot();
  _slot.leave_stream();  // last: the endpoint may stop once it is out
}

}  // namespace ringrpc::detail

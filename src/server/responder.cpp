// The responder role of a shard, run by the shard's reader thread on the reader's ring.
#include "server/responder.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <utility>

#include "server/shard.hpp"
#include "server/server_core.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

responder::responder(server_core& core, shard& owner)
    : _core(core),
      _owner(owner),
      _max_queued_bytes(core.options().max_queued_reply_bytes),
      _account(core.budget()) {}

void responder::take_inbox() noexcept {
  while (mpsc_node* n = _inbox.pop()) {
    call* k = call::from_node(n);
    if (k->written_by_handler == call::inline_write::none) {
      enqueue(k);
    } else {
      take_handler_write(k);
    }
  }
}

void responder::enqueue(call* k) noexcept {
  connection* c = k->conn;
  if (k->stream_end) [[unlikely]] _owner.stream_end_taken(k);
  if (k->reply.empty() || c->write_failed.load(std::memory_order_relaxed)) {
    release_call(k);  // one-way, or nobody left to read it
    return;
  }
  queue_reply(k, false, 0);
}

// `first`: the rest of a reply its handler's thread began to write (its first `already_written`
// bytes, perhaps none), which goes ahead of everything queued: it was handed over before them,
// and the responder wrote none of them meanwhile (handler_writing()).
void responder::queue_reply(call* k, bool first, std::size_t already_written) noexcept {
  connection* c = k->conn;
  if (c->write == nullptr && !take_slot(c)) {
    release_call(k);
    return;
  }
  write_slot* w = c->write;
  if (w->replies.empty()) w->stalled_since_ns = _owner.turn_ns();
  if (first) {
    w->replies.push_front(k, already_written);
  } else {
    w->replies.push_back(k);
  }
  k->reply_charged = k->reply.size();
  _account.charge(static_cast<std::int64_t>(k->reply_charged));
  note_queued(c, w->replies.bytes());
  if (w->replies.bytes() > _max_queued_bytes && !c->backlogged.load(std::memory_order_relaxed)) {
    c->backlogged.store(true, std::memory_order_seq_cst);
  }
  if (!w->dirty) {
    w->dirty = true;
    // Held until flush(): a failed write may release every call (and so every other
    // reference) of the connection before the turn ends.
    retain(c);
    _dirty.push_back(c);
  }
}

bool responder::take_slot(connection* c) noexcept {
  write_slot* w = _slots.take(c);
  if (w == nullptr) {
    // No memory to queue the reply: this connection fails, the others go on.
    _core.note_out_of_memory();
    c->write_failed.store(true, std::memory_order_relaxed);
    _owner.hubs().fire(c, 0);
    ::shutdown(c->fd, SHUT_RDWR);
    return false;
  }
  c->write = w;
  // While the slot is lent, replies are in the responder's hands: handlers may not write this
  // connection's replies themselves (responder_inline.cpp). One count for all the replies the
  // slot holds; give_back_if_done() drops it.
  c->reply_gate.fetch_add(1, std::memory_order_seq_cst);
  link_writing(w);
  return true;
}

void responder::flush() noexcept {
  if (!_deferred.empty()) retry_deferred();
  // Replies that arrived during this turn leave in one gathered write per connection.
  for (connection* c : _dirty) {
    if (write_slot* w = c->write) {
      w->dirty = false;
      if (!w->in_flight) start_write(c);
      give_back_if_done(c);  // a failed write may have emptied it this turn
    }
    release(c);
  }
  _dirty.clear();
}

void responder::shut_down_writers() noexcept {
  for (write_slot* w = _writing; w != nullptr; w = w->next) {
    if (!w->shut_down) {
      w->shut_down = true;
      ::shutdown(w->conn->fd, SHUT_RDWR);  // the write in flight fails; on_write releases the rest
    }
  }
}

void responder::start_write(connection* c) noexcept {
  if (linked(c)) {
    start_tls_write(c);
    return;
  }
  write_slot& w = *c->write;
  if (w.replies.empty() || handler_writing(c)) return;
  const std::size_t n = w.replies.gather(w.iov, write_slot::max_iov);
  io_uring_sqe* sqe = _ring->get_sqe();
  // MSG_NOSIGNAL: a vanished peer must give EPIPE here, not kill the process with SIGPIPE.
  if (n == 1) {
    // One reply (ping-pong traffic): a plain send skips the kernel's msghdr and iovec import.
    io_uring_prep_send(sqe, c->fd, w.iov[0].iov_base, w.iov[0].iov_len, MSG_NOSIGNAL);
  } else {
    w.msg.msg_iov = w.iov;
    w.msg.msg_iovlen = n;
    io_uring_prep_sendmsg(sqe, c->fd, &w.msg, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data64(sqe, make_tag(op::send, c));
  w.in_flight = true;
}

void responder::on_write(connection* c, int res) noexcept {
  if (linked(c)) {
    on_tls_write(c, res);
    return;
  }
  write_slot& w = *c->write;
  w.in_flight = false;
  // Releasing calls may drop every other reference to the connection; keep it alive until
  // this function is done with it.
  retain(c);
  if (res == -EINTR || res == -EAGAIN) {
    start_write(c);
  } else if (res < 0) {
    fail_writes(c);
  } else {
    _bytes_out.add(static_cast<std::uint64_t>(res));
    if (w.replies.consume(static_cast<std::size_t>(res), [this](call* k) { release_call(k); })) {
      _partial_writes.add();
    }
    after_written(c, w);
    // Replies queued while this write was out go now, unless this turn's flush() will send
    // them together with the turn's new ones.
    if (!w.replies.empty() && !w.dirty) start_write(c);
  }
  if (!w.dirty) give_back_if_done(c);  // else flush() sends what came meanwhile
  release(c);
}

void responder::after_written(connection* c, write_slot& w) noexcept {
  const std::int64_t now = _owner.turn_ns();
  note_queued(c, w.replies.bytes());
  c->last_write_ns.store(now, std::memory_order_relaxed);
  // The peer took bytes: whatever still waits has waited only since now.
  w.stalled_since_ns = w.replies.empty() ? 0 : now;
  if (c->backlogged.load(std::memory_order_relaxed) && w.replies.bytes() <= _max_queued_bytes / 2) {
    c->backlogged.store(false, std::memory_order_seq_cst);
    maybe_resume(c);
  }
}

void responder::give_back_if_done(connection* c) noexcept {
  write_slot* w = c->write;
  if (!w->replies.empty() || w->in_flight) return;
  unlink_writing(w);
  c->write = nullptr;
  _slots.give_back(w);
  c->reply_gate.fetch_sub(1, std::memory_order_seq_cst);  // take_slot's count
}

void responder::fail_writes(connection* c) noexcept {
  // The peer is gone or reset (or we cannot write to it): its queued replies have nobody to go
  // to. Shutting the socket down also ends the receive, so the reader lets go of the
  // connection promptly even when it had paused reading.
  write_slot& w = *c->write;
  c->write_failed.store(true, std::memory_order_relaxed);
  _owner.hubs().fire(c, 0);
  ::shutdown(c->fd, SHUT_RDWR);
  w.replies.clear([this](call* k) { release_call(k); });
  c->queued_bytes.store(0, std::memory_order_relaxed);
  w.stalled_since_ns = 0;
  c->backlogged.store(false, std::memory_order_seq_cst);
  maybe_resume(c);
}

void responder::link_writing(write_slot* w) noexcept {
  w->prev = nullptr;
  w->next = _writing;
  if (_writing) _writing->prev = w;
  _writing = w;
}

void responder::unlink_writing(write_slot* w) noexcept {
  if (w->prev) w->prev->next = w->next; else _writing = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = nullptr;
}

void responder::release_call(call* k) noexcept {
  connection* c = k->conn;
  if (k->gated) {
    // Written (or dropped): a handler may write this connection's replies itself again.
    k->gated = false;
    c->reply_gate.fetch_sub(1, std::memory_order_seq_cst);
  }
  if (k->stream_out) [[unlikely]] {
    // A written stream message: only its reply's charge and its share of the connection's
    // stream cap are its own (call.hpp).
    _account.release(static_cast<std::int64_t>(k->reply_charged));
    _owner.stream_out_released(c, k->stream_out_bytes);
    _owner.calls().put(k);
    maybe_resume(c);
    return;
  }
  c->forget_cancel(k->id);
  if (k->share_counted) {
    caller_share& share = *c->share;
    const bool own = &share == &c->own_share;
    add_to_share(share.units_in_flight, 0u - k->cost_units, own);
    if (k->over_share) add_to_share(share.over_share_pending, -1, own);
  }
  _account.release(static_cast<std::int64_t>(k->request_charged + k->reply_charged));
  // A received stream message that carried its handler's write (stream_state::_carrier).
  if (k->stream_out_bytes != 0) [[unlikely]] _owner.stream_out_released(c, k->stream_out_bytes);
  c->request_bytes.store(c->request_bytes.load(std::memory_order_relaxed) - k->request_charged,
                         std::memory_order_relaxed);
  // Single writer (see retain_for_call); counted before the pause is looked at.
  const std::uint32_t left = c->outstanding.load(std::memory_order_relaxed) - 1;
  c->outstanding.store(left, std::memory_order_relaxed);
  _released.add();
  _owner.calls().put(k);
  maybe_resume(c);
  if (left == 0) release(c);  // the reference the connection's calls held together
}

void responder::maybe_resume(connection* c) noexcept {
  if (!c->paused.load(std::memory_order_seq_cst)) return;
  if (over_limits(c, _core.options().max_inflight_per_connection,
                  _core.options().max_inflight_bytes_per_connection)) {
    return;
  }
  if (!c->paused.exchange(false, std::memory_order_seq_cst)) return;
  // Same thread as the reader: no message to send, but not from inside whatever reader code
  // released this call either. The reader resumes it later in this turn.
  _owner.resume_later(c);
}

}  // namespace ringrpc::detail

// The responder's side of TLS connections: replies waiting in the connection's queue are sealed
// into records just before the write, and the write sends ciphertext. The design card's rules
// hold for the ciphertext: one write in flight per connection, a partial write sends the rest
// of the same ciphertext next (ahead of anything sealed later), and a reply's call is released
// once all the records carrying it are written.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "ringrpc/record_layer.hpp"
#include "server/shard.hpp"
#include "server/responder.hpp"
#include "server/server_core.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

namespace {

// Plaintext sealed per write at most: enough to fill the socket's buffer, little enough that
// the ciphertext buffer of a connection with many replies queued stays small.
constexpr std::size_t responder_seal_limit = 256 * 1024;

tls_link& tls_of(connection* c) noexcept { return *c->rare.load(std::memory_order_relaxed)->tls; }

}  // namespace

void responder::kick(connection* c) noexcept {
  tls_link& t = tls_of(c);
  if (c->write_failed.load(std::memory_order_relaxed)) {
    t.pending.clear();
    return;
  }
  if (c->write == nullptr && !take_slot(c)) return;
  write_slot* w = c->write;
  if (!w->dirty) {
    w->dirty = true;
    retain(c);  // held until flush(), as for a reply
    _dirty.push_back(c);
  }
}

void responder::drop_held_replies(connection* c) noexcept {
  write_slot* w = c->write;
  // Only replies the session holds back: a queue this turn's flush() will write (an answer
  // just given before a close, which the peer should read) is left to it.
  if (w == nullptr || w->in_flight || w->dirty || w->replies.empty()) return;
  const tls_link& t = tls_of(c);
  if (t.grpc == nullptr || !t.grpc->holding_back()) return;
  retain(c);  // releasing calls may drop every other reference
  fail_writes(c);
  tls_of(c).drop();
  if (!w->dirty) give_back_if_done(c);
  release(c);
}

void responder::start_tls_write(connection* c) noexcept {
  write_slot& w = *c->write;
  tls_link& t = tls_of(c);
  if (t.all_sent()) {
    // The previous write is all out: the next one is what the session said since, then the
    // replies that wait.
    t.begin_next();
    // A gRPC session whose client's window holds back enough replies takes no more: they wait
    // here, in the queue, until the client's WINDOW_UPDATE (read by the reader, which writes
    // what it lets out and kicks us) or the write-stall timeout.
    while (!w.replies.empty() && t.session->established() && (t.grpc == nullptr || !t.grpc->holding_back())) {
      const std::size_t n = w.replies.gather(w.iov, write_slot::max_iov);
      try {
        const auto r = t.seal_queued(*t.session, w.iov, n, responder_seal_limit, _seal_scratch);
        if (_seal_scratch.capacity() > 2 * responder_seal_limit) std::vector<std::byte>().swap(_seal_scratch);
        if (t.grpc != nullptr && t.grpc->has_frames_for_server()) _owner.session_frames_waiting(c);
        if (r != record_session::outcome::ok) {
          c->note_failure(t.session->error());
          // What the session said on failing (gRPC's GOAWAY with its reason, a TLS alert) goes
          // out before the shutdown: nothing else is in flight, so it cannot split a record,
          // and a few bytes into the socket's buffer do not block.
          if (!t.cipher.empty()) (void)::send(c->fd, t.cipher.data(), t.cipher.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
          fail_writes(c);
          t.drop();
          return;
        }
      } catch (const std::bad_alloc&) {
        _core.note_out_of_memory();
        fail_writes(c);
        t.drop();
        return;
      }
      if (!t.all_sent() || t.sealed == 0) break;
      // The session took these bytes and has nothing to send for them yet (gRPC's waits for a
      // whole reply frame, which the seal limit may cut): they are done with; seal on. (Our
      // caller holds a reference on the connection, so releasing its calls cannot free it.)
      w.replies.consume(t.finish(2 * responder_seal_limit), [this](call* k) { release_call(k); });
      note_queued(c, w.replies.bytes());
      // No write will complete for these bytes: the backlog they made is lifted here, or the
      // connection would stay paused with nothing left to resume it.
      if (c->backlogged.load(std::memory_order_relaxed) && w.replies.bytes() <= _max_queued_bytes / 2) {
        c->backlogged.store(false, std::memory_order_seq_cst);
        maybe_resume(c);
      }
    }
    if (c->reading != read_state::finished) t.recharge(_account, _core.options().tls.get());
    if (t.all_sent() && !w.replies.empty() && c->reading != read_state::open) {
      // Held back for a client's window, on a connection that will read nothing more (no
      // WINDOW_UPDATE can come): nobody will take these replies.
      fail_writes(c);
      t.drop();
      return;
    }
  }
  if (t.all_sent()) return;  // nothing to say
  io_uring_sqe* sqe = _ring->get_sqe();
  const auto unsent = t.unsent();
  io_uring_prep_send(sqe, c->fd, unsent.data(), unsent.size(), MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, make_tag(op::send, c));
  w.in_flight = true;
  if (!t.write_ref) {
    // A handshake flight has no call holding the connection: the write holds it itself.
    t.write_ref = true;
    retain(c);
  }
}

void responder::on_tls_write(connection* c, int res) noexcept {
  write_slot& w = *c->write;
  tls_link& t = tls_of(c);
  w.in_flight = false;
  retain(c);  // releasing calls may drop every other reference
  if (res == -EINTR || res == -EAGAIN) {
    start_tls_write(c);
  } else if (res < 0) {
    fail_writes(c);
    t.drop();
  } else {
    _bytes_out.add(static_cast<std::uint64_t>(res));
    const std::int64_t now = _owner.turn_ns();
    if (!t.advance(static_cast<std::size_t>(res))) {
      // The kernel took part: the rest of the same ciphertext goes next, before anything else.
      _partial_writes.add();
      c->last_write_ns.store(now, std::memory_order_relaxed);
      if (!w.replies.empty()) w.stalled_since_ns = now;
      start_tls_write(c);
    } else {
      w.replies.consume(t.finish(2 * responder_seal_limit), [this](call* k) { release_call(k); });
      after_written(c, w);
      if ((!w.replies.empty() || !t.pending.empty()) && !w.dirty) start_tls_write(c);
      if (!w.in_flight && t.peer_closed) _owner.close_notify_if_owed(c);
    }
  }
  if (!w.in_flight && t.write_ref) {
    t.write_ref = false;
    release(c);  // we still hold the reference taken above
  }
  if (c->reading != read_state::finished) t.recharge(_account, _core.options().tls.get());
  if (!w.dirty) give_back_if_done(c);
  release(c);
}

}  // namespace ringrpc::detail

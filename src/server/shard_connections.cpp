// A connection's life on its reader: hand-off from the acceptor, admission (global and per-address
// limits), the armed multishot receive, and the close that waits for that receive's last
// completion before the connection is released.
#include "server/shard.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "server/server_core.hpp"
#include "server/shard_ops.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

void shard::on_handoff(int fd, bool tls) {
  if (fd < 0) return;
  if (_closing_all) {
    ::close(fd);
    return;
  }
  const int one = 1;
  // Replies are already batched into one gathered write; Nagle would only add latency.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (const int sndbuf = _core.options().socket_send_buffer_bytes; sndbuf > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  }
  if (!_core.admit_connection()) {
    refuse_connection(fd, tls);
    return;
  }
  const peer_address address = peer_address::of_socket(fd);
  std::string host;
  try {
    host = address.host();
    const auto verdict = _core.peers().admit(host, _turn_ns);
    if (verdict != peer_limits::verdict::admitted) {
      // One host may not take every slot, nor open them as fast as it likes.
      _core.release_connection_slot();
      _counts[sc::connections_refused_per_address].add();
      const auto& o = _core.options();
      if (verdict == peer_limits::verdict::too_many) {
        refuse_connection(fd, tls, "max_connections_per_address", o.max_connections_per_address,
                          "server has max_connections_per_address (" +
                              std::to_string(o.max_connections_per_address) + ") open from " + host);
      } else {
        refuse_connection(fd, tls, "accept_rate_per_address", o.accept_rate_per_address,
                          "more than accept_rate_per_address (" +
                              std::to_string(o.accept_rate_per_address) + ") new connections a second from " +
                              host);
      }
      return;
    }
  } catch (const std::bad_alloc&) {
    host.clear();  // an uncounted peer is better than a refused one
  }
  auto* c = new (std::nothrow) connection(fd, this, _core.options().max_frame_bytes);
  if (c == nullptr) {
    // Out of memory for one more connection: refuse it, keep serving the others.
    _core.note_out_of_memory();
    _core.release_connection_slot();
    if (!host.empty()) _core.peers().release(host);
    ::close(fd);
    return;
  }
  c->id = (++_next_connection << 8) | (_index & 0xff);
  c->address = address;
  c->counted_per_address = !host.empty();
  if (_core.options().fair_share_by == fair_share_caller::address && !host.empty()) {
    try {
      c->share = _core.callers().acquire(host);
    } catch (const std::bad_alloc&) {
      // The connection counts as a caller of its own instead.
    }
  }
  c->accepted_ns = _turn_ns;
  c->last_read_ns = _turn_ns;
  c->tls = tls;
  // gRPC shares the plaintext port: the first bytes say which protocol a connection speaks.
  if (!tls && _core.options().grpc) c->protocol = wire_protocol::sniffing;
  _alive.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(_live_mu);  // /connections reads the list from the admin thread
    c->live_next = _live;
    if (_live) _live->live_prev = c;
    _live = c;
  }
  _counts[sc::connections_accepted].add();
  // A TLS connection is opened once its handshake is done (shard::tls_established), so the
  // event can say who the peer proved to be; one whose handshake fails is counted, not opened.
  if (!tls) {
    _core.post_event(event_kind::connection_opened, [&] {
      event e;
      e.peer = c->peer();
      e.id = c->id;
      return e;
    });
  }
  if (_quiesced) {
    start_close(c);
    return;
  }
  // A TLS connection is "connected" for the endpoints once its handshake is done.
  if (tls) {
    if (start_tls(c)) arm_recv(c);
    return;
  }
  notify_endpoints(c, call_purpose::connected);
  arm_recv(c);
}

void shard::arm_recv(connection* c) noexcept {
  io_uring_sqe* sqe = _ring->get_sqe();
  _buffers->prep_recv_multishot(sqe, c->fd);
  io_uring_sqe_set_data64(sqe, make_tag(c->tls ? shard_ops::recv_tls : op::recv, c));
  c->receive = recv_state::armed;
}

void shard::cancel_recv(connection* c) noexcept {
  if (c->receive != recv_state::armed) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  io_uring_prep_cancel64(sqe, make_tag(c->tls ? shard_ops::recv_tls : op::recv, c), 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
  c->receive = recv_state::cancelling;
}

void shard::notify_endpoints(connection* c, call_purpose purpose, std::string_view text) {
  if (!_table) return;
  for (endpoint_slot* slot : _table->hearing) {
    call* k = _core.pool().get();  // not counted as a call: nothing is answered or written
    k->conn = c;
    retain(c);
    k->purpose = purpose;
    k->target = slot;
    k->id = 0;
    k->payload = {};
    k->method_name = {};
    k->over_share = false;
    k->event_text.assign(text);
    mark_user_code();
    switch (slot->admit(k)) {
      case endpoint_slot::admit_result::submitted: note_submitted(slot->pool()); break;
      case endpoint_slot::admit_result::ran: user_code_ran(slot->name()); break;
      case endpoint_slot::admit_result::busy:
      case endpoint_slot::admit_result::stopped:
        _core.pool().put(k);
        release(c);
        break;
      default: break;
    }
  }
}

void shard::refuse_connection(int fd, bool tls) noexcept {
  _counts[sc::connections_refused].add();
  const unsigned max = _core.options().max_connections;
  try {
    refuse_connection(fd, tls, "max_connections", max,
                      "server has max_connections (" + std::to_string(max) + ") open");
  } catch (const std::bad_alloc&) {
    ::close(fd);
  }
}

void shard::refuse_connection(int fd, bool tls, const char* knob, unsigned value, const std::string& why) noexcept {
  // Say why before closing, as an error frame with call id 0, so the client can tell a full
  // server from a crash. The socket's buffer is empty: this small send cannot block. A TLS
  // client, before any handshake, would read that frame as a broken record: it gets the FIN.
  if (tls) {
    ::close(fd);
    post_refusal(knob, value);
    return;
  }
  frame_view f;
  f.call_id = 0;
  f.kind = wire::Kind::Error;
  f.code = status::server_busy;
  f.message = why;
  f.retry_after_ms = 100;
  try {
    std::vector<std::byte> frame;
    _encoder.encode_into(f, frame);
    (void)::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } catch (const std::bad_alloc&) {
    // Closed without the reason, then.
  }
  ::close(fd);
  post_refusal(knob, value);
}

void shard::post_refusal(const char* knob, unsigned value) noexcept {
  _core.post_event(event_kind::limit_hit, [&] {
    event e;
    e.name = knob;
    e.value = value;
    e.detail = "connection refused";
    return e;
  });
}

void shard::start_close(connection* c) noexcept {
  note_closing(c);
  cancel_recv(c);
  // A gRPC connection's replies may wait for its client's window with no write in flight,
  // which is what would otherwise fail them.
  if (c->protocol == wire_protocol::grpc) _responder.drop_held_replies(c);
  maybe_finish(c);
}

void shard::maybe_finish(connection* c) noexcept {
  if (c->receive != recv_state::idle || c->reading == read_state::finished) return;
  // Frames held back by a pause must still be answered: wait for the resume that drains them.
  const bool kept_frames = c->assembler.holding();
  if (c->reading == read_state::open || (c->reading == read_state::peer_ended && kept_frames)) return;
  if (c->reading == read_state::peer_ended && c->assembler.buffered() > 0) _counts[sc::bad_frames].add();  // truncated frame
  note_closing(c);
  {
    std::lock_guard lock(_live_mu);
    if (c->live_prev) c->live_prev->live_next = c->live_next; else _live = c->live_next;
    if (c->live_next) c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = nullptr;
  }
  c->reading = read_state::finished;
  end_streams(c, status::cancelled, "connection closed");  // nothing more of theirs arrives
  // Replies a gRPC client's window holds back: no WINDOW_UPDATE can come any more.
  if (c->protocol == wire_protocol::grpc) _responder.drop_held_replies(c);
  // After a clean end of stream the calls in flight still owe their answers: only a failure,
  // a shed or a stop makes them give up.
  if (!c->half_closed || !c->failure().empty() || c->closed_by != close_cause::peer || _closing_all) {
    mark_gone(c);
  }
  c->assembler.reset();  // nothing more is framed: give its memory back now
  charge_assembler(c);
  if (linked(c)) finish_tls(c);
  if (c->budget_paused) {
    c->budget_paused = false;
    --_budget_paused;
  }
  _finished.add();
  _core.release_connection_slot();
  if (c->counted_per_address) {
    try {
      _core.peers().release(c->address.host());
    } catch (const std::bad_alloc&) {
      // No memory to name the address: it keeps one connection too many counted.
    }
  }
  // A TLS connection whose handshake never finished was never announced either.
  const connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
  const bool announced = !c->tls || (rare != nullptr && rare->tls && rare->tls->announced);
  if (announced) _core.post_event(event_kind::connection_closed, [&] {
    event e;
    e.peer = c->peer();
    e.id = c->id;
    e.detail = c->closed_by != close_cause::peer ? describe(c->closed_by)
               : !c->failure().empty()    ? std::string(c->failure())
                                          : "closed by peer";
    e.duration_ns = static_cast<std::uint64_t>(_turn_ns - c->accepted_ns);
    return e;
  });
  if (announced) {
    if (!c->failure().empty()) notify_endpoints(c, call_purpose::network_error, c->failure());
    notify_endpoints(c, call_purpose::disconnected);
  }
  // The reader's own reference goes at the end of the turn: callers up the stack may still
  // touch the connection, and calls it posted may be released by the responder meanwhile.
  _to_release.push_back(c);
}

}  // namespace ringrpc::detail

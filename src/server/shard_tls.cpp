// TLS connections on the reader: ciphertext from the multishot receive goes through the
// connection's record session into the same frame assembler plaintext bytes go to; what the
// session has to say back (handshake flights, alerts) is written by the shard's responder like
// a reply. Nothing here blocks: a handshake advances only when its bytes arrive, and one that
// does not finish in time is shed by the sweep.
#include <sys/socket.h>

#include <memory>
#include <string>

#include "server/shard.hpp"
#include "server/server_core.hpp"
#include "uring/cqe_tag.hpp"

#include "ringrpc/peer_identity.hpp"

namespace ringrpc::detail {

namespace {

tls_link& link_of(connection* c) noexcept { return *c->rare.load(std::memory_order_relaxed)->tls; }

// What the handshake verified (the client's certificate under mutual TLS, or nothing) becomes
// the connection's identity before anyone hears of the connection. Throws std::bad_alloc.
void publish_identity(connection* c, const record_session& s) {
  peer_certificate_identity id = s.peer_identity();  // empty unless verified
  if (id.empty()) return;
  auto who = std::make_shared<peer_identity>();
  who->subject = std::move(id.subject);
  who->dns_names = std::move(id.dns_names);
  who->uris = std::move(id.uris);
  who->ip_addresses = std::move(id.ips);
  who->certificate_verified = true;
  c->set_peer_identity(std::move(who));
}

}  // namespace

void shard::refuse_handshake(connection* c, counter& count, const char* knob, unsigned value,
                              const char* why) noexcept {
  count.add();
  c->note_failure(why);
  _core.post_event(event_kind::limit_hit, [&] {
    event e;
    e.peer = c->peer();
    e.name = knob;
    e.value = value;
    e.detail = "connection refused";
    e.id = c->id;
    return e;
  });
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

// Takes a handshake slot of the peer's address, then one of the server's: one host may hold
// no more than its share, so the rest stay free for everyone else.
bool shard::admit_tls_handshake(connection* c, bool& per_address) noexcept {
  const auto& o = _core.options();
  per_address = false;
  try {
    const auto verdict = _core.peers().admit_handshake(c->address.host(), _turn_ns);
    if (verdict == peer_limits::handshake_verdict::refused) {
      refuse_handshake(c, _counts[sc::tls_handshakes_refused_per_address], "max_tls_handshakes_per_address",
                       o.max_tls_handshakes_per_address,
                       "refused: max_tls_handshakes_per_address handshakes already under way from this address");
      return false;
    }
    per_address = verdict == peer_limits::handshake_verdict::counted;
  } catch (const std::bad_alloc&) {
    // No memory to name the address: the handshake is let in on the server-wide cap alone.
  }
  if (!_core.admit_handshake()) {
    release_address_handshake(c, per_address);
    refuse_handshake(c, _counts[sc::tls_handshakes_refused], "max_tls_handshakes", o.max_tls_handshakes,
                     "refused: max_tls_handshakes handshakes already under way");
    return false;
  }
  return true;
}

void shard::release_address_handshake(connection* c, bool per_address) noexcept {
  if (!per_address) return;
  try {
    _core.peers().end_handshake(c->address.host());
  } catch (const std::bad_alloc&) {
    // No memory to name the address: it keeps one handshake too many counted.
  }
}

void shard::end_handshake(connection* c, tls_link& t) noexcept {
  if (!t.handshaking) return;
  t.handshaking = false;
  _core.end_handshake();
  release_address_handshake(c, t.handshake_per_address);
  t.handshake_per_address = false;
}

bool shard::start_tls(connection* c) noexcept {
  bool per_address = false;
  if (!admit_tls_handshake(c, per_address)) return false;
  try {
    connection::connection_rare& rare = c->rare_part();
    auto link = std::make_unique<tls_link>();
    // While gRPC is served, ALPN may pick h2 for a client that does not offer ringrpc/1.
    if (_core.options().grpc) link->session = _core.options().tls->new_server_session_with_h2();
    if (!link->session) link->session = _core.options().tls->new_server_session();
    if (!link->session) throw std::bad_alloc();
    link->handshake_started_ns = _turn_ns;
    link->handshake_per_address = per_address;
    rare.tls = std::move(link);
  } catch (...) {
    _core.end_handshake();
    release_address_handshake(c, per_address);
    _core.note_out_of_memory();
    c->note_failure("out of memory starting a TLS session");
    ::shutdown(c->fd, SHUT_RDWR);
    start_close(c);
    return false;
  }
  charge_tls(c, link_of(c));
  return true;
}

void shard::charge_tls(connection* c, tls_link& t) noexcept {
  if (c->reading == read_state::finished) return;  // finish_tls() gave the charge back for good
  t.recharge(_account, _core.options().tls.get());
}

void shard::finish_tls(connection* c) noexcept {
  const connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
  if (rare == nullptr || !rare->tls) return;
  tls_link& t = *rare->tls;
  end_handshake(c, t);
  // The session's memory is the connection's until it is freed, but nothing of it is the
  // budget's business once no byte is read or written for it any more.
  _account.release(static_cast<std::int64_t>(t.charged));
  t.charged = 0;
}

void shard::tls_established(connection* c, tls_link& t) noexcept {
  end_handshake(c, t);
  _counts[sc::tls_handshakes].add();
  t.announced = true;
  try {
    publish_identity(c, *t.session);
  } catch (const std::bad_alloc&) {
    // Without memory to keep who the peer is, it is nobody: the authorizer refuses what needs
    // an identity, nothing is let in on a guess.
    _core.note_out_of_memory();
  }
  _core.post_event(event_kind::connection_opened, [&] {
    event e;
    e.peer = c->peer();
    e.id = c->id;
    // Who the handshake verified, for listeners that log connections (never a token).
    if (const peer_identity* who = c->identity()) e.detail = who->subject;
    return e;
  });
  notify_endpoints(c, call_purpose::connected);
}

void shard::tls_failed(connection* c, tls_link& t, const std::string& why) noexcept {
  if (t.handshaking) _counts[sc::tls_handshake_failures].add();
  c->note_failure(why);
  // The alert that says why (if the session made one) is a few bytes into an empty socket
  // buffer: sent here, it cannot block, and the peer learns more than "connection reset".
  if (!t.pending.empty() && t.cipher.empty()) {
    (void)::send(c->fd, t.pending.data(), t.pending.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  t.pending.clear();
  mark_gone(c);
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

void shard::say_close_notify(connection* c) noexcept {
  if (!linked(c)) return;
  connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
  if (rare == nullptr || !rare->tls) return;
  tls_link& t = *rare->tls;
  // Only between writes: a write in flight or half sent would have the alert land inside its
  // records. The responder runs on this thread, so `cipher` and `sent` are ours to read.
  if (t.said_close_notify || !t.session->established() || !t.all_sent() || !t.pending.empty() ||
      c->write_failed.load(std::memory_order_relaxed)) {
    return;
  }
  t.said_close_notify = true;
  try {
    std::vector<std::byte> alert;
    if (t.session->close_notify(alert) != record_session::outcome::ok || alert.empty()) return;
    // A few dozen bytes into a socket buffer nothing else is writing to: cannot block, and if
    // the buffer is full the peer is not reading anyway and sees the FIN alone.
    (void)::send(c->fd, alert.data(), alert.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } catch (const std::bad_alloc&) {
    // Without memory for the alert the peer gets the FIN alone, as from a peer without TLS.
  }
}

void shard::close_notify_if_owed(connection* c) noexcept {
  const connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
  if (rare == nullptr || !rare->tls || !rare->tls->peer_closed) return;
  // A call still running or a reply still unwritten: its records must come before our end.
  if (c->outstanding.load(std::memory_order_relaxed) != 0) return;
  say_close_notify(c);  // also waits for the write in flight and the pending records
}

void shard::on_recv_tls(connection* c, const io_uring_cqe& cqe) {
  if (cqe.flags & IORING_CQE_F_BUFFER) {
    const auto id = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    if (cqe.res > 0 && !is_closing(c)) {
      _counts[sc::bytes_in].add(static_cast<std::uint64_t>(cqe.res));
      c->last_read_ns = _turn_ns;
      c->liveness_checked = false;
      receive_through_link(c, _buffers->bytes(id, static_cast<std::size_t>(cqe.res)));
    }
    _buffers->recycle(id);
  }
  // The end of the multishot receive is the same as for plaintext.
  io_uring_cqe rest = cqe;
  rest.flags &= ~IORING_CQE_F_BUFFER;
  on_recv(c, rest);
}

void shard::receive_through_link(connection* c, std::span<const std::byte> bytes) noexcept {
  tls_link& t = link_of(c);
  try {
    _tls_plain.clear();
    const std::size_t had_pending = t.pending.size();
    const bool was_holding_back = t.grpc != nullptr && t.grpc->holding_back();
    const auto outcome = t.session->receive(bytes, _tls_plain, t.pending);
    // A handshake step is the shard's own long work: not the next direct handler's stall.
    mark_user_code();
    if (outcome == record_session::outcome::failed) {
      tls_failed(c, t, t.session->error());
    } else {
      if (t.handshaking && t.session->established()) {
        tls_established(c, t);
        // ALPN chose h2: a gRPC session takes the plaintext from here on, this receive's too.
        if (t.session->negotiated_protocol() == "h2" && !grpc_in_tls(c, t)) return;
      }
      if (t.grpc != nullptr && t.pending.size() > grpc_pending_cap()) {
        // Requests the session answers itself (refusals, health checks) and acknowledgements,
        // none of it read by the peer: what waits to be written would grow without bound.
        _counts[sc::grpc_protocol_errors].add();
        t.pending.clear();
        tls_failed(c, t, "HTTP/2: the peer reads none of its answers (more than max_queued_reply_bytes + "
                         "max_inflight_bytes_per_connection wait)");
        return;
      }
      // New bytes to write, or replies the session held back that it takes again (a client's
      // RST_STREAM of a held reply frees room without writing anything).
      if (t.pending.size() != had_pending || (was_holding_back && !t.grpc->holding_back())) _responder.kick(c);
      if (!_tls_plain.empty()) deliver(c, _tls_plain);
      // close_notify: the peer's stream ends here, as a FIN would end it; ours answers it
      // after the replies still owed (now, if none are).
      if (outcome == record_session::outcome::closed) {
        c->half_closed = true;
        t.peer_closed = true;
        close_notify_if_owed(c);
        ::shutdown(c->fd, SHUT_RD);
      }
    }
  } catch (const std::bad_alloc&) {
    out_of_memory(c, "out of memory receiving from this connection's session");
  }
  charge_assembler(c);
  charge_tls(c, t);
  // A big receive leaves a big scratch buffer; keep what a few records need.
  if (_tls_plain.capacity() > 256 * 1024) std::vector<std::byte>().swap(_tls_plain);
}

}  // namespace ringrpc::detail

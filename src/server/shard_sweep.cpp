// The reader's timer: once per tick it walks its connections for the idle, write-stall and
// frame-stall timeouts and the liveness check, and it keeps the memory budget (pausing and
// resuming connections, failing what cannot be held).
#include "server/shard.hpp"

#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "server/server_core.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

namespace {

// A connection whose armed receive has delivered nothing this long gets its socket looked at
// once (see check_liveness()); the sweep ticks at least this often.
constexpr std::int64_t liveness_after_ns = 1'000'000'000;

}  // namespace

void shard::arm_sweep_timer() noexcept {
  // One timer per ring and one pass over this ring's connections per tick, nothing per call.
  // The tick is a fraction of the shortest timeout in force (a connection closes between 1 and
  // 1.25 timeouts after the fact), at most 1 s, and 50 ms while the budget keeps connections
  // paused, so reading resumes promptly when memory frees up.
  const auto& o = _core.options();
  std::int64_t tick = liveness_after_ns;  // the liveness check wants a tick this often
  const std::chrono::milliseconds handshake = o.tls ? o.tls_handshake_timeout : std::chrono::milliseconds(0);
  // The silence timeout matters only while handshake slots are scarce; a tick that short the
  // rest of the time would walk every connection four times a second for nothing.
  const std::chrono::milliseconds silence =
      o.tls && _core.handshakes_scarce() ? o.tls_handshake_silence_timeout : std::chrono::milliseconds(0);
  for (const auto t : {o.idle_timeout, o.write_stall_timeout, o.frame_stall_timeout, handshake, silence}) {
    if (t.count() > 0) {
      tick = std::min<std::int64_t>(tick, std::chrono::duration_cast<std::chrono::nanoseconds>(t).count() / 4);
    }
  }
  if (_budget_paused > 0) tick = std::min<std::int64_t>(tick, 50'000'000);
  tick = std::max<std::int64_t>(tick, 10'000'000);
  _sweep_ts.tv_sec = tick / 1'000'000'000;
  _sweep_ts.tv_nsec = tick % 1'000'000'000;
  io_uring_sqe* sqe = _ring->get_sqe();
  io_uring_prep_timeout(sqe, &_sweep_ts, 0, 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::timeout));
}

// A connection we do not read (paused) hears nothing of its peer: look at the socket instead.
// Reset or failed: it is dead. Closed by the peer (CLOSE_WAIT): nothing more can arrive than
// what its receive buffer holds, so a budget-paused one may read again to finish.
bool shard::peer_left(connection* c) noexcept {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
    if (c->failure().empty()) {
      try {
        c->note_failure(std::string("connection failed: ").append(std::strerror(err)));
      } catch (...) {
      }
    }
    return true;
  }
  tcp_info info{};
  len = sizeof(info);
  if (::getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (info.tcpi_state == TCP_CLOSE) return true;
  if (info.tcpi_state == TCP_CLOSE_WAIT && c->budget_paused) {
    c->budget_paused = false;
    --_budget_paused;
    retain(c);  // dropped by on_resume(), as for a resume message
    on_resume(c);
  }
  return false;
}

// glibc keeps freed memory in its arenas: after a burst of big frames the bytes are free but
// still resident, which is memory peers made us keep. Once the budget's use has fallen well
// below its recent high, hand it back. Reader 0 alone does it, at most once per tick.
void shard::give_back_memory() noexcept {
  constexpr std::int64_t trim_step = 32 << 20;
  const std::int64_t used = _core.budget().used();
  _trim_mark = std::max(_trim_mark, used);
  if (_trim_mark - used > trim_step) {
    ::malloc_trim(0);
    _trim_mark = used;
  }
}

void shard::sweep() noexcept {
  if (_index == 0) give_back_memory();
  _responder.trim();
  const auto& o = _core.options();
  const auto ns = [](std::chrono::milliseconds m) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(m).count();
  };
  const std::int64_t idle = ns(o.idle_timeout);
  const std::int64_t write_stall = ns(o.write_stall_timeout);
  const std::int64_t frame_stall = ns(o.frame_stall_timeout);
  const std::int64_t handshake = o.tls ? ns(o.tls_handshake_timeout) : 0;
  const std::int64_t silence = o.tls ? ns(o.tls_handshake_silence_timeout) : 0;
  // Checked once a tick: the slots of the handshakes shed now come back as their sockets close.
  const bool scarce = o.tls && _core.handshakes_scarce();
  for (connection* c = _live; c != nullptr;) {
    connection* next = c->live_next;  // shed() may unlink c
    if (is_closing(c)) {
      c = next;
      continue;
    }
    if ((c->budget_paused || c->paused.load(std::memory_order_relaxed)) && c->receive == recv_state::idle &&
        peer_left(c)) {
      note_peer_ended(c);
      mark_gone(c);
      start_close(c);
      c = next;
      continue;
    }
    if (is_closing(c)) {  // peer_left() may have resumed and finished it
      c = next;
      continue;
    }
    expire_streams(c);
    if (!c->liveness_checked && c->receive == recv_state::armed && !_quiesced &&
        _turn_ns - c->last_read_ns >= liveness_after_ns && check_liveness(c)) {
      c = next;
      continue;
    }
    const tls_link* tls = nullptr;
    if (linked(c)) {
      const connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
      if (rare != nullptr) tls = rare->tls.get();
    }
    if (tls != nullptr && tls->handshaking && shed_handshake(c, *tls, handshake, silence, scarce)) {
      c = next;
      continue;
    }
    // Part of a frame, part of a TLS record the frame's bytes are still inside of, or part of
    // HTTP/2's preface.
    const bool partial = c->assembler.buffered() > 0 || (tls != nullptr && tls->session->holds_partial_record()) ||
                         c->preface_seen > 0;
    const std::int64_t last_write = c->last_write_ns.load(std::memory_order_relaxed);
    const std::int64_t stalled_since = c->write != nullptr ? c->write->stalled_since_ns : 0;
    if (write_stall > 0 && stalled_since != 0 && _turn_ns - stalled_since > write_stall) {
      // Replies wait and the peer has taken no byte: it holds their memory and its calls'.
      shed(c, close_cause::write_stalled, _counts[sc::connections_write_stalled]);
    } else if (frame_stall > 0 && partial && !c->assembler.holding() &&
               !c->paused.load(std::memory_order_relaxed) && _turn_ns - c->last_read_ns > frame_stall) {
      // Part of a frame, and no byte of the rest for a long time: a slow-drip peer. (A
      // connection we paused ourselves is not the peer's fault, unless the budget paused it:
      // then shedding the holder is how the budget gets its memory back.)
      shed(c, close_cause::frame_stalled, _counts[sc::connections_frame_stalled]);
    } else if (idle > 0 && c->outstanding.load(std::memory_order_relaxed) == 0 &&
               c->queued_bytes.load(std::memory_order_relaxed) == 0 &&
               _turn_ns - std::max(c->last_read_ns, last_write) > idle) {
      // A connection waiting for a slow handler is not idle: its peer is owed an answer.
      c->closed_by = close_cause::idle;
      _counts[sc::connections_idle_closed].add();
      say_close_notify(c);
      ::shutdown(c->fd, SHUT_RDWR);
      start_close(c);
    }
    c = next;
  }
}

// A handshake that has not finished in time holds a handshake slot and its session's memory
// for a peer that may never finish it. While slots are scarce, one whose peer has said nothing
// for a while goes sooner: a client that means it sends its ClientHello with the connect.
// Returns true if `c` is being closed.
bool shard::shed_handshake(connection* c, const tls_link& t, std::int64_t timeout, std::int64_t silence,
                            bool scarce) noexcept {
  if (timeout > 0 && _turn_ns - t.handshake_started_ns > timeout) {
    c->note_failure("TLS handshake not finished within tls_handshake_timeout");
    shed(c, close_cause::handshake_timeout, _counts[sc::tls_handshake_timeouts]);
    return true;
  }
  if (silence > 0 && scarce && _turn_ns - c->last_read_ns > silence) {
    c->note_failure("TLS handshake silent for tls_handshake_silence_timeout while handshake slots were scarce");
    shed(c, close_cause::handshake_silent, _counts[sc::tls_handshakes_silent_closed]);
    return true;
  }
  return false;
}

// Why: after a peer sends some bytes and then resets, the multishot receive sometimes never
// posts its final completion. Its last CQE carries the data with IORING_CQE_F_MORE; the request
// then sits in the kernel's poll list although the socket reports POLLIN|POLLERR|POLLHUP and
// recv() returns ECONNRESET (measured on Linux 6.18, SINGLE_ISSUER with or without
// DEFER_TASKRUN: about 1 connection in 10,000 churned with two readers; a small liburing
// program with the same setup did not reproduce it in 170,000 cycles, so the cause is not
// pinned down). Closing a connection must not depend on that completion, so a connection whose
// armed receive has been silent for a while gets one MSG_PEEK recv() — once per silence, since
// the fault follows a data completion, which starts a new silence:
//   EAGAIN: alive and idle.   error: failed; close it as the final CQE would have.
//   0: the peer ended its stream; take the end-of-stream path (replies owed are written).
//   bytes: data the receive did not deliver; cancel it, and the -ECANCELED completion re-arms.
// Returns true when the connection is being closed.
bool shard::check_liveness(connection* c) noexcept {
  c->liveness_checked = true;
  std::byte b{};
  const ssize_t n = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  const int err = n < 0 ? errno : 0;
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) return false;
  if (n > 0) {
    c->last_read_ns = _turn_ns;
    cancel_recv(c);
    return false;
  }
  _counts[sc::connections_dead_closed].add();
  note_peer_ended(c);
  if (n == 0) {
    c->half_closed = true;
    ::shutdown(c->fd, SHUT_RD);  // ends the stuck receive; the answers owed still go out
    cancel_recv(c);
    return false;
  }
  mark_gone(c);
  if (c->failure().empty()) {
    try {
      c->note_failure(std::string("receive failed: ")
                          .append(std::strerror(err))
                          .append(" (found by the liveness check; the receive never completed)"));
    } catch (...) {
    }
  }
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
  return true;
}

void shard::shed(connection* c, close_cause reason, counter& count) noexcept {
  count.add();
  c->closed_by = reason;
  // A peer that stalls our writes is not reading: a close_notify would wait behind the
  // replies it does not take (docs/tls.md). Any other shed still ends the session in order.
  if (reason != close_cause::write_stalled) say_close_notify(c);
  // Shutting down fails the responder's write in flight (it then drops the queued replies)
  // and ends our receive; handlers polling cancelled() see the peer gone.
  mark_gone(c);
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

void shard::charge_assembler(connection* c) noexcept {
  const auto now = static_cast<std::uint32_t>(std::min<std::size_t>(c->assembler.capacity(), UINT32_MAX));
  if (now == c->assembler_charged) return;
  _account.charge(static_cast<std::int64_t>(now) - static_cast<std::int64_t>(c->assembler_charged));
  c->assembler_charged = now;
}

void shard::apply_budget() noexcept {
  memory_budget& b = _core.budget();
  if (_budget_paused > 0 && b.relieved()) {
    // Read the paused ones again: frames they kept are delivered first.
    for (connection* c = _live; c != nullptr;) {
      connection* next = c->live_next;  // delivery may finish c
      if (c->budget_paused) {
        c->budget_paused = false;
        --_budget_paused;
        retain(c);  // on_resume() drops one reference, as for a responder's resume message
        on_resume(c);
      }
      c = next;
    }
    return;
  }
  if (!b.exhausted()) return;
  // Exhausted: stop reading the connections holding more than an even share of the budget,
  // so the ones holding the most wait and the rest can still be answered SERVER_BUSY.
  const std::size_t open = std::max<std::size_t>(_core.open_connections(), 1);
  const std::size_t share = std::max<std::size_t>(b.limit() / open, 64 * 1024);
  for (connection* c = _live; c != nullptr; c = c->live_next) {
    if (c->budget_paused || is_closing(c)) continue;
    // A TLS or gRPC connection's session counts too (what its link charged: a gRPC session's
    // half-received requests and the replies its client's window holds back).
    const connection::connection_rare* rare = c->rare.load(std::memory_order_relaxed);
    const std::size_t held = c->assembler.capacity() + c->request_bytes.load(std::memory_order_relaxed) +
                             (c->write != nullptr ? c->write->replies.bytes() : 0) +
                             (rare != nullptr && rare->tls ? rare->tls->charged : 0);
    if (held < share) continue;
    c->budget_paused = true;
    ++_budget_paused;
    _counts[sc::budget_pauses].add();
    cancel_recv(c);
    _core.post_event(event_kind::limit_hit, [&] {
      event e;
      e.peer = c->peer();
      e.name = "max_buffered_bytes";
      e.value = b.limit();
      e.detail = "reading paused: the server's memory budget is exhausted";
      e.id = c->id;
      return e;
    });
  }
}

void shard::out_of_memory(connection* c, const char* what) noexcept {
  _core.note_out_of_memory();
  c->note_failure(what);
  c->assembler.reset();
  mark_gone(c);
  say_close_notify(c);  // a few bytes, if there is memory for them
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

}  // namespace ringrpc::detail

#include "engine_worker.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <stdexcept>

#include "base/clock.hpp"
#include "client/multishot_recv.hpp"
#include "client/tcp_connect.hpp"
#include "engine_fail_fast.hpp"
#include "sniff.hpp"
#include "uring/cqe_tag.hpp"
#include "uring/ring_turn.hpp"
#include "uring/uring_probe.hpp"
#include "wake_batch.hpp"

namespace ringrpc::load::engine_detail {

using detail::make_tag;
using detail::now_ns;
using detail::op;
using detail::tag_op;
using detail::tag_ptr;

static std::int64_t real_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int connect_to(const target& t, std::chrono::nanoseconds timeout) {
  return detail::connect_tcp(t.host, t.port, timeout);
}

std::uint32_t worker::pick_kind() noexcept {
  if (_cfg.kinds.size() == 1) return 0;
  _rng ^= _rng << 13;
  _rng ^= _rng >> 7;
  _rng ^= _rng << 17;
  return _run.kind_table[_rng % _run.kind_table.size()];
}

bool worker::issuing(std::int64_t now) const noexcept {
  if (_run.stop.load(std::memory_order_relaxed)) return false;
  if (_issued >= _quota) return false;
  return now < _run.measure_until;  // closed loop: the duration; open loop: the schedule's end
}

// Open loop: no scheduling pass has run since the schedule ended, so calls due in its last
// stretch may still be untaken (the thread woke after the end: descheduled, or its sleep
// overran). One pass, before the drain judges, sends them; a stopped run owes none.
bool worker::schedule_pass_owed() const noexcept {
  return _run.schedule != nullptr && _last_schedule_ns < _run.measure_until &&
         !_run.stop.load(std::memory_order_relaxed) && _issued < _quota;
}

second_bucket* worker::bucket(std::int64_t now) {
  if (now < _run.measure_from || now >= _run.measure_until) return nullptr;
  if (now >= _run.stop_at.load(std::memory_order_relaxed)) return nullptr;
  const auto i = static_cast<std::size_t>((now - _run.measure_from) / 1'000'000'000);
  while (tallies.seconds.size() <= i) tallies.seconds.emplace_back();
  return &tallies.seconds[i];
}

void worker::count_error(const std::string& kind, std::int64_t now, const conn_state& c, const slot* s) {
  if (_run.watch_answers.load(std::memory_order_relaxed)) watch_error(kind);
  live.errors.fetch_add(1, std::memory_order_relaxed);  // the live line shows warm-up too
  if (second_bucket* b = bucket(now)) {
    ++tallies.errors[kind];
    ++b->errors;
    if (_cfg.publish_seconds) ++b->error_kinds[kind];
    if (s != nullptr && !tallies.kinds.empty()) ++tallies.kinds[s->kind].errors[kind];
    if (!tallies.endpoints.empty()) ++tallies.endpoints[c.endpoint_index].errors[kind];
  }
}

// Only until the first answers have decided whether the target is hopeless (engine.cpp).
void worker::watch_error(const std::string& kind) noexcept {
  const int index = hopeless_error_index(kind);
  if (index < 0) {
    live.other_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  int none = -1;
  live.hopeless_kind.compare_exchange_strong(none, index, std::memory_order_relaxed);
  live.hopeless_errors.fetch_add(1, std::memory_order_relaxed);
}

// The first reply on a connection did not parse: say once what the server looks like and end
// the run, since every further call would fail the same way.
void worker::diagnose(const conn_state& c, std::int64_t now, bool closed) {
  bool expected = false;
  if (!_run.diagnosed.compare_exchange_strong(expected, true)) return;
  _run.diagnosis = closed ? diagnose_close(_cfg.where)
                          : diagnose_reply(_cfg.where, c.rx.framer().bad_front, c.rx.framer().last.error);
  _run.stop_at.store(now, std::memory_order_relaxed);
  _run.stop.store(true, std::memory_order_relaxed);
}

// A registered file spares every recv and send the lookup and reference count of the fd
// (the process has several threads, so each fget is an atomic on the file).
static void use_fixed(io_uring_sqe* sqe, const conn_state& c) noexcept {
  if (c.fixed < 0) return;
  sqe->fd = c.fixed;
  sqe->flags |= IOSQE_FIXED_FILE;
}

void worker::register_fd(conn_state& c) noexcept {
  if (c.fixed >= 0 && io_uring_register_files_update(_ring->raw(), static_cast<unsigned>(c.fixed), &c.fd, 1) != 1) {
    c.fixed = -1;
  }
}

void worker::arm_recv(conn_state& c) {
  io_uring_sqe* sqe = _ring->get_sqe();
  if (_kernel_stamps) {
    io_uring_prep_recvmsg_multishot(sqe, c.fd, &_rx_layout, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = _buffers->group_id();
  } else {
    _buffers->prep_recv_multishot(sqe, c.fd);
  }
  use_fixed(sqe, c);
  io_uring_sqe_set_data64(sqe, make_tag(op::recv, &c));
  c.recv_armed = true;
}

void worker::issue(conn_state& c, std::int64_t intended, std::int64_t now) {
  const std::uint64_t seq = c.next_seq++;
  // ringrpc answers in completion order, so the sequence numbers in flight need not be
  // contiguous; the window is keyed by them and sized by the depth.
  slot& s = c.window.insert(seq);
  s.intended_ns = intended;
  s.sent_ns = now;
  s.timed_out = false;
  s.kind = pick_kind();
  if (_unsent.size() < _unsent.capacity()) _unsent.push_back(&s);  // else it keeps `now`
  ++c.in_flight;
  if (now >= _run.measure_from) ++_issued;  // -n counts measured calls; warm-up calls are extra
  c.codec->write_request(c.batch[c.filling].bytes, seq, _cfg.kinds[s.kind]);
  want_flush(c);
}

void worker::want_flush(conn_state& c) noexcept {
  if (c.flush_queued) return;
  c.flush_queued = true;
  _to_flush.push_back(&c);  // within the capacity reserved for every connection
}

void worker::mark_dead(conn_state& c) noexcept {
  c.dead = true;
  _any_dead = true;
}

void worker::flush(conn_state& c) {
  tx_batch& b = c.batch[c.filling];
  if (const stream_control* s = c.dead || c.codec == nullptr ? nullptr : c.codec->stream();
      s != nullptr && s->progress().failed && !s->progress().ended) {
    // The stream failed while its codec wrote (nghttp2 reset it as the frames went out, or the
    // call could not be opened): no reply will say so, so the connection ends here, counted by
    // the stream's kind.
    lose(c, s->progress().end_kind, now_ns());
    return;
  }
  if (c.tls != nullptr && !c.out.in_flight() && !c.dead && !c.tls->wrap(b.bytes)) {
    // OpenSSL refused to seal (or ran out of memory): the requests never left.
    lose(c, "tls_seal", now_ns());
    return;
  }
  if (c.out.in_flight() || b.bytes.empty() || c.dead) return;
  // Everything issued this turn leaves in one send; requests queued meanwhile wait for the
  // next, so bytes of two sends never interleave.
  c.out.queue().push_back(&b);
  c.filling ^= 1;
  send(c);
}

void worker::send(conn_state& c) {
  msghdr* msg = c.out.next();
  if (msg == nullptr) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  ++_sends_queued;
  // Nearly always one batch in one buffer. A plain send then spares the kernel importing the
  // msghdr and its iovec: with batched wake-ups that import was 2.3 % of the samples against
  // nginx, the send path 0.9 %.
  if (msg->msg_iovlen == 1) {
    io_uring_prep_send(sqe, c.fd, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, MSG_NOSIGNAL);
  } else {
    io_uring_prep_sendmsg(sqe, c.fd, msg, MSG_NOSIGNAL);
  }
  use_fixed(sqe, c);
  io_uring_sqe_set_data64(sqe, make_tag(op::send, &c));
}

void worker::on_send(conn_state& c, int res, std::int64_t now) {
  if (res > 0) _bytes_sent += static_cast<unsigned>(res);
  // A batch is done once written whole (the kernel took part of it: the rest goes first).
  const bool rest = c.out.completed(res, c.dead, [](tx_batch* b) { b->bytes.clear(); });
  if (c.dead) return;
  if (res < 0) {
    lose(c, "closed", now);
    return;
  }
  if (rest) {
    send(c);
    return;
  }
  flush(c);
}

// Asks the kernel to stamp each receive on the socket (rx_stamp.hpp). The first socket decides
// for the thread: one that refuses turns stamps off, and the loop reads the clock instead.
void worker::enable_stamps(conn_state& c) noexcept {
  if (!_kernel_stamps) return;
  const int on = 1;
  // Only the probe (the first socket) may turn them off: later sockets' receives are recvmsgs
  // either way, and one without stamps just counts as unstamped.
  if (::setsockopt(c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0 && !_stamps_probed) _kernel_stamps = false;
  _stamps_probed = true;  // a thread whose connections all open later (--conn-ramp) probes then
}

// The calls issued this turn leave with the submit that follows: one clock read, right before
// it, is their send time (a closed loop's calls are also due then). A call issued while its
// connection still has a send in flight leaves a little later; it keeps this stamp.
void worker::stamp_sends() noexcept {
  if (_unsent.empty()) return;
  const std::int64_t t = now_ns();
  const bool closed_loop = _run.schedule == nullptr;
  for (slot* s : _unsent) {
    s->sent_ns = t;
    if (closed_loop) s->intended_ns = t;
  }
  _unsent.clear();
}

// One reply the codec parsed; returns false if the connection had to be dropped. `received`:
// when the receive that completed it arrived (the kernel's stamp, or the turn's `now`).
bool worker::on_reply(conn_state& c, const reply& r, std::int64_t now, std::int64_t received) {
  if (r.status == reply_status::no_reply) {  // HTTP/2 control frames, a reply's head
    if (r.close_after) c.peer_closing = true;
    if (!c.parsed_any) {
      // The server speaks the protocol (its SETTINGS parsed): later trouble is counted as
      // errors, not diagnosed as another protocol.
      c.parsed_any = true;
      _run.any_reply.store(true, std::memory_order_relaxed);
    }
    return true;
  }
  slot* found = c.window.find(r.seq);
  if (found == nullptr) {
    // An answer to something never asked (or already forgotten): the stream is not ours.
    if (c.in_flight == 0) count_error("protocol", now, c);
    lose(c, "protocol", now);
    return false;
  }
  slot s = *found;
  c.window.erase(*found);
  --c.in_flight;
  if (r.tls_port && _cfg.tls == nullptr && _cfg.diagnose_first_reply && !c.parsed_any &&
      !_run.any_reply.load(std::memory_order_relaxed)) {
    stop_with(diagnose_tls_port(_cfg.where), now);  // every other call would get the same 400
  }
  if (!c.parsed_any) {
    c.parsed_any = true;
    _run.any_reply.store(true, std::memory_order_relaxed);
  }
  if (r.close_after) c.peer_closing = true;
  if (!s.timed_out && _cfg.call_timeout.count() > 0 && now - s.sent_ns >= _cfg.call_timeout.count()) {
    // Arrived after its deadline but before the periodic check noticed: still a timeout.
    s.timed_out = true;
    count_error("timeout", now, c, &s);
  }
  if (!s.timed_out) {
    if (r.status == reply_status::ok) {
      live.calls_ok.fetch_add(1, std::memory_order_relaxed);
      if (second_bucket* b = bucket(now)) {
        ++tallies.calls_ok;
        ++b->ok;
        const std::uint64_t lat = reply_latency(s.intended_ns, s.sent_ns, received);
        tallies.latency.record(lat);
        b->latency.record(lat);
        if (!tallies.kinds.empty()) {
          ++tallies.kinds[s.kind].ok;
          tallies.kinds[s.kind].latency.record(lat);
        }
        if (!tallies.endpoints.empty()) {
          ++tallies.endpoints[c.endpoint_index].ok;
          tallies.endpoints[c.endpoint_index].latency.record(lat);
        }
        if (_run.schedule != nullptr) {
          tallies.service.record(reply_latency(s.sent_ns, s.sent_ns, received));
          const std::size_t step = _run.schedule->step_at(s.intended_ns);
          if (step >= _run.first_measured_step && step - _run.first_measured_step < tallies.step_ok.size()) {
            ++tallies.step_ok[step - _run.first_measured_step];
            tallies.step_latency[step - _run.first_measured_step].record(lat);
          }
        }
        tallies.last_completion_ns = now;
      }
    } else {
      count_error(r.error.empty() ? std::string("error_reply") : r.error, now, c, &s);
    }
  }
  if (_cfg.new_connection_per_call) {
    retire(c, now);
    return false;
  }
  if (c.close_after_ns != 0 && ramped_down(c, now)) return c.in_flight != 0;
  if (_run.schedule == nullptr && issuing(now) && !c.peer_closing) issue(c, now, now);
  return true;
}

// --new-conn-per-call: the call on this connection is answered; close it (the reconnection
// below opens the next call's connection as soon as the kernel has ended its recv).
void worker::retire(conn_state& c, std::int64_t now) {
  mark_dead(c);
  c.window.clear();
  c.in_flight = 0;
  c.batch[c.filling].bytes.clear();
  ::shutdown(c.fd, SHUT_RDWR);
  c.reconnect_at = now;
}

// --conn-ramp down: a connection past its time takes no new call; the reply to its last call
// closes it (a FIN the server sees), never to reopen. Its calls were all answered and counted.
bool worker::ramped_down(conn_state& c, std::int64_t now) {
  if (now < _run.measure_from + c.close_after_ns) return false;
  leave_wake_batch(c);
  if (c.in_flight == 0) {
    mark_dead(c);
    c.reconnect_at = never;
    ::shutdown(c.fd, SHUT_RDWR);
  }
  return true;
}

void worker::count_connection(std::int64_t now) {
  if (now >= _run.measure_from && now < _run.measure_until && now < _run.stop_at.load(std::memory_order_relaxed)) {
    ++tallies.connections_measured;
  }
}

void worker::on_recv(conn_state& c, const io_uring_cqe& cqe, std::int64_t now) {
  want_flush(c);  // TLS records to answer, requests held for the handshake, HTTP/2 acks
  bool stream_ended = false;  // a recvmsg completion that carries its header alone
  auto left = detail::take_recv(*_buffers, cqe, c.dead, [&](std::span<const std::byte> bytes) {
    std::int64_t received = now;
    if (_kernel_stamps) {
      // The buffer holds the recvmsg header, the stamp, then the bytes (rx_stamp.hpp).
      const stamped_bytes in = parse_recvmsg(const_cast<std::byte*>(bytes.data()), cqe.res, _rx_layout);
      if (!in.valid || in.payload.empty()) {  // the end of the stream carries no stamp
        stream_ended = true;
        return;
      }
      bytes = in.payload;
      // Counted in the measured window only: the kernel turns stamping on a moment after the
      // first socket asks (a deferred switch), so a run's first receives may carry none.
      if (now >= _run.measure_from && now < _run.measure_until) {
        ++(in.real_stamp != 0 ? tallies.stamped_receives : tallies.unstamped_receives);
      }
      received = _rx_clock.received(in.real_stamp);
    }
    live.bytes_received.fetch_add(bytes.size(), std::memory_order_relaxed);
    if (c.tls != nullptr && !tls_receive(c, bytes, now)) return;  // bytes: now the plaintext
    const auto r = c.rx.feed(bytes, [&](std::span<const std::byte>) {
      return on_reply(c, c.rx.framer().last, now, received);
    });
    if (r == reply_assembler::result::frame_too_large) {
      // A reply the codec named (over --max-body, an HTTP/2 connection error) counts by its name.
      const std::string named = c.rx.framer().last.lost_as;
      if (named.empty() && _cfg.diagnose_first_reply && !c.parsed_any &&
          !_run.any_reply.load(std::memory_order_relaxed)) {
        diagnose(c, now);
      }
      lose(c, named.empty() ? std::string("protocol") : named, now);  // every call in flight on it failed
    } else if (r == reply_assembler::result::no_memory) {
      lose(c, "closed", now);
    }
    if (c.dead) {
      c.rx.restart();  // a sink that lost the connection left the rest kept
    } else if (_talks_unasked) {
      c.codec->write_pending(c.batch[c.filling].bytes);  // sent with this turn's requests
    }
  });
  if (left == detail::recv_left::armed) return;
  // A recvmsg receive's last completion has a positive result even at the end of the stream
  // (its header): that one is the end, not a stop to re-arm after.
  if (left == detail::recv_left::rearm && stream_ended) left = detail::recv_left::ended;
  c.recv_armed = false;
  if (c.dead) return;
  if (left == detail::recv_left::rearm) {
    arm_recv(c);  // buffers are given back before the next submit
  } else {
    const bool announced = c.peer_closing;
    // Hung up on the very first request of the run: what servers do with a foreign protocol.
    if (_cfg.diagnose_first_reply && !c.parsed_any && c.in_flight > 0 &&
        !_run.any_reply.load(std::memory_order_relaxed)) {
      diagnose(c, now, true);
    }
    lose(c, announced ? std::string() : std::string("closed"), now);
    if (announced) c.reconnect_at = now;  // an orderly close (HTTP Connection: close): no back-off
  }
}

void worker::lose(conn_state& c, const std::string& why, std::int64_t now) {
  if (c.dead) return;
  mark_dead(c);
  // An empty `why`: the server said it would close after an earlier reply, so it never took
  // the calls pipelined behind it (or, for HTTP/2, past a GOAWAY's last stream); they are not
  // failed but given back to -n, to be issued again on the next connection (as h2load does),
  // so that ok + errors still adds up to -n.
  if (!why.empty()) {
    c.window.for_each([&](const slot& s) {
      if (!s.timed_out) count_error(why, now, c, &s);
    });
  } else {
    c.window.for_each([&](const slot& s) {
      if (!s.timed_out && s.sent_ns >= _run.measure_from && _issued > 0) --_issued;  // issue() counted it
    });
  }
  c.window.clear();
  c.in_flight = 0;
  c.batch[c.filling].bytes.clear();  // the other one, if in a send, is dropped when it completes
  // c.rx is not touched: this may run inside its sink. Its bytes are dropped when the feed
  // returns, or at the reconnection.
  ::shutdown(c.fd, SHUT_RDWR);
  c.reconnect_at = now + 100'000'000;  // 100 ms: do not hammer a server that is going away
}

// A ramped-down connection's calls will not come back: the wake batch must stop counting them,
// or a turn waits for replies that cannot come until the cut-off (wake_batch.hpp). Its calls
// still draining are dropped too, which only makes the batch smaller for a moment.
void worker::leave_wake_batch(conn_state& c) noexcept {
  if (c.ramped) return;
  c.ramped = true;
  if (_wake != nullptr) _wake->drop_calls(_cfg.depth);
}

void worker::expire(std::int64_t now) {
  const std::int64_t limit = _cfg.call_timeout.count();
  if (limit <= 0) return;
  for (conn_state& c : _conns) {
    if (c.in_flight == 0) continue;
    c.window.for_each([&](slot& s) {
      if (!s.timed_out && now - s.sent_ns >= limit) {
        // Counted once; the slot stays taken until the late reply arrives, so a server that
        // stopped answering also stops receiving new calls on this connection.
        s.timed_out = true;
        count_error("timeout", now, c, &s);
      }
    });
  }
}

void worker::schedule_open_loop(std::int64_t now, std::int64_t& next_wake) {
  // One test per pass, none per call: the uniform schedule's loop is as it was.
  if (_cfg.poisson_arrivals) {
    schedule_calls<true>(now, next_wake);
  } else {
    schedule_calls<false>(now, next_wake);
  }
  _last_schedule_ns = now;
}

template <bool poisson>
void worker::schedule_calls(std::int64_t now, std::int64_t& next_wake) {
  for (conn_state& c : _conns) {
    const bool was_blocked = c.blocked_at_pass;
    c.blocked_at_pass = true;
    if (c.dead || c.peer_closing) continue;
    while (c.in_flight < _cfg.depth) {
      const std::int64_t due = poisson ? c.arrivals.due : _run.schedule->due_ns(c.index, c.next_due);
      if (due < 0) break;
      if (due > now) {
        next_wake = std::min(next_wake, due);
        break;
      }
      // Judged at its due time, not at this pass: a call due before the schedule's end goes out
      // (late, and counted so) even when this thread came round only after the end, as one due
      // mid-run does. Only a stop (SIGINT, a diagnosis) or a full connection keeps it unsent.
      if (!issuing(due)) break;
      ++c.next_due;
      if constexpr (poisson) take_arrival(c);
      if (now - due > late_send_ns) [[unlikely]] count_late(due, was_blocked);
      issue(c, due, now);  // latency counts from `due`: waiting for a free slot is the server's
    }
    c.blocked_at_pass = c.in_flight >= _cfg.depth;
  }
}

// A Poisson arrival taken: counted in its step (the uniform schedule's count follows from the
// connection's position, a random one's does not), and the next one drawn.
void worker::take_arrival(conn_state& c) noexcept {
  const std::size_t step = c.arrivals.step;
  if (step >= _run.first_measured_step && step - _run.first_measured_step < tallies.step_issued.size()) {
    ++tallies.step_issued[step - _run.first_measured_step];
  }
  _run.schedule->next_arrival(c.arrivals);
}

// A call sent over late_send_ns after it was due. Every pass sends all that is due on the
// connections with room. So a late call whose connection could take none at the previous pass
// (-P calls in flight, or a connection being replaced), or that was due before that pass,
// waited for a free slot: held by the target. Any other was late because this thread came
// round late: the client's doing.
void worker::count_late(std::int64_t due, bool was_blocked) noexcept {
  const std::size_t step = _run.schedule->step_at(due);
  if (step < _run.first_measured_step) return;  // the warm-up
  const std::size_t i = step - _run.first_measured_step;
  if (i >= tallies.step_late_client.size()) return;
  ++(was_blocked || due < _last_schedule_ns ? tallies.step_late_held : tallies.step_late_client)[i];
}

// What each connection took from the schedule, step by step: its position is the count.
void worker::count_issued_by_step() {
  if (_run.schedule == nullptr) return;
  if (_cfg.poisson_arrivals) return count_poisson_scheduled();
  const std::size_t steps = _run.schedule->steps().size();
  for (const conn_state& c : _conns) {
    std::uint64_t left = c.next_due;
    for (std::size_t k = 0; k < steps && left > 0; ++k) {
      const std::uint64_t here = std::min(left, _run.schedule->calls_in_step(c.index, k));
      left -= here;
      if (k >= _run.first_measured_step && k - _run.first_measured_step < tallies.step_issued.size()) {
        tallies.step_issued[k - _run.first_measured_step] += here;
      }
    }
  }
}

// Poisson arrivals due in each step: those taken, and those still due before the run ended
// (the connection full, or dead), drawn on from where each connection stopped.
void worker::count_poisson_scheduled() noexcept {
  tallies.step_scheduled = tallies.step_issued;
  const std::int64_t until = std::min(_run.schedule->end_ns(), _run.stop_at.load(std::memory_order_relaxed));
  for (conn_state& c : _conns) {
    while (c.arrivals.due >= 0 && c.arrivals.due < until) {
      const std::size_t step = c.arrivals.step;
      if (step >= _run.first_measured_step && step - _run.first_measured_step < tallies.step_scheduled.size()) {
        ++tallies.step_scheduled[step - _run.first_measured_step];
      }
      _run.schedule->next_arrival(c.arrivals);
    }
  }
}

// Once a turn: the byte counts at the last turn before the measured window and at the last
// turn inside it; their differences are the window's.
void worker::note_bytes(std::int64_t now) noexcept {
  const std::uint64_t received = live.bytes_received.load(std::memory_order_relaxed);
  if (now < _run.measure_from) {
    _sent_before = _bytes_sent;
    _received_before = received;
  } else if (now < _run.measure_until && now < _run.stop_at.load(std::memory_order_relaxed)) {
    tallies.bytes_sent_measured = _bytes_sent - _sent_before;
    tallies.bytes_received_measured = received - _received_before;
  }
}

void worker::run() {
  std::unique_ptr<detail::ring> ring;
  std::unique_ptr<detail::provided_buffers> bufs;
  try {
    const auto features = detail::probe_io_uring();
    ring = std::make_unique<detail::ring>(1024, features);
    bufs = std::make_unique<detail::provided_buffers>(ring->raw(), 0, 512, 32 * 1024);
  } catch (const std::exception& e) {
    failure = e.what();
    for (conn_state& c : _conns) ::close(c.fd);
    _run.ready.fetch_add(1, std::memory_order_release);
    return;
  }
  _ring = ring.get();
  _buffers = bufs.get();
  // Without a registered table (an old kernel, a small RLIMIT_NOFILE) ops name the fds.
  if (io_uring_register_files_sparse(_ring->raw(), static_cast<unsigned>(_conns.size())) == 0) {
    for (std::size_t i = 0; i < _conns.size(); ++i) {
      _conns[i].fixed = static_cast<int>(i);
      register_fd(_conns[i]);
    }
  }
  _run.ready.fetch_add(1, std::memory_order_release);
  while (!_run.go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(100));
  size_tallies();
  open_connections(now_ns());

  // Closed loop only: an open loop wakes at its send times anyway, and its latencies are the
  // ones people correct for coordinated omission, so they stay exact.
  // A connection per call waits on connects and handshakes, not on replies: no batching either.
  const bool batching = _run.schedule == nullptr && !_cfg.new_connection_per_call;
  wake_batch wake(static_cast<unsigned>(_conns.size()) * _cfg.depth, batching ? _cfg.reply_batch : 1,
                  _cfg.reply_batch_window.count());
  _wake = &wake;
  std::int64_t drain_until = 0;
  while (turn(wake)) {
    const std::int64_t now = now_ns();
    if (_any_dead) reconnect_dead(now);
    publish_last_second(now);
    if (issuing(now)) {
      drain_until = 0;  // calls given back by a closing connection reopened -n
    } else {
      if (schedule_pass_owed()) {
        std::int64_t unused = never;
        schedule_open_loop(now, unused);  // its calls go out with the next turn's flush
      }
      if (drained(now, drain_until)) break;
    }
  }
  _wake = nullptr;
  count_issued_by_step();
  if (_streams) {
    for (const conn_state& c : _conns) count_stream(c);
  }
  // The seconds not handed over yet, the last one maybe cut short (its width is the report's).
  if (_cfg.publish_seconds) hand_over_seconds(static_cast<std::int64_t>(tallies.seconds.size()), true);
  for (conn_state& c : _conns) {
    if (c.fd >= 0) ::close(c.fd);
  }
  bufs.reset();
}

// The per-step, per-kind and per-endpoint tallies, sized once before the first call.
void worker::size_tallies() {
  tallies.step_ok.assign(_cfg.steps.size(), 0);
  tallies.step_issued.assign(_cfg.steps.size(), 0);
  tallies.step_late_client.assign(_cfg.steps.size(), 0);
  tallies.step_late_held.assign(_cfg.steps.size(), 0);
  if (_cfg.kinds.size() > 1) tallies.kinds.resize(_cfg.kinds.size());
  if (_cfg.per_endpoint) tallies.endpoints.resize(std::max<std::size_t>(_cfg.endpoints.size(), 1));
  for (std::size_t i = 0; i < _cfg.steps.size(); ++i) tallies.step_latency.emplace_back(1000, 60'000'000'000ull, 3);
  _to_flush.reserve(_conns.size());
  // A connection issues at most its depth per turn, twice if it is replaced within the turn.
  _unsent.reserve(2 * _conns.size() * _cfg.depth);
}

// Every connection's first receive (and TLS handshake), and a closed loop's first calls. The
// first socket probes whether the kernel stamps receives.
void worker::open_connections(std::int64_t start) {
  _rx_layout.msg_controllen = rx_stamp_control_bytes;
  _kernel_stamps = _cfg.kernel_rx_stamps && !_conns.empty();
  for (conn_state& c : _conns) {
    if (_cfg.poisson_arrivals && _run.schedule != nullptr) _run.schedule->first_arrival(c.arrivals, _cfg.seed, c.index);
    c.window = call_window(_cfg.depth);
    if (c.open_after_ns > 0) {
      // --conn-ramp: it opens when its turn comes, by the path that reconnects a lost one.
      mark_dead(c);
      c.reconnect_at = _run.measure_from + c.open_after_ns;
      continue;
    }
    enable_stamps(c);
    count_connection(start);
    if (_cfg.tls != nullptr && !start_tls(c, start)) {
      mark_dead(c);
      c.reconnect_at = start + 100'000'000;
      continue;
    }
    arm_recv(c);
    want_flush(c);  // the ClientHello, for TLS
    if (_run.schedule == nullptr) {
      for (unsigned d = 0; d < _cfg.depth && issuing(start); ++d) issue(c, start, start);
    }
  }
}

// One turn of the ring: schedule, flush, one submit-and-wait, the completions, expiry. False when
// the ring failed (then `failure` says why).
bool worker::turn(wake_batch& wake) {
  std::int64_t now = now_ns();
  std::int64_t next_wake = now + 100'000'000;  // housekeeping at least every 100 ms
  if (_run.schedule != nullptr) schedule_open_loop(now, next_wake);
  for (conn_state* c : _to_flush) {
    c->flush_queued = false;
    flush(*c);
  }
  _to_flush.clear();

  const wake_batch::wait w = wake.plan(now, next_wake, _sends_queued, _ring->cq_entries(), issuing(now));
  _sends_queued = 0;
  stamp_sends();
  const detail::turn_wait enter{.timeout = std::chrono::nanoseconds(std::max<std::int64_t>(w.deadline - now, 0)),
                                .wait_nr = w.wait_nr};
  unsigned received = 0;
  // A tool, unlike the library, may stop on a failed ring: the run reports why.
  const bool entered = detail::ring_turn(
      *_ring, enter, [this](int rc) { failure = std::string("io_uring_enter: ") + std::strerror(-rc); },
      [&](int rc) {
        if (w.batched && rc == -ETIME) wake.timed_out(now_ns());
        now = now_ns();
        _rx_clock.wake(now, _kernel_stamps ? real_ns() : now);
      },
      [&](const io_uring_cqe& cqe) {
        auto* c = tag_ptr<conn_state>(cqe.user_data);
        switch (tag_op(cqe.user_data)) {
          case op::recv: ++received; on_recv(*c, cqe, now); break;
          case op::send: on_send(*c, cqe.res, now); break;
          default: break;
        }
      });
  if (!entered) return false;
  _buffers->commit();
  wake.completed(received, now);
  expire(now);
  note_bytes(now);
  return true;
}

// Reconnects what was lost, once its last request has completed.
void worker::reconnect_dead(std::int64_t now) {
  bool still_dead = false;
  for (conn_state& c : _conns) {
    if (!c.dead) continue;
    still_dead = true;
    if (c.recv_armed || c.out.in_flight() || now < c.reconnect_at || !issuing(now)) continue;
    if (c.close_after_ns != 0 && now >= _run.measure_from + c.close_after_ns) {
      leave_wake_batch(c);  // lost before its time came: never reopened
      continue;             // ramped down
    }
    ::close(c.fd);
    c.fd = connect_to(*c.endpoint, _cfg.connect_timeout);
    if (c.fd < 0) {
      count_error("connect", now, c);
      c.reconnect_at = now + 100'000'000;
      continue;
    }
    count_connection(now);
    enable_stamps(c);
    register_fd(c);  // also lets go of the old socket the slot held
    if (_cfg.tls != nullptr && !start_tls(c, now)) continue;
    if (_streams) count_stream(c);  // the old codec's stream, before it goes (while dead: connection_lost)
    c.dead = false;
    c.peer_closing = false;
    c.parsed_any = false;
    c.codec = _run.proto->new_connection();
    c.rx.restart();
    c.rx.framer().codec = c.codec.get();
    c.next_seq = 0;
    arm_recv(c);
    want_flush(c);  // the ClientHello, for TLS
    if (_run.schedule == nullptr) {
      for (unsigned d = 0; d < _cfg.depth && issuing(now); ++d) issue(c, now, now);
    }
  }
  _any_dead = still_dead;
}

// The last whole second's p99, for the live display; with publish_seconds, every second ended
// since the last call, for --live and --metrics-port.
void worker::publish_last_second(std::int64_t now) {
  if (now < _run.measure_from) return;
  const std::int64_t sec = (now - _run.measure_from) / 1'000'000'000 - 1;
  if (sec >= 0 && sec != _published_second && static_cast<std::size_t>(sec) < tallies.seconds.size()) {
    _published_second = sec;
    live.last_second_p99_ns.store(tallies.seconds[static_cast<std::size_t>(sec)].latency.value_at_percentile(99));
  }
  if (!_cfg.publish_seconds) return;
  // The whole seconds of the window that have ended, those without a call of this thread
  // included: the live output waits for every thread's share of a second.
  const std::int64_t window_now = std::min({now, _run.measure_until, _run.stop_at.load(std::memory_order_relaxed)});
  const std::int64_t ended = (window_now - _run.measure_from) / 1'000'000'000;
  hand_over_seconds(ended, false);
}

// Seconds [_handed_over, end) of the measured window to live.seconds (a second this thread
// had no call in is an empty share: the report's tallies stay as the calls made them).
// `last`: the thread's last hand-over; its last second may be cut short. Once a second:
// the histograms are copied before the lock, which the live output's thread also takes.
void worker::hand_over_seconds(std::int64_t end, bool last) {
  std::vector<live_second> ready;
  if (end > _handed_over) {
    unsigned open = 0;
    for (const conn_state& c : _conns) open += c.fd >= 0 && !c.dead ? 1 : 0;
    ready.resize(static_cast<std::size_t>(end - _handed_over));
    for (live_second& s : ready) {
      s.index = _handed_over++;
      s.final = last && s.index + 1 == end;
      s.connections_open = open;
      if (static_cast<std::size_t>(s.index) >= tallies.seconds.size()) continue;
      const second_bucket& b = tallies.seconds[static_cast<std::size_t>(s.index)];
      s.calls_ok = b.ok;
      s.errors = b.error_kinds;
      s.latency = b.latency;
    }
  }
  if (ready.empty() && !last) return;  // most turns: nothing ended, no lock taken
  std::lock_guard lock(live.seconds_mutex);
  for (live_second& s : ready) live.seconds.push_back(std::move(s));
  if (last) live.finished = true;
}

// Issuing is over: true once every call has come back, the drain time has passed or the run
// was diagnosed; the calls still out are then counted "unfinished".
bool worker::drained(std::int64_t now, std::int64_t& drain_until) {
  quota_used_up = _issued >= _quota;
  bool idle = true;
  for (const conn_state& c : _conns) idle = idle && (c.in_flight == 0 || c.dead);
  if (_streams && !close_streams()) idle = false;  // once per turn of the drain, never per call
  if (drain_until == 0) drain_until = now + std::max<std::int64_t>(_cfg.call_timeout.count(), 2'000'000'000);
  if (!idle && now < drain_until && !_run.diagnosed.load(std::memory_order_relaxed)) return false;
  for (const conn_state& c : _conns) {
    if (c.dead) continue;
    c.window.for_each([&](const slot& s) {
      if (s.timed_out) return;  // timeouts counted already
      ++tallies.errors["unfinished"];
      if (!tallies.kinds.empty()) ++tallies.kinds[s.kind].errors["unfinished"];
      if (!tallies.endpoints.empty()) ++tallies.endpoints[c.endpoint_index].errors["unfinished"];
    });
  }
  return true;
}

bool worker::start_tls(conn_state& c, std::int64_t now) {
  c.tls = tls_transport::open(*_cfg.tls, c.endpoint->host, now);
  if (c.tls != nullptr) return true;
  ++tallies.handshake_failures["tls_handshake"];
  count_error("tls_handshake", now, c);
  return false;
}

void worker::stop_with(const std::string& diagnosis, std::int64_t now) {
  bool expected = false;
  if (!_run.diagnosed.compare_exchange_strong(expected, true)) return;
  _run.diagnosis = diagnosis;
  _run.stop_at.store(now, std::memory_order_relaxed);
  _run.stop.store(true, std::memory_order_relaxed);
}

// Ciphertext in, plaintext out (in `bytes`); false when the connection was lost.
bool worker::tls_receive(conn_state& c, std::span<const std::byte>& bytes, std::int64_t now) {
  tls_transport& t = *c.tls;
  const bool was_established = t.established();
  const auto r = t.receive(bytes);
  if (r == tls_transport::result::failed) {
    // In TLS 1.3 the client is done before the server has judged its certificate: a refusal of
    // it arrives as an alert after established(), and is still a failed handshake.
    const bool refused_us = t.refused_our_certificate();
    if (!t.handshake_counted || refused_us) {
      t.handshake_counted = true;
      const std::string kind = t.peer_spoke_tls() ? t.failure_kind() : std::string("tls_handshake");
      ++tallies.handshake_failures[kind];
      if (!_run.any_reply.load(std::memory_order_relaxed)) {
        // The first handshake of the run failed: every other would fail the same way.
        if (!t.peer_spoke_tls()) {
          stop_with(diagnose_plaintext_reply(_cfg.where), now);
        } else if (refused_us) {
          stop_with("TLS: the server " + authority_of(*c.endpoint) + " refused our client certificate (" + t.error() +
                        "); give --cert FILE --key FILE, signed by a CA the server trusts",
                    now);
        } else if (kind == "tls_verify") {
          stop_with("TLS: the server " + authority_of(*c.endpoint) + " was not verified: " + t.error() +
                        "; give --cacert FILE (its CA) or --insecure",
                    now);
        } else {
          stop_with("TLS handshake with " + authority_of(*c.endpoint) + " failed: " + t.error(), now);
        }
      }
      lose(c, kind, now);
    } else {
      lose(c, "protocol", now);
    }
    return false;
  }
  if (!was_established && t.established() && !t.handshake_counted) {
    t.handshake_counted = true;
    tallies.handshake.record(static_cast<std::uint64_t>(std::max<std::int64_t>(now - t.handshake_started_ns, 1)));
    if (bucket(now) != nullptr) ++tallies.handshakes_measured;
    // The calls waited for the handshake: their latency starts now.
    c.window.for_each([&](slot& s) {
      s.sent_ns = now;
      if (_run.schedule == nullptr) s.intended_ns = now;
    });
  }
  if (r == tls_transport::result::closed) c.peer_closing = true;
  bytes = t.plain();
  return true;
}

}  // namespace ringrpc::load::engine_detail

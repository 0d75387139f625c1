#include "server/reader.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <malloc.h>
#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>

#include "uring/cqe_tag.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {
constexpr std::uint16_t buffer_group = 0;
constexpr unsigned ring_entries = 1024;
// A connection whose armed receive has delivered nothing this long gets its socket looked at
// once (see check_liveness()); the sweep ticks at least this often.
constexpr std::int64_t liveness_after_ns = 1'000'000'000;
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    std::string out = "[";  // appended, not `"[" + std::string`: GCC 12 -O3 -Wrestrict
    out.append(host).append("]:").append(std::to_string(port));
    return out;
  }
  return "unknown";
}

// "1.2.3.4:80" -> "1.2.3.4", "[::1]:80" -> "::1": the address a peer's limits are kept for.
std::string host_of(const std::string& peer) {
  const auto colon = peer.rfind(':');
  std::string host = colon == std::string::npos ? peer : peer.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

reader::reader(server_core& core, unsigned index)
    : _core(core), _index(index), _account(core.budget()) {}

reader::~reader() {
  close_all();
  join();
}

void reader::start(const uring_features& features) {
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] { run(features, ready); });
  started.get();  // rethrows a failure to create the ring
}

void reader::quiesce() noexcept {
  _quiesce.store(true, std::memory_order_release);
  _waker.notify();
}

void reader::close_all() noexcept {
  _close_all.store(true, std::memory_order_release);
  _waker.notify();
}

void reader::join() {
  if (_thread.joinable()) _thread.join();
}

void reader::connection_destroyed() noexcept {
  if (_alive.fetch_sub(1, std::memory_order_acq_rel) == 1) _waker.notify();
}

void reader::run(const uring_features& features, std::promise<void>& ready) {
  // Named so tools (top -H, the dispatch-policy tests) can tell the I/O threads apart.
  const std::string name = "ringrpc-reader" + std::to_string(_index);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  std::unique_ptr<ring> r;
  std::unique_ptr<provided_buffers> bufs;
  try {
    r = std::make_unique<ring>(ring_entries, features);
    const auto& o = _core.options();
    bufs = std::make_unique<provided_buffers>(r->raw(), buffer_group, o.recv_buffers_per_reader,
                                              o.recv_buffer_bytes);
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }
  _ring = r.get();
  _buffers = bufs.get();
  _waker.arm(*_ring);
  _ring_fd.store(_ring->fd(), std::memory_order_release);
  arm_sweep_timer();
  ready.set_value();

  bool block = false;  // the first turn only submits: nobody was told we sleep yet
  for (;;) {
    const int rc = block ? _ring->submit_and_wait() : _ring->submit();
    if (rc < 0 && rc != -EINTR && rc != -ETIME && rc != -EAGAIN && rc != -EBUSY) {
      std::fprintf(stderr, "ringrpc: reader %u: io_uring_enter failed: %s\n", _index,
                   std::strerror(-rc));
      std::terminate();
    }
    // One clock read per turn: the frames reaped together were received together. It stamps
    // calls (queue time, deadlines) and connections (idle check).
    _turn_ns = now_ns();
    time_next_call();
    refresh_table();
    _ring->for_each_cqe([this](const io_uring_cqe& cqe) {
      try {
        handle(cqe);
      } catch (const std::bad_alloc&) {
        // handle() fails the one call or connection an allocation was for; what reaches here
        // (an event's bookkeeping) is lost, and the loop goes on: never terminate the server.
        _core.note_out_of_memory();
      }
    });
    if (_sweep_due) {
      _sweep_due = false;
      sweep();
      if (!_closing_all) arm_sweep_timer();
    }
    apply_budget();

    if (_quiesce.load(std::memory_order_acquire) && !_quiesced) {
      _quiesced = true;
      for (connection* c = _live; c != nullptr; c = c->live_next) cancel_recv(c);
    }
    if (_close_all.load(std::memory_order_acquire) && !_closing_all) {
      _closing_all = true;
      _quiesced = true;
      for (connection* c = _live; c != nullptr;) {
        connection* next = c->live_next;  // start_close may unlink c
        // Shutting the socket down ends its receive and fails any write of the responder, so
        // every reference held on the connection drains without waiting for the peer.
        ::shutdown(c->fd, SHUT_RDWR);
        start_close(c);
        c = next;
      }
    }
    // After the stop requests: connections they finished are released here, this turn.
    end_of_turn();
    // Every frame read before the quiesce has now been answered or queued.
    if (_quiesced && !_quiesce_acked.load(std::memory_order_relaxed)) {
      _quiesce_acked.store(true, std::memory_order_release);
    }
    // Exit only when no connection of ours exists any more, anywhere: a resume message still in
    // flight to this ring holds a reference and must be received, or it would leak.
    if (_closing_all && _live == nullptr && _alive.load(std::memory_order_acquire) == 0) break;

    // A turn that held the thread this long delayed every connection of this reader.
    if (const std::int64_t busy = now_ns() - _turn_ns; busy > stall_threshold_ns) _stalls.add();
    _waker.prepare_sleep();
    block = !((_quiesce.load() && !_quiesced) || (_close_all.load() && !_closing_all) ||
              (_closing_all && _live == nullptr && _alive.load() == 0));
    if (!block) _waker.cancel_sleep();
  }
  // Unregister the buffers before the ring goes: the ring's teardown cancels what is left
  // (only the waker's read) and no completion can name a connection any more.
  bufs.reset();
  _buffers = nullptr;
  _ring = nullptr;
  _exited.store(true, std::memory_order_release);
}

void reader::handle(const io_uring_cqe& cqe) {
  switch (tag_op(cqe.user_data)) {
    case op::wake: _waker.arm(*_ring); break;
    case op::handoff: on_handoff(cqe.res); break;
    case op::recv: on_recv(tag_ptr<connection>(cqe.user_data), cqe); break;
    case op::resume: on_resume(tag_ptr<connection>(cqe.user_data)); break;
    case op::timeout: _sweep_due = true; break;  // acted on after this turn's receives
    default: break;  // cancel results: -ENOENT / -EALREADY mean the recv had already ended
  }
}

void reader::on_handoff(int fd) {
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
    refuse_connection(fd);
    return;
  }
  std::string peer, host;
  try {
    peer = peer_address(fd);
    host = host_of(peer);
    const auto verdict = _core.peers().admit(host, _turn_ns);
    if (verdict != peer_limits::verdict::admitted) {
      // One host may not take every slot, nor open them as fast as it likes.
      _core.release_connection_slot();
      _refused_per_address.add();
      const auto& o = _core.options();
      if (verdict == peer_limits::verdict::too_many) {
        refuse_connection(fd, "max_connections_per_address", o.max_connections_per_address,
                          "server has max_connections_per_address (" +
                              std::to_string(o.max_connections_per_address) + ") open from " + host);
      } else {
        refuse_connection(fd, "accept_rate_per_address", o.accept_rate_per_address,
                          "more than accept_rate_per_address (" +
                              std::to_string(o.accept_rate_per_address) + ") new connections a second from " +
                              host);
      }
      return;
    }
  } catch (const std::bad_alloc&) {
    peer.clear();  // an unnamed, uncounted peer is better than a refused one
    host.clear();
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
  c->peer = std::move(peer);
  c->peer_host = std::move(host);
  c->accepted_ns = _turn_ns;
  c->last_read_ns = _turn_ns;
  _alive.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(_live_mu);  // /connections reads the list from the admin thread
    c->live_next = _live;
    if (_live) _live->live_prev = c;
    _live = c;
  }
  _accepted.add();
  _core.post_event(event_kind::connection_opened, [&] {
    event e;
    e.peer = c->peer;
    e.id = c->id;
    return e;
  });
  if (_quiesced) {
    start_close(c);
    return;
  }
  notify_endpoints(c, call_purpose::connected);
  arm_recv(c);
}

void reader::arm_recv(connection* c) noexcept {
  io_uring_sqe* sqe = _ring->get_sqe();
  _buffers->prep_recv_multishot(sqe, c->fd);
  io_uring_sqe_set_data64(sqe, make_tag(op::recv, c));
  c->recv_armed = true;
  c->cancel_sent = false;
}

void reader::cancel_recv(connection* c) noexcept {
  if (!c->recv_armed || c->cancel_sent) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  io_uring_prep_cancel64(sqe, make_tag(op::recv, c), 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
  c->cancel_sent = true;
}

void reader::on_recv(connection* c, const io_uring_cqe& cqe) {
  if (cqe.flags & IORING_CQE_F_BUFFER) {
    const auto id = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    if (cqe.res > 0) {
      _bytes_in.add(static_cast<std::uint64_t>(cqe.res));
      c->last_read_ns = _turn_ns;
      c->liveness_checked = false;
      try {
        deliver(c, _buffers->bytes(id, static_cast<std::size_t>(cqe.res)));
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
  c->recv_armed = false;
  if (cqe.res == 0) {
    // End of the peer's stream: a half-close (shutdown(SHUT_WR)) or a close. Either way every
    // complete request already received is answered (docs/protocol.md); a peer that closed
    // altogether makes the reply's write fail, and that cancels what is still running.
    c->eof = true;
    c->half_closed = true;
  } else if (cqe.res < 0 && cqe.res != -ENOBUFS && cqe.res != -ECANCELED) {
    c->eof = true;  // reset by peer and friends: nothing more will arrive
    c->closing = true;
    c->gone.store(true, std::memory_order_relaxed);
    if (c->failure.empty()) c->failure = std::string("receive failed: ") + std::strerror(-cqe.res);
  } else if (!c->closing && !_quiesced) {
    // -ENOBUFS: every provided buffer was in use. No byte was lost (the data stays in the
    // socket); re-arm once this turn has given its buffers back. -ECANCELED: we paused, but a
    // resume may already have been handled while the cancel was in flight; end_of_turn()
    // re-arms only if the connection is not paused (again) by then.
    retain(c);
    _rearm.push_back(c);
  }
  maybe_finish(c);
}

void reader::deliver(connection* c, std::span<const std::byte> data) {
  if (c->closing) return;
  if (c->paused.load(std::memory_order_relaxed) || c->budget_paused) {
    if (!c->assembler.hold(data)) out_of_memory(c, "out of memory keeping a paused connection's bytes");
    return;
  }
  auto sink = [this, c](std::span<const std::byte> f) { return on_frame(c, f); };
  auto r = data.empty() ? c->assembler.drain(sink) : c->assembler.feed(data, sink);
  for (;;) {
    if (r == frame_assembler::result::frame_too_large) {
      _bad_frames.add();
      const std::string msg = "frame body of " + std::to_string(c->assembler.rejected_length()) +
                              " bytes exceeds the server's max_frame_bytes (" +
                              std::to_string(c->assembler.max_body_bytes()) + ")";
      answer(new_call(c), 0, wire::Kind::Error, status::frame_too_large, msg);
      if (c->failure.empty()) c->failure = msg;
      start_close(c);
      return;
    }
    if (r == frame_assembler::result::no_memory) {
      out_of_memory(c, "out of memory assembling a frame; closing the connection");
      return;
    }
    if (r != frame_assembler::result::paused || c->closing) return;
    if (c->budget_paused) return;  // kept; apply_budget() drains it on relief
    if (pause(c)) return;
    r = c->assembler.drain(sink);
  }
}

bool reader::should_pause(connection* c) const noexcept {
  const auto& o = _core.options();
  return over_limits(c, o.max_inflight_per_connection, o.max_inflight_bytes_per_connection) ||
         c->budget_paused;
}

bool reader::pause(connection* c) noexcept {
  c->paused.store(true, std::memory_order_seq_cst);
  // The responder clears the flag when the pressure goes; if it went before the flag was
  // visible, nobody would send the resume, so look again and undo the pause ourselves.
  if (!should_pause(c) && c->paused.exchange(false, std::memory_order_seq_cst)) return false;
  _pauses.add();
  _core.post_event(event_kind::limit_hit, [&] {
    event e;
    e.peer = c->peer;
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
  cancel_recv(c);
  return true;
}

void reader::on_resume(connection* c) {
  if (!c->finished) {
    if (!c->budget_paused) {
      try {
        deliver(c, {});
      } catch (const std::bad_alloc&) {
        out_of_memory(c, "out of memory delivering kept frames");
      }
      charge_assembler(c);
    }
    if (!c->paused.load(std::memory_order_relaxed) && !c->budget_paused && !c->recv_armed &&
        !c->eof && !c->closing && !_quiesced) {
      arm_recv(c);
    }
    maybe_finish(c);
  }
  _to_release.push_back(c);  // the reference the resume message carried
}

bool reader::on_frame(connection* c, std::span<const std::byte> frame) {
  if (c->closing) return false;
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
  c->request_bytes.fetch_add(frame.size(), std::memory_order_relaxed);
  frame_view v;
  switch (decode_frame(k->request, v)) {
    case decode_outcome::ok: break;
    case decode_outcome::malformed_with_id:
      _bad_frames.add();
      answer(k, v.call_id, wire::Kind::Error, status::bad_request,
             v.kind > wire::Kind::MAX ? "unknown frame kind"
                                      : "frame failed FlatBuffers verification");
      return !should_pause(c);
    case decode_outcome::malformed:
      // Without a trustworthy call id there is nobody to answer; the stream itself is suspect.
      _bad_frames.add();
      answer(k, 0, wire::Kind::Error, status::bad_request,
             "undecodable frame without a readable call id; closing the connection");
      if (c->failure.empty()) c->failure = "undecodable frame without a readable call id";
      start_close(c);
      return false;
  }

  if (v.call_id == 0 && v.kind != wire::Kind::Cancel) {
    // Id 0 is reserved for connection-level answers: a client could not tell ours apart.
    _bad_frames.add();
    answer(k, 0, wire::Kind::Error, status::bad_request,
           "call id 0 is reserved for connection-level errors; closing the connection");
    if (c->failure.empty()) c->failure = "a frame with the reserved call id 0";
    start_close(c);
    return false;
  }
  switch (v.kind) {
    case wire::Kind::Request:
    case wire::Kind::OneWay:
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
      break;
    case wire::Kind::Ping: answer(k, v.call_id, wire::Kind::Pong, status::ok, {}); break;
    case wire::Kind::Cancel:
      // The call's handler sees cancelled(); a call still queued is answered CANCELLED unrun.
      // Either way exactly one answer for it still comes.
      _cancels.add();
      c->note_cancel(v.call_id);
      // Nothing goes back for the cancel itself. Id 0: releasing this call must not forget
      // the cancel it just recorded.
      answer(k, 0, wire::Kind::OneWay, status::ok, {});
      break;
    default:
      _bad_frames.add();
      answer(k, v.call_id, wire::Kind::Error, status::bad_request,
             "unexpected frame kind from a client");
      break;
  }
  return !should_pause(c);
}

void reader::dispatch(call* k, const frame_view& v) {
  _received.add();
  const bool one_way = v.kind == wire::Kind::OneWay;
  const auto refuse_kind = one_way ? wire::Kind::OneWay : wire::Kind::Error;
  if (_core.budget().exhausted()) {
    // Memory, not a pool, is short: refuse before the call holds anything more.
    _busy.add();
    _rejected_memory.add();
    _core.post_event(event_kind::call_rejected, [&] {
      event e;
      e.peer = k->conn->peer;
      e.name = "max_buffered_bytes";
      e.detail = "memory_budget";
      e.id = v.call_id;
      return e;
    });
    answer(k, v.call_id, refuse_kind, status::server_busy,
           "server memory budget is exhausted (max_buffered_bytes " +
               std::to_string(_core.budget().limit()) + ")",
           50);
    return;
  }
  if (_core.draining()) {
    _stopping.add();
    _core.post_event(event_kind::call_rejected, [&] {
      event e;
      e.peer = k->conn->peer;
      e.detail = "shutting_down";
      e.id = v.call_id;
      return e;
    });
    answer(k, v.call_id, refuse_kind, status::shutting_down, "server is shutting down");
    return;
  }
  endpoint_slot* slot = _table->find(v.method);
  if (slot == nullptr) {
    _unknown.add();
    answer(k, v.call_id, refuse_kind, status::unknown_method,
           "no method named '" + std::string(v.method) + "'");
    return;
  }
  k->id = v.call_id;
  k->kind = v.kind;
  k->purpose = one_way ? call_purpose::one_way : call_purpose::request;
  k->target = slot;
  k->method_name = v.method;  // inside k->request
  k->payload = v.payload;
  k->received_ns = _turn_ns;
  // Fair share: calls of a connection that already has more than fair_share_calls in flight
  // wait behind everyone else's (docs/execution.md). One relaxed load of a counter this
  // connection's calls already touch; no state shared between connections.
  // Once some of a connection's calls wait over its share, its later ones follow them there,
  // so one caller's calls are not reordered between the two queues.
  const std::uint32_t in_flight = k->conn->outstanding.load(std::memory_order_relaxed);
  k->over_share = in_flight > _core.options().fair_share_calls ||
                  k->conn->over_share_pending.load(std::memory_order_relaxed) > 0;
  if (k->over_share) k->conn->over_share_pending.fetch_add(1, std::memory_order_relaxed);
  // A budget beyond 10^15 us (31 years; e.g. UINT64_MAX) means "no deadline", as documented.
  constexpr std::uint64_t max_budget_us = 1'000'000'000'000'000ull;
  k->deadline_ns = v.timeout_us == 0 || v.timeout_us > max_budget_us
                       ? 0
                       : k->received_ns + static_cast<std::int64_t>(v.timeout_us) * 1000;
  const auto admitted = slot->admit(k);
  if (admitted != endpoint_slot::admit_result::busy && admitted != endpoint_slot::admit_result::stopped) {
    _unposted = nullptr;  // another thread may own (and recycle) k from here on
  }
  switch (admitted) {
    case endpoint_slot::admit_result::submitted:
      _enqueued.add();
      note_submitted(slot->pool());
      return;
    case endpoint_slot::admit_result::taken:
      // Ran here (direct) or joined an inbox: either way its reply may be queued already.
      _enqueued.add();
      ++_posted_this_turn;
      return;
    case endpoint_slot::admit_result::answered:
      _enqueued.add();
      return;
    case endpoint_slot::admit_result::busy: {
      _busy.add();
      thread_pool* p = slot->pool();
      if (k->over_share && p != nullptr && !slot->serial()) {
        // Its share's queue is full: back off longer the more it already has in flight.
        const unsigned share = std::max(1u, _core.options().fair_share_calls);
        const std::uint32_t retry = 10 * std::min<std::uint32_t>(100, in_flight / share);
        answer(k, v.call_id, refuse_kind, status::server_busy,
               "connection is over its fair share of pool '" + p->name() + "' (" +
                   std::to_string(in_flight) + " calls in flight; fair_share_calls " +
                   std::to_string(share) + ")",
               retry);
        return;
      }
      _core.post_event(event_kind::call_rejected, [&] {
        event e;
        e.peer = k->conn->peer;
        e.name = p == nullptr || slot->serial() ? slot->name() : p->name();
        e.detail = p == nullptr || slot->serial() ? "inbox_full" : "pool_full";
        e.id = v.call_id;
        return e;
      });
      answer(k, v.call_id, refuse_kind, status::server_busy,
             p == nullptr || slot->serial()
                 ? "endpoint '" + slot->name() + "' has " +
                       std::to_string(slot->options().inbox_capacity) + " messages waiting (inbox_capacity)"
                 : "pool '" + p->name() + "' is full (" + _core.pool_state(*p) + ")",
             10);
      return;
    }
    case endpoint_slot::admit_result::stopped:
      _stopping.add();
      _core.post_event(event_kind::call_rejected, [&] {
        event e;
        e.peer = k->conn->peer;
        e.name = slot->name();
        e.detail = "endpoint_stopped";
        e.id = v.call_id;
        return e;
      });
      answer(k, v.call_id, refuse_kind, status::shutting_down,
             "endpoint '" + slot->name() + "' is stopped");
      return;
  }
}

void reader::notify_endpoints(connection* c, call_purpose purpose, std::string_view text) {
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
    switch (slot->admit(k)) {
      case endpoint_slot::admit_result::submitted: note_submitted(slot->pool()); break;
      case endpoint_slot::admit_result::busy:
      case endpoint_slot::admit_result::stopped:
        _core.pool().put(k);
        release(c);
        break;
      default: break;
    }
  }
}

void reader::arm_sweep_timer() noexcept {
  // One timer per ring and one pass over this ring's connections per tick, nothing per call.
  // The tick is a fraction of the shortest timeout in force (a connection closes between 1 and
  // 1.25 timeouts after the fact), at most 1 s, and 50 ms while the budget keeps connections
  // paused, so reading resumes promptly when memory frees up.
  const auto& o = _core.options();
  std::int64_t tick = liveness_after_ns;  // the liveness check wants a tick this often
  for (const auto t : {o.idle_timeout, o.write_stall_timeout, o.frame_stall_timeout}) {
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
bool reader::peer_left(connection* c) noexcept {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
    if (c->failure.empty()) {
      try {
        c->failure = std::string("connection failed: ") + std::strerror(err);
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
void reader::give_back_memory() noexcept {
  constexpr std::int64_t trim_step = 32 << 20;
  const std::int64_t used = _core.budget().used();
  _trim_mark = std::max(_trim_mark, used);
  if (_trim_mark - used > trim_step) {
    ::malloc_trim(0);
    _trim_mark = used;
  }
}

void reader::sweep() noexcept {
  if (_index == 0) give_back_memory();
  const auto& o = _core.options();
  const auto ns = [](std::chrono::milliseconds m) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(m).count();
  };
  const std::int64_t idle = ns(o.idle_timeout);
  const std::int64_t write_stall = ns(o.write_stall_timeout);
  const std::int64_t frame_stall = ns(o.frame_stall_timeout);
  for (connection* c = _live; c != nullptr;) {
    connection* next = c->live_next;  // shed() may unlink c
    if (c->closing) {
      c = next;
      continue;
    }
    if ((c->budget_paused || c->paused.load(std::memory_order_relaxed)) && !c->recv_armed &&
        peer_left(c)) {
      c->eof = true;
      c->gone.store(true, std::memory_order_relaxed);
      start_close(c);
      c = next;
      continue;
    }
    if (c->closing || c->finished) {  // peer_left() may have resumed and finished it
      c = next;
      continue;
    }
    if (!c->liveness_checked && c->recv_armed && !c->cancel_sent && !_quiesced &&
        _turn_ns - c->last_read_ns >= liveness_after_ns && check_liveness(c)) {
      c = next;
      continue;
    }
    const std::int64_t last_write = c->last_write_ns.load(std::memory_order_relaxed);
    const std::int64_t stalled_since = c->write_stalled_since_ns.load(std::memory_order_relaxed);
    if (write_stall > 0 && stalled_since != 0 && _turn_ns - stalled_since > write_stall) {
      // Replies wait and the peer has taken no byte: it holds their memory and its calls'.
      shed(c, "write stalled: the peer read nothing while replies waited", _write_stalled);
    } else if (frame_stall > 0 && c->assembler.buffered() > 0 && !c->assembler.holding() &&
               !c->paused.load(std::memory_order_relaxed) && _turn_ns - c->last_read_ns > frame_stall) {
      // Part of a frame, and no byte of the rest for a long time: a slow-drip peer. (A
      // connection we paused ourselves is not the peer's fault, unless the budget paused it:
      // then shedding the holder is how the budget gets its memory back.)
      shed(c, "frame stalled: part of a frame and no further byte", _frame_stalled);
    } else if (idle > 0 && c->outstanding.load(std::memory_order_relaxed) == 0 &&
               c->queued_bytes.load(std::memory_order_relaxed) == 0 &&
               _turn_ns - std::max(c->last_read_ns, last_write) > idle) {
      // A connection waiting for a slow handler is not idle: its peer is owed an answer.
      c->close_reason = "idle";
      _idle_closed.add();
      ::shutdown(c->fd, SHUT_RDWR);
      start_close(c);
    }
    c = next;
  }
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
bool reader::check_liveness(connection* c) noexcept {
  c->liveness_checked = true;
  std::byte b{};
  const ssize_t n = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  const int err = n < 0 ? errno : 0;
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) return false;
  if (n > 0) {
    _liveness_kicked.add();
    c->last_read_ns = _turn_ns;
    cancel_recv(c);
    return false;
  }
  _dead_closed.add();
  c->eof = true;
  if (n == 0) {
    c->half_closed = true;
    ::shutdown(c->fd, SHUT_RD);  // ends the stuck receive; the answers owed still go out
    cancel_recv(c);
    return false;
  }
  c->gone.store(true, std::memory_order_relaxed);
  if (c->failure.empty()) {
    try {
      c->failure = std::string("receive failed: ") + std::strerror(err) +
                   " (found by the liveness check; the receive never completed)";
    } catch (...) {
    }
  }
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
  return true;
}

void reader::shed(connection* c, const char* reason, counter& count) noexcept {
  count.add();
  c->close_reason = reason;
  // Shutting down fails the responder's write in flight (it then drops the queued replies)
  // and ends our receive; handlers polling cancelled() see the peer gone.
  c->gone.store(true, std::memory_order_relaxed);
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

void reader::charge_assembler(connection* c) noexcept {
  const std::size_t now = c->assembler.capacity();
  if (now == c->assembler_charged) return;
  _account.charge(static_cast<std::int64_t>(now) - static_cast<std::int64_t>(c->assembler_charged));
  c->assembler_charged = now;
}

void reader::apply_budget() noexcept {
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
    if (c->budget_paused || c->closing) continue;
    const std::size_t held = c->assembler.capacity() + c->request_bytes.load(std::memory_order_relaxed) +
                             c->queued_bytes.load(std::memory_order_relaxed);
    if (held < share) continue;
    c->budget_paused = true;
    ++_budget_paused;
    _budget_pauses.add();
    cancel_recv(c);
    _core.post_event(event_kind::limit_hit, [&] {
      event e;
      e.peer = c->peer;
      e.name = "max_buffered_bytes";
      e.value = b.limit();
      e.detail = "reading paused: the server's memory budget is exhausted";
      e.id = c->id;
      return e;
    });
  }
}

void reader::out_of_memory(connection* c, const char* what) noexcept {
  _core.note_out_of_memory();
  if (c->failure.empty()) {
    try {
      c->failure = what;
    } catch (...) {
    }
  }
  c->assembler.reset();
  c->gone.store(true, std::memory_order_relaxed);
  ::shutdown(c->fd, SHUT_RDWR);
  start_close(c);
}

void reader::refuse_connection(int fd) noexcept {
  _refused.add();
  const unsigned max = _core.options().max_connections;
  try {
    refuse_connection(fd, "max_connections", max,
                      "server has max_connections (" + std::to_string(max) + ") open");
  } catch (const std::bad_alloc&) {
    ::close(fd);
  }
}

void reader::refuse_connection(int fd, const char* knob, unsigned value, const std::string& why) noexcept {
  // Say why before closing, as an error frame with call id 0, so the client can tell a full
  // server from a crash. The socket's buffer is empty: this small send cannot block.
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
  _core.post_event(event_kind::limit_hit, [&] {
    event e;
    e.name = knob;
    e.value = value;
    e.detail = "connection refused";
    return e;
  });
}

void reader::snapshot_connections(std::vector<connection_info>& out) const {
  std::lock_guard lock(_live_mu);
  for (const connection* c = _live; c != nullptr; c = c->live_next) {
    connection_info i;
    i.id = c->id;
    i.peer = c->peer;
    i.accepted_ns = c->accepted_ns;
    i.calls_in_flight = c->outstanding.load(std::memory_order_relaxed);
    i.queued_reply_bytes = c->queued_bytes.load(std::memory_order_relaxed);
    i.paused = c->paused.load(std::memory_order_relaxed);
    i.reader = _index;
    out.push_back(std::move(i));
  }
}

void reader::note_submitted(thread_pool* p) noexcept {
  for (auto& [pool, n] : _to_wake) {
    if (pool == p) {
      ++n;
      return;
    }
  }
  _to_wake.emplace_back(p, 1);
}

void reader::refresh_table() noexcept {
  auto& d = _core.endpoints();
  const auto v = d.version();
  if (_table && v == _table_version) return;
  _table = d.current();
  _table_version = v;
}

call* reader::new_call(connection* c) noexcept {
  call* k = _core.pool().get();
  k->conn = c;
  retain(c);
  c->outstanding.fetch_add(1, std::memory_order_relaxed);
  k->reply.clear();
  k->payload = {};
  k->deadline_ns = 0;
  k->id = 0;
  k->purpose = call_purpose::request;
  _created.add();
  return k;
}

void reader::answer(call* k, std::uint64_t id, wire::Kind kind, status code,
                    std::string_view message, std::uint32_t retry_after_ms) noexcept {
  k->id = id;
  k->kind = kind;
  if (kind == wire::Kind::OneWay) {
    k->reply.clear();  // one-way traffic is never answered; the call only needs releasing
  } else {
    frame_view f;
    f.call_id = id;
    f.kind = kind;
    f.code = code;
    f.message = message;
    f.retry_after_ms = retry_after_ms;
    try {
      _encoder.encode_into(f, k->reply);
    } catch (const std::bad_alloc&) {
      // No memory for even an error frame: the peer learns by the connection closing.
      k->reply.clear();
      _core.note_out_of_memory();
      ::shutdown(k->conn->fd, SHUT_RDWR);
    }
  }
  if (_unposted == k) _unposted = nullptr;
  _core.replies().post(k);
  ++_posted_this_turn;
}

void reader::start_close(connection* c) noexcept {
  c->closing = true;
  cancel_recv(c);
  maybe_finish(c);
}

void reader::maybe_finish(connection* c) noexcept {
  if (c->recv_armed || c->finished) return;
  // Frames held back by a pause must still be answered: wait for the resume that drains them.
  const bool kept_frames = c->assembler.holding();
  if (!c->closing && !(c->eof && !kept_frames)) return;
  if (c->eof && !c->closing && c->assembler.buffered() > 0) _bad_frames.add();  // truncated frame
  c->closing = true;
  {
    std::lock_guard lock(_live_mu);
    if (c->live_prev) c->live_prev->live_next = c->live_next; else _live = c->live_next;
    if (c->live_next) c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = nullptr;
  }
  c->finished = true;
  // After a clean end of stream the calls in flight still owe their answers: only a failure,
  // a shed or a stop makes them give up.
  if (!c->half_closed || !c->failure.empty() || c->close_reason != nullptr || _closing_all) {
    c->gone.store(true, std::memory_order_relaxed);
  }
  c->assembler.reset();  // nothing more is framed: give its memory back now
  charge_assembler(c);
  if (c->budget_paused) {
    c->budget_paused = false;
    --_budget_paused;
  }
  _finished.add();
  _core.release_connection_slot();
  if (!c->peer_host.empty()) _core.peers().release(c->peer_host);
  _core.post_event(event_kind::connection_closed, [&] {
    event e;
    e.peer = c->peer;
    e.id = c->id;
    e.detail = c->close_reason != nullptr ? c->close_reason
               : !c->failure.empty()      ? c->failure
                                          : "closed by peer";
    e.duration_ns = static_cast<std::uint64_t>(_turn_ns - c->accepted_ns);
    return e;
  });
  if (!c->failure.empty()) notify_endpoints(c, call_purpose::network_error, c->failure);
  notify_endpoints(c, call_purpose::disconnected);
  // The reader's own reference goes at the end of the turn: callers up the stack may still
  // touch the connection, and calls it posted may be released by the responder meanwhile.
  _to_release.push_back(c);
}

void reader::end_of_turn() noexcept {
  _buffers->commit();
  for (connection* c : _rearm) {
    if (!c->closing && !c->recv_armed && !c->eof && !_quiesced && !c->budget_paused &&
        !c->paused.load(std::memory_order_relaxed)) {
      arm_recv(c);
    }
    release(c);
  }
  _rearm.clear();
  for (connection* c : _to_release) release(c);
  _to_release.clear();
  for (auto& [pool, n] : _to_wake) pool->wake(n);
  _to_wake.clear();
  if (_posted_this_turn != 0) {
    _core.replies().notify();
    _posted_this_turn = 0;
  }
}

}  // namespace ringrpc::detail

#include "server/responder.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <future>
#include <utility>

#include "base/thread_name.hpp"
#include "uring/cqe_tag.hpp"
#include "server/reader.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {
constexpr unsigned ring_entries = 1024;
}

responder::responder(server_core& core)
    : _core(core), _account(std::make_unique<memory_budget::account>(core.budget())) {}

responder::~responder() { stop_and_join(); }

void responder::start(const uring_features& features) {
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] {
    name_this_thread("rr-resp");
    std::unique_ptr<ring> r;
    try {
      r = std::make_unique<ring>(ring_entries, features);
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    _ring = r.get();
    ready.set_value();
    run();
    _ring = nullptr;
  });
  started.get();
}

void responder::stop_and_join() {
  _stop.store(true, std::memory_order_release);
  _waker.notify();
  if (_thread.joinable()) _thread.join();
}

void responder::run() {
  _waker.arm(*_ring);
  bool block = false;  // the first turn only submits: nobody was told we sleep yet
  for (;;) {
    const int rc = block ? _ring->submit_and_wait() : _ring->submit();
    if (ring::fatal(rc)) {
      std::fprintf(stderr, "ringrpc: responder: io_uring_enter failed: %s\n", std::strerror(-rc));
      std::terminate();
    }
    _turn_ns = now_ns();  // one clock read per turn: write times for the idle check
    _ring->for_each_cqe([this](const io_uring_cqe& cqe) { handle(cqe); });
    take_inbox();
    // Replies that arrived during this turn leave in one gathered write per connection.
    for (connection* c : _dirty) {
      c->dirty = false;
      if (!c->write_in_flight) start_write(c);
    }
    _dirty.clear();
    if (_shut_down_writers.load(std::memory_order_acquire)) {
      for (connection* c = _writing; c != nullptr; c = c->writing_next) {
        if (!c->shut_down) {
          c->shut_down = true;
          ::shutdown(c->fd, SHUT_RDWR);  // the write in flight fails; on_write releases the rest
        }
      }
    }

    const bool stopping = _stop.load(std::memory_order_acquire);
    if (stopping && _inbox.empty() && _writes_in_flight == 0 && _resumes_in_flight == 0) break;
    _waker.prepare_sleep();
    block = _inbox.empty();
    if (!block) _waker.cancel_sleep();
    if (stopping && _writes_in_flight == 0 && _resumes_in_flight == 0) {
      block = false;  // nothing will complete: do not wait for a completion
      _waker.cancel_sleep();
    }
  }
}

void responder::handle(const io_uring_cqe& cqe) {
  switch (tag_op(cqe.user_data)) {
    case op::wake: _waker.arm(*_ring); break;
    case op::send: on_write(tag_ptr<connection>(cqe.user_data), cqe.res); break;
    case op::resume:
      --_resumes_in_flight;
      // The reader's ring is gone (shutdown): the reference the message carried is ours again.
      if (cqe.res < 0) release(tag_ptr<connection>(cqe.user_data));
      break;
    default: break;
  }
}

void responder::take_inbox() {
  const std::size_t cap = _core.options().max_queued_reply_bytes;
  while (mpsc_node* n = _inbox.pop()) {
    call* k = call::from_node(n);
    connection* c = k->conn;
    if (k->reply.empty() || c->write_failed.load(std::memory_order_relaxed)) {
      release_call(k);  // one-way, or nobody left to read it
      continue;
    }
    if (c->replies.empty()) c->write_stalled_since_ns.store(_turn_ns, std::memory_order_relaxed);
    c->replies.push_back(k);
    k->reply_charged = k->reply.size();
    _account->charge(static_cast<std::int64_t>(k->reply_charged));
    c->queued_bytes.store(c->replies.bytes(), std::memory_order_relaxed);
    link_writing(c);
    if (c->replies.bytes() > cap && !c->backlogged.load(std::memory_order_relaxed)) {
      c->backlogged.store(true, std::memory_order_seq_cst);
    }
    if (!c->dirty) {
      c->dirty = true;
      _dirty.push_back(c);
    }
  }
}

void responder::start_write(connection* c) {
  if (c->replies.empty()) return;
  if (c->write == nullptr && (c->write = _slots.take()) == nullptr) {
    // No memory to describe the write: this connection fails, the others go on.
    _core.note_out_of_memory();
    retain(c);  // releasing its calls may drop every other reference
    fail_writes(c);
    unlink_writing(c);
    release(c);
    return;
  }
  write_slot& w = *c->write;
  const std::size_t n = c->replies.gather(w.iov, write_slot::max_iov);
  w.msg.msg_iov = w.iov;
  w.msg.msg_iovlen = n;
  io_uring_sqe* sqe = _ring->get_sqe();
  // MSG_NOSIGNAL: a vanished peer must give EPIPE here, not kill the process with SIGPIPE.
  io_uring_prep_sendmsg(sqe, c->fd, &w.msg, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, make_tag(op::send, c));
  c->write_in_flight = true;
  ++_writes_in_flight;
}

void responder::on_write(connection* c, int res) {
  c->write_in_flight = false;
  --_writes_in_flight;
  // Releasing calls may drop every other reference to the connection; keep it alive until
  // this function is done with it.
  retain(c);
  if (res == -EINTR || res == -EAGAIN) {
    start_write(c);
  } else if (res < 0) {
    fail_writes(c);
  } else {
    _bytes_out.add(static_cast<std::uint64_t>(res));
    if (c->replies.consume(static_cast<std::size_t>(res), [this](call* k) { release_call(k); })) {
      _partial_writes.add();
    }
    c->queued_bytes.store(c->replies.bytes(), std::memory_order_relaxed);
    c->last_write_ns.store(_turn_ns, std::memory_order_relaxed);
    // The peer took bytes: whatever still waits has waited only since now.
    c->write_stalled_since_ns.store(c->replies.empty() ? 0 : _turn_ns, std::memory_order_relaxed);
    if (c->backlogged.load(std::memory_order_relaxed) &&
        c->replies.bytes() <= _core.options().max_queued_reply_bytes / 2) {
      c->backlogged.store(false, std::memory_order_seq_cst);
      maybe_resume(c);
    }
    if (!c->replies.empty()) start_write(c);
  }
  if (!c->write_in_flight && c->write != nullptr) _slots.give_back(std::exchange(c->write, nullptr));
  if (c->replies.empty() && !c->write_in_flight) unlink_writing(c);
  release(c);
}

void responder::fail_writes(connection* c) {
  // The peer is gone or reset (or we cannot write to it): its queued replies have nobody to go
  // to. Shutting the socket down also ends the reader's receive, so the reader lets go of the
  // connection promptly even when it had paused reading.
  c->write_failed.store(true, std::memory_order_relaxed);
  ::shutdown(c->fd, SHUT_RDWR);
  c->replies.clear([this](call* k) { release_call(k); });
  c->queued_bytes.store(0, std::memory_order_relaxed);
  c->write_stalled_since_ns.store(0, std::memory_order_relaxed);
  c->backlogged.store(false, std::memory_order_seq_cst);
  maybe_resume(c);
}

void responder::link_writing(connection* c) noexcept {
  if (c->writing_linked) return;
  c->writing_linked = true;
  c->writing_prev = nullptr;
  c->writing_next = _writing;
  if (_writing) _writing->writing_prev = c;
  _writing = c;
}

void responder::unlink_writing(connection* c) noexcept {
  if (!c->writing_linked) return;
  c->writing_linked = false;
  if (c->writing_prev) c->writing_prev->writing_next = c->writing_next; else _writing = c->writing_next;
  if (c->writing_next) c->writing_next->writing_prev = c->writing_prev;
  c->writing_prev = c->writing_next = nullptr;
}

void responder::release_call(call* k) {
  connection* c = k->conn;
  c->forget_cancel(k->id);
  if (k->share_counted) {
    if (k->over_share) c->share->over_share_pending.fetch_sub(1, std::memory_order_relaxed);
    if (c->share != &c->own_share) c->share->in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  _account->release(static_cast<std::int64_t>(k->request_charged + k->reply_charged));
  c->request_bytes.fetch_sub(k->request_charged, std::memory_order_seq_cst);
  c->outstanding.fetch_sub(1, std::memory_order_seq_cst);
  _released.add();
  maybe_resume(c);
  _core.pool().put(k);
  release(c);
}

void responder::maybe_resume(connection* c) {
  if (!c->paused.load(std::memory_order_seq_cst)) return;
  const auto& o = _core.options();
  if (over_limits(c, o.max_inflight_per_connection, o.max_inflight_bytes_per_connection)) return;
  if (!c->paused.exchange(false, std::memory_order_seq_cst)) return;  // someone else resumed it
  retain(c);  // carried by the message, dropped by the reader
  io_uring_sqe* sqe = _ring->get_sqe();
  // The reader's ring owns the connection's receive; tell it with a message, not a flag it
  // would have to poll.
  io_uring_prep_msg_ring(sqe, c->owner->ring_fd(), 0, make_tag(op::resume, c), 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::resume, c));
  ++_resumes_in_flight;
}

}  // namespace ringrpc::detail

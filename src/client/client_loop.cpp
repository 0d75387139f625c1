#include "client/client_loop.hpp"

#include "base/clock.hpp"
#include "base/thread_name.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>

#include "client/call_links.hpp"
#include "client/multishot_recv.hpp"
#include "client/reply_outcome.hpp"
#include "uring/cqe_tag.hpp"
#include "uring/ring_turn.hpp"
#include "uring/uring_probe.hpp"

namespace ringrpc::detail {

namespace {

constexpr unsigned client_ring_entries = 512;
constexpr std::uint16_t client_buffer_group = 0;
constexpr unsigned buffer_count = 256;
constexpr unsigned buffer_bytes = 16 * 1024;
// Buffers grown past this for one big frame are given back once it is done: a connection that
// carried one huge reply must not pin its size for the rest of its life.
constexpr std::size_t client_keep_bytes = 64 * 1024;

thread_local constinit bool on_loop_thread = false;

// The timer's outcome, whether the timer or a late-read answer finds the deadline passed first.
call_outcome timed_out() { return failed_outcome(call_error::timeout, "deadline passed before the reply arrived"); }

}  // namespace

bool client_loop::on_any_loop_thread() noexcept { return on_loop_thread; }

client_loop::client_loop() {
  const uring_features features = probe_io_uring();  // throws with the reason
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] {
    name_this_thread("rr-client");
    on_loop_thread = true;
    std::unique_ptr<ring> r;
    std::unique_ptr<provided_buffers> bufs;
    try {
      r = std::make_unique<ring>(client_ring_entries, features);
      bufs = std::make_unique<provided_buffers>(r->raw(), client_buffer_group, buffer_count, buffer_bytes);
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    _ring = r.get();
    _buffers = bufs.get();
    run(ready);
    bufs.reset();
  });
  _thread_id = _thread.get_id();
  started.get();
}

client_loop::~client_loop() {
  _stop.store(true, std::memory_order_release);
  _waker.notify();
  if (_thread.joinable()) _thread.join();
  // The loop ended every stream under its lock, so no handle starts a post now; one already
  // inside post_from_stream() may still be about to notify.
  while (_stream_posts.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  pending* p = nullptr;
  while (_free.try_pop(p)) delete p;
}

pending* client_loop::get_pending() {
  pending* p = nullptr;
  if (!_free.try_pop(p)) p = new pending();
  p->written = p->finished = p->counted = false;
  p->deadline_ns = 0;
  p->detached = nullptr;
  p->cancel_requested.store(cancel_reason::none, std::memory_order_relaxed);
  return p;
}

void client_loop::put_pending(pending* p) noexcept {
  disarm(p);
  uncount(p);
  p->done = nullptr;
  p->conn = nullptr;
  if (p->frame.capacity() > client_keep_bytes) std::vector<std::byte>().swap(p->frame);
  if (!_free.try_push(p)) delete p;
}

void client_loop::run(std::promise<void>& ready) {
  _waker.arm(*_ring);
  ready.set_value();
  bool block = false;  // the first turn only submits: nobody was told we sleep yet
  const terminate_on_fatal on_fatal{"client loop"};
  for (;;) {
    std::chrono::nanoseconds wait{-1};
    if (const std::int64_t due = next_deadline(); due != 0) {
      wait = std::chrono::nanoseconds(std::max<std::int64_t>(due - now_ns(), 0));
    }
    ring_turn(*_ring, turn_wait{.block = block, .timeout = wait}, on_fatal,
              [this](const io_uring_cqe& cqe) { handle(cqe); });
    // Awake: what callers post from now on is taken before the next sleep (the check after
    // prepare_sleep), so they need not write the eventfd.
    _waker.cancel_sleep();
    _buffers->commit();
    take_inbox();
    expire_deadlines();
    for (client_conn* c : _dirty) {
      c->dirty = false;
      if (!c->dead) start_write(c);
    }
    _dirty.clear();

    if (_stop.load(std::memory_order_acquire)) {
      // Every client is gone (they own the runtime); wait for their last completions.
      for (client_conn* c : std::vector<client_conn*>(_conns)) {
        if (!c->detached) {
          c->detached = true;
          fail_connection(c, call_error::client_closed, "client runtime stopped");
        }
      }
      if (_conns.empty() && _inbox.empty()) break;
    }
    _waker.prepare_sleep();
    block = _inbox.empty() && !(_stop.load() && _conns.empty());
    if (!block) _waker.cancel_sleep();
  }
}

void client_loop::handle(const io_uring_cqe& cqe) {
  switch (tag_op(cqe.user_data)) {
    case op::wake: _waker.arm(*_ring); break;
    case op::recv: on_recv(tag_ptr<client_conn>(cqe.user_data), cqe); break;
    case op::send: on_write(tag_ptr<client_conn>(cqe.user_data), cqe.res); break;
    default: break;
  }
}

void client_loop::take_inbox() {
  while (mpsc_node* n = _inbox.pop()) accept_work(pending::from_node(n));
}

void client_loop::accept_work(pending* p) {
  client_conn* c = p->conn;
  switch (p->kind) {
    case pending::what::attach:
      _conns.push_back(c);
      arm_recv(c);
      put_pending(p);
      if (c->tls) tls_start(c);
      return;
    case pending::what::detach:
      c->detached = true;
      c->on_freed = p->detached;
      fail_connection(c, call_error::client_closed, "client closed");
      put_pending(p);
      maybe_free(c);
      return;
    case pending::what::cancel_call:
      on_cancel_call(p);
      return;
    case pending::what::stream_open:
      accept_stream_open(p);
      return;
    case pending::what::stream_frame:
    case pending::what::stream_cancel:
      accept_stream_frame(p);
      return;
    case pending::what::call:
    case pending::what::one_way:
    case pending::what::cancel:  // queued by the loop itself, never posted
      break;
  }
  if (c->dead) {
    p->written = true;  // it never will be: complete() may recycle it right away
    if (p->kind == pending::what::call) {
      // The reason the connection failed, as the calls in flight then got it: a call posted
      // just after connect() may reach the loop only after the handshake failed.
      const std::string_view why =
          c->detached || c->failure.empty() ? std::string_view("connection is closed") : std::string_view(c->failure);
      complete(p, failed_outcome(c->detached ? call_error::client_closed : call_error::connection_closed, why));
    } else {
      put_pending(p);
    }
    return;
  }
  if (p->kind == pending::what::call) {
    if (const cancel_reason why = p->cancel_requested.load(std::memory_order_acquire);
        why != cancel_reason::none) {
      // Cancelled between call_async and here: never sent, so no Cancel frame either.
      p->written = true;
      complete(p, failed_outcome(call_error::cancelled, why == cancel_reason::parent
                                                    ? "cancelled: the parent call was cancelled"
                                                    : "cancelled by the caller (call_options::cancel)"));
      return;
    }
    if (!c->inflight.insert(p)) {
      // admit() keeps the calls in flight within max_pending_calls, so this is only a guard.
      p->written = true;
      complete(p, failed_outcome(call_error::client_busy, "too many calls in flight"));
      return;
    }
    if (p->deadline_ns != 0) add_deadline(c, p->deadline_ns, p->id);
  }
  c->out.queue().push_back(p);
  mark_dirty(c);
}

void client_loop::add_deadline(client_conn* c, std::int64_t at, std::uint64_t id) {
  // Ended calls and streams leave their entries behind (removal from a heap is costly); drop
  // them in one pass when they outnumber the live ones, so the heap stays O(calls in flight).
  if (c->deadlines.size() > 2 * (c->inflight.size() + c->streams.size()) + 64) {
    std::erase_if(c->deadlines, [c](const client_conn::deadline& d) {
      if (const pending* q = c->inflight.find(d.id)) return q->deadline_ns != d.at;
      const client_stream_state* s = c->streams.size() != 0 ? c->streams.find(d.id) : nullptr;
      return s == nullptr || s->deadline_ns != d.at;
    });
    std::make_heap(c->deadlines.begin(), c->deadlines.end(), std::greater<>{});
  }
  c->deadlines.push_back({at, id});
  std::push_heap(c->deadlines.begin(), c->deadlines.end(), std::greater<>{});
}

void client_loop::mark_dirty(client_conn* c) {
  if (!c->dirty) {
    _dirty.push_back(c);  // first: if it throws, the flag must not claim the connection is listed
    c->dirty = true;
  }
}

void client_loop::arm_recv(client_conn* c) noexcept {
  arm_multishot_recv(*_ring, *_buffers, c->fd, c);
  c->recv_armed = true;
}

void client_loop::on_recv(client_conn* c, const io_uring_cqe& cqe) {
  const recv_left left = take_recv(*_buffers, cqe, c->dead, [this, c](std::span<const std::byte> bytes) {
    if (c->tls) {
      tls_receive(c, bytes);  // ciphertext: its plaintext comes back through feed_frames()
    } else {
      feed_frames(c, bytes);
    }
  });
  if (left == recv_left::armed) return;
  c->recv_armed = false;
  if (left == recv_left::rearm && !c->dead) {
    arm_recv(c);  // buffers come back when this batch is committed, before the next submit
  } else if (!c->dead) {
    fail_connection(c, call_error::connection_closed,
                    cqe.res == 0 ? "server closed the connection" : std::strerror(-cqe.res));
  }
  maybe_free(c);
}

void client_loop::feed_frames(client_conn* c, std::span<const std::byte> bytes) {
  auto r = c->assembler->feed(bytes, [this, c](std::span<const std::byte> f) { return on_frame(c, f); });
  if (r == frame_assembler::result::frame_too_large) {
    fail_connection(c, call_error::protocol_error,
                    "reply frame exceeds the client's max_frame_bytes");
  } else if (r != frame_assembler::result::ok && r != frame_assembler::result::paused &&
             !c->dead) {
    fail_connection(c, call_error::protocol_error, "could not buffer a reply frame");
  }
  release_receive_memory(c);
}

void client_loop::release_receive_memory(client_conn* c) noexcept {
  if (c->assembler_grown && c->assembler->buffered() == 0) {
    c->assembler.emplace(c->max_frame_bytes);
    c->assembler_grown = false;
  }
  if (_scratch.capacity() > client_keep_bytes) std::vector<std::byte>().swap(_scratch);
}

bool client_loop::on_frame(client_conn* c, std::span<const std::byte> frame) {
  if (c->dead) return false;
  // A frame larger than a few receive buffers was assembled in the assembler's own buffer.
  if (frame.size() > client_keep_bytes) c->assembler_grown = true;
  _scratch.assign(frame.begin(), frame.end());  // decoding needs an aligned start
  decoded_frame decoded = decode_frame(_scratch);
  const frame_view& v = decoded.view;
  if (decoded.outcome != decode_outcome::ok) {
    fail_connection(c, call_error::protocol_error, "server sent a frame that failed verification");
    return false;
  }
  if (v.kind == wire::Kind::Error && v.call_id == 0) {
    // A connection-level error (e.g. our frame was too large): the server closes next.
    const call_outcome o = connection_error_outcome(v);
    c->dead = true;
    c->open.store(false, std::memory_order_release);
    c->inflight.drain([&](pending* p) { complete(p, o); });
    end_all_streams(c, call_error::server_status, v.code, v.message);
    ::shutdown(c->fd, SHUT_RDWR);
    return false;
  }
  pending* p = c->inflight.take(v.call_id);
  if (p == nullptr) {
    // A stream's frame (streams are not in `inflight`: a call's answer pays nothing for them),
    // or the answer of a call that timed out earlier, or a pong/cancel echo we do not track.
    if (c->streams.size() != 0) on_stream_frame(c, v);
    return true;
  }
  if (p->deadline_ns != 0 && now_ns() >= p->deadline_ns) [[unlikely]] {
    // The deadline passed before this turn saw the answer: the caller gets the timeout whatever
    // the answer says, as it would have had the timer been looked at first (a loop that woke
    // late finds both at once; the server's own deadline_exceeded is this same event).
    complete(p, timed_out());
    return true;
  }
  std::string refused;  // response metadata past our caps: this call fails, the connection stays
  complete(p, outcome_of_answer(v, c->response_metadata_caps, refused));
  return true;
}

void client_loop::start_write(client_conn* c) noexcept {
  if (c->tls) {
    tls_start_write(c);
    return;
  }
  msghdr* msg = c->out.next();
  if (msg == nullptr) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  io_uring_prep_sendmsg(sqe, c->fd, msg, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, make_tag(op::send, c));
}

void client_loop::written(pending* p) noexcept {
  p->written = true;
  if (p->kind != pending::what::call || p->finished) put_pending(p);
}

void client_loop::on_write(client_conn* c, int res) {
  if (c->tls) {
    tls_on_write(c, res);
    maybe_free(c);
    return;
  }
  if (res < 0 && !c->dead) fail_connection(c, call_error::connection_closed, std::strerror(-res));
  if (c->out.completed(res, c->dead, [this](pending* p) { written(p); })) start_write(c);
  maybe_free(c);
}

void client_loop::complete(pending* p, const call_outcome& o) noexcept {
  p->finished = true;
  disarm(p);  // a cancel requested from now on finds nothing to do
  // Before the callback: a caller woken by it may make its next call at once and must find
  // the room this one held.
  if (p->written) uncount(p);
  run_callback(p->done, o);
  p->done = nullptr;
  if (p->written) put_pending(p);
}

void client_loop::uncount(pending* p) noexcept {
  if (!p->counted) return;
  p->counted = false;
  client_conn* c = p->conn;
  if (p->kind != pending::what::stream_frame) c->pending_calls.fetch_sub(1, std::memory_order_relaxed);
  give_back_bytes(c, p->frame.size());
}

void client_loop::give_back_bytes(client_conn* c, std::size_t bytes) noexcept {
  // seq_cst (the same locked instruction on x86): a co_write that counted itself in
  // room_waiters and then found the budget full is seen by the load below.
  c->pending_bytes.fetch_sub(bytes, std::memory_order_seq_cst);
  if (c->room_waiters.load(std::memory_order_seq_cst) != 0) [[unlikely]] wake_room_writers(c);
}

void client_loop::wake_room_writers(client_conn* c) noexcept {
  // Taken out stream by stream under each one's lock, woken after: one resumed inline here (no
  // home) runs on this thread and may post to the loop, never touch the table being walked.
  coro_waiter* woken = nullptr;
  c->streams.for_each([&](client_stream_state& s) {
    const std::lock_guard lock(s.mu);
    if (!s.writer_needs_room) return;
    coro_waiter* w = s.take_writer_locked();
    w->next = woken;
    woken = w;
  });
  wake_all(woken);
}

void client_loop::send_cancel(client_conn* c, std::uint64_t id) noexcept {
  // Advice to the server, not needed for correctness here: if memory is short, skip it.
  pending* p = nullptr;
  try {
    p = get_pending();
    p->kind = pending::what::cancel;
    p->conn = c;
    p->id = id;
    frame_view f;
    f.call_id = id;
    f.kind = wire::Kind::Cancel;
    _encoder.encode_into(f, p->frame);
  } catch (...) {
    if (p != nullptr) put_pending(p);
    return;
  }
  c->out.queue().push_back(p);
  try {
    mark_dirty(c);
  } catch (...) {
    // Goes out with the next write on this connection instead.
  }
}

void request_cancel(client_loop* loop, pending* p, cancel_reason why) noexcept { loop->request_cancel(p, why); }

void client_loop::request_cancel(pending* p, cancel_reason why) noexcept {
  auto none = cancel_reason::none;
  if (!p->cancel_requested.compare_exchange_strong(none, why, std::memory_order_acq_rel)) return;
  // The flag alone cancels a call the loop has not taken yet (accept_work); the message
  // cancels one in flight. Without memory for the message, the call runs to its end.
  pending* m = nullptr;
  try {
    m = get_pending();
  } catch (...) {
    return;
  }
  m->kind = pending::what::cancel_call;
  m->conn = p->conn;
  m->id = p->id;
  p->conn->posted_by_callers.fetch_add(1, std::memory_order_relaxed);
  post(m);
}

void client_loop::disarm(pending* p) noexcept {
  // Both wait for a trigger running on another thread (it only posts a message), so p is not
  // touched by one once this returns.
  p->stop.reset();
  if (p->parent) {
    p->parent->unlisten(p->parent_token);
    p->parent_token = 0;
    p->parent.reset();
  }
}

void client_loop::on_cancel_call(pending* m) noexcept {
  client_conn* c = m->conn;
  const std::uint64_t id = m->id;
  put_pending(m);
  c->posted_by_callers.fetch_sub(1, std::memory_order_relaxed);
  pending* p = c->dead ? nullptr : c->inflight.find(id);
  if (p != nullptr) {
    const cancel_reason why = p->cancel_requested.load(std::memory_order_acquire);
    c->inflight.take(id);
    complete(p, failed_outcome(call_error::cancelled, why == cancel_reason::parent
                                                   ? "cancelled: the parent call was cancelled"
                                                   : "cancelled by the caller (call_options::cancel)"));
    // As for a timeout: the server drops it if queued, its handler sees cancelled().
    send_cancel(c, id);
  }
  maybe_free(c);
}

void client_loop::fail_connection(client_conn* c, call_error e, std::string_view why) noexcept {
  if (!c->dead) {
    c->dead = true;
    c->open.store(false, std::memory_order_release);
    try {
      c->failure.assign(why);
    } catch (const std::bad_alloc&) {
      // Later calls then say only that the connection is closed.
    }
    // Ends the receive and any write at once; the fd itself closes when both have completed.
    ::shutdown(c->fd, SHUT_RDWR);
  }
  const call_outcome o = failed_outcome(e, why);
  c->inflight.drain([&](pending* p) { complete(p, o); });
  end_all_streams(c, e, status::unavailable, why);
  c->deadlines.clear();
  if (!c->writing()) c->out.queue().clear([this](pending* p) { written(p); });
}

std::int64_t client_loop::next_deadline() const noexcept {
  std::int64_t best = 0;
  for (const client_conn* c : _conns) {
    if (!c->deadlines.empty() && (best == 0 || c->deadlines.front().at < best)) {
      best = c->deadlines.front().at;
    }
  }
  return best;
}

void client_loop::expire_deadlines() noexcept {
  const std::int64_t now = now_ns();
  for (client_conn* c : _conns) {
    auto& h = c->deadlines;
    while (!h.empty() && h.front().at <= now) {
      const auto d = h.front();
      std::pop_heap(h.begin(), h.end(), std::greater<>{});
      h.pop_back();
      pending* p = c->inflight.find(d.id);
      if (p == nullptr && c->streams.size() != 0) expire_stream(c, d.id, d.at);
      if (p == nullptr || p->deadline_ns != d.at) continue;  // answered already (or a stream's)
      c->inflight.take(d.id);
      complete(p, timed_out());
      // The server would otherwise run (or keep running) a call nobody waits for; its late
      // answer, Cancelled or not, is dropped as an unknown id.
      if (!c->dead) send_cancel(c, d.id);
    }
  }
}

void client_loop::maybe_free(client_conn* c) noexcept {
  if (!c->detached || c->recv_armed || c->writing()) return;
  // on_cancel_call / accept_stream_frame free it once they have taken the last of them
  if (c->posted_by_callers.load(std::memory_order_acquire) != 0) return;
  std::erase(_conns, c);
  std::erase(_dirty, c);
  ::close(c->fd);
  if (c->on_freed) c->on_freed->set_value();
  delete c;
}

}  // namespace ringrpc::detail

// The reader's thread and loop: one submit per turn, completions dispatched by op, the turn's
// deferred work (re-arms, releases, wake-ups) done once at its end. Connections are accepted
// and closed in reader_connections.cpp, frames become calls in reader_frames.cpp, timeouts and
// the memory budget are enforced in reader_sweep.cpp.
#include "server/shard.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "base/thread_name.hpp"
#include "server/server_core.hpp"
#include "server/shard_downstreams.hpp"
#include "server/shard_ops.hpp"
#include "uring/cqe_tag.hpp"
#include "uring/ring_futex.hpp"
#include "uring/ring_turn.hpp"

namespace ringrpc::detail {

namespace {

constexpr std::uint16_t shard_buffer_group = 0;
constexpr unsigned shard_ring_entries = 1024;
// How long the bookkeeping of a reply its handler wrote may wait for the shard (see run()).
constexpr std::chrono::nanoseconds inline_bookkeeping_lag = std::chrono::milliseconds(10);

}  // namespace

shard::shard(server_core& core, unsigned index)
    : _core(core), _index(index), _account(core.budget()), _calls(core.pool()), _responder(core, *this) {}

thread_local shard* shard::current = nullptr;

shard::~shard() {
  close_all();
  join();
}

void shard::start(const uring_features& features) {
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] { run(features, ready); });
  started.get();  // rethrows a failure to create the ring
}

void shard::quiesce() noexcept {
  _quiesce.store(true, std::memory_order_release);
  _waker.notify();
}

void shard::close_all() noexcept {
  _close_all.store(true, std::memory_order_release);
  _waker.notify();
}

void shard::join() {
  if (_thread.joinable()) _thread.join();
}

void shard::connection_destroyed() noexcept {
  if (_alive.fetch_sub(1, std::memory_order_acq_rel) == 1) _waker.notify();
}

void shard::run(const uring_features& features, std::promise<void>& ready) {
  // Named so tools (top -H, the dispatch-policy tests) can tell the I/O threads apart.
  name_this_thread("rr-read", _index);
  std::unique_ptr<ring> r;
  std::unique_ptr<provided_buffers> bufs;
  try {
    r = std::make_unique<ring>(shard_ring_entries, features);
    const auto& o = _core.options();
    bufs = std::make_unique<provided_buffers>(r->raw(), shard_buffer_group, o.recv_buffers_per_reader,
                                              o.recv_buffer_bytes);
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }
  _ring = r.get();
  _buffers = bufs.get();
  current = this;
  _responder.attach(*_ring);
  _waker.arm(*_ring);
  _ring_fd.store(_ring->fd(), std::memory_order_release);
  _ring_futex = features.futex_wake;
  arm_sweep_timer();
  ready.set_value();

  bool block = false;  // the first turn only submits: nobody was told we sleep yet
  const terminate_on_fatal on_fatal{"reader", static_cast<int>(_index)};
  for (;;) {
    ring_turn(
        *_ring, turn_wait{.block = block, .timeout = longest_sleep(block)}, on_fatal,
        [this](int) {
          // One clock read per turn: the frames reaped together were received together. It
          // stamps calls (queue time, deadlines) and connections (idle check).
          _turn_ns = now_ns();
          // Awake: work handed to us from now on is found before the next sleep (the check
          // after prepare_sleep), so its producers need not write the eventfd.
          _waker.cancel_sleep();
          mark_user_code();
          time_next_call();
          refresh_table();
          // Replies handed over while we slept, before this turn's frames: a call its handler
          // wrote itself is released here, so it does not count against its connection's next
          // frame (fair share, in-flight caps, a reused call id's cancel).
          _responder.take_inbox();
        },
        [this](const io_uring_cqe& cqe) {
          try {
            handle(cqe);
          } catch (const std::bad_alloc&) {
            // handle() fails the one call or connection an allocation was for; what reaches
            // here (an event's bookkeeping) is lost, and the loop goes on: never terminate the
            // server.
            _core.note_out_of_memory();
          }
        });
    if (_sweep_due) {
      _sweep_due = false;
      sweep();
      if (!_closing_all) arm_sweep_timer();
    }
    apply_budget();
    // Downstream calls cancelled from elsewhere or past their deadlines: their frames resume below.
    if (_downstreams) _downstreams->after_completions(_turn_ns);
    // Replies handlers finished since the last turn, then connections their release resumed.
    _responder.take_inbox();
    run_resumes();
    // Frames gRPC sessions decided while sealing (stream credit, messages it let go).
    deliver_session_frames();
    // Coroutine handler frames of this shard whose awaited calls completed elsewhere.
    run_coroutines();

    act_on_stop_requests();
    // Connections that left the live list may still have replies waiting for a peer that
    // does not read.
    if (_closing_all) _responder.shut_down_writers();
    // After the stop requests: connections they finished are released here, this turn.
    end_of_turn();
    // Every frame read before the quiesce has now been answered or queued.
    if (_quiesced && !_quiesce_acked.load(std::memory_order_relaxed)) {
      _quiesce_acked.store(true, std::memory_order_release);
    }
    // Exit only when no connection of ours exists any more, anywhere: a resume message still in
    // flight to this ring holds a reference and must be received, or it would leak.
    if (_closing_all && _live == nullptr && _alive.load(std::memory_order_acquire) == 0 &&
        (!_downstreams || _downstreams->idle())) {
      break;
    }

    // A turn that held the thread this long delayed every connection of this reader.
    if (const std::int64_t busy = now_ns() - _turn_ns; busy > stall_threshold_ns) _counts[sc::event_loop_stalls].add();
    _waker.prepare_sleep();
    block = _responder.inbox_empty() && _resumes == nullptr && _resumptions.empty() && _session_frames.empty() &&
            !_responder.deferred_ready() &&
            (!_downstreams || _downstreams->cancels_empty()) &&
            !((_quiesce.load() && !_quiesced) || (_close_all.load() && !_closing_all) ||
              (_closing_all && _live == nullptr && _alive.load() == 0));
    if (!block) _waker.cancel_sleep();
  }
  // Frames homed here resume where their calls complete from now on.
  close_coroutines();
  // Every downstream connection is gone (the loop waited for that) and every call was
  // completed by close_all(), which disarmed its triggers.
  _downstreams.reset();
  // Unregister the buffers before the ring goes: the ring's teardown cancels what is left
  // (only the waker's read) and no completion can name a connection any more.
  bufs.reset();
  _buffers = nullptr;
  _ring = nullptr;
  current = nullptr;
  _exited.store(true, std::memory_order_release);
}

std::chrono::nanoseconds shard::longest_sleep(bool block) const noexcept {
  // The sweep's timer bounds the wait; a downstream call's deadline may be nearer.
  std::chrono::nanoseconds wait{-1};
  if (_downstreams) {
    if (const std::int64_t due = _downstreams->next_deadline(); due != 0) {
      wait = std::chrono::nanoseconds(std::max<std::int64_t>(due - now_ns(), 0));
    }
  }
  // A handler that wrote its reply itself does not wake us (responder_inline.cpp): while
  // calls are out, a sleep is bounded, so their bookkeeping (the server's counts, the memory
  // charged, a drain waiting for them) lags them by that much at most.
  if (block && _core.inline_replies() && _created.get() != _responder.released() &&
      (wait.count() < 0 || wait > inline_bookkeeping_lag)) {
    wait = inline_bookkeeping_lag;
  }
  return wait;
}

void shard::act_on_stop_requests() noexcept {
  if (_quiesce.load(std::memory_order_acquire) && !_quiesced) {
    _quiesced = true;
    for (connection* c = _live; c != nullptr; c = c->live_next) {
      cancel_recv(c);
      // The drain is over: streams still open end now (docs/design/streams.md, "Ends").
      end_streams(c, status::shutting_down, "server is shutting down");
    }
  }
  if (_close_all.load(std::memory_order_acquire) && !_closing_all) {
    _closing_all = true;
    _quiesced = true;
    // Downstream calls still in flight fail now; their frames resume on later turns.
    if (_downstreams) _downstreams->close_all();
    for (connection* c = _live; c != nullptr;) {
      connection* next = c->live_next;  // start_close may unlink c
      // Shutting the socket down ends its receive and fails any write of the responder, so
      // every reference held on the connection drains without waiting for the peer.
      say_close_notify(c);
      ::shutdown(c->fd, SHUT_RDWR);
      start_close(c);
      c = next;
    }
  }
}

void shard::handle(const io_uring_cqe& cqe) {
  switch (tag_op(cqe.user_data)) {
    case op::wake: _waker.arm(*_ring); break;
    case shard_ops::handoff: on_handoff(cqe.res); break;
    case op::recv: on_recv(tag_ptr<connection>(cqe.user_data), cqe); break;
    case shard_ops::handoff_tls: on_handoff(cqe.res, true); break;
    case shard_ops::recv_tls: on_recv_tls(tag_ptr<connection>(cqe.user_data), cqe); break;
    case op::send: _responder.on_write(tag_ptr<connection>(cqe.user_data), cqe.res); break;
    case op::timeout: _sweep_due = true; break;  // acted on after this turn's receives
    case shard_ops::downstream_connect:
    case shard_ops::downstream_recv:
    case shard_ops::downstream_send: _downstreams->handle(cqe); break;
    case shard_ops::futex_wake:
      // The probe saw this SQE work, so a failure is unexpected: wake the old way from now on
      // (all of the pool's sleepers: how many this one was for is not known here).
      _ring_futex = false;
      tag_ptr<thread_pool>(cqe.user_data)->wake(UINT32_MAX);
      break;
    default: break;  // cancel results: -ENOENT / -EALREADY mean the recv had already ended
  }
}

shard_downstreams& shard::downstreams() {
  if (!_downstreams) {
    _downstreams = std::make_unique<shard_downstreams>(*this, *_ring, *_buffers, _waker, _downstream_calls,
                                                       _counts);
  }
  return *_downstreams;
}

void shard::snapshot_connections(std::vector<connection_info>& out) const {
  std::lock_guard lock(_live_mu);
  for (const connection* c = _live; c != nullptr; c = c->live_next) {
    connection_info i;
    i.id = c->id;
    i.peer = c->peer();
    i.accepted_ns = c->accepted_ns;
    i.calls_in_flight = c->outstanding.load(std::memory_order_relaxed);
    i.queued_reply_bytes = c->queued_bytes.load(std::memory_order_relaxed);
    i.paused = c->paused.load(std::memory_order_relaxed);
    i.reader = _index;
    out.push_back(std::move(i));
  }
}

void shard::note_submitted(thread_pool* p) noexcept {
  for (auto& [pool, n] : _to_wake) {
    if (pool == p) {
      ++n;
      return;
    }
  }
  try {
    _to_wake.emplace_back(p, 1);
  } catch (const std::bad_alloc&) {
    p->wake(1);  // no memory to note it for later: wake now
  }
}

void shard::wake_pool(thread_pool* p, unsigned n) noexcept {
  if (!_ring_futex) {
    p->wake(n);
    return;
  }
  // The wake rides the enter that also sends this turn's replies and puts the reader to sleep:
  // one system call less per turn that hands work to a parked worker.
  std::uint32_t* word = p->claim_wake();
  if (word == nullptr) return;  // nobody parked: the workers find the work themselves
  io_uring_sqe* sqe = _ring->get_sqe();
  prep_futex_wake(sqe, word, n);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(sqe, make_tag(shard_ops::futex_wake, p));
}

void shard::refresh_table() noexcept {
  auto& d = _core.endpoints();
  const auto v = d.version();
  if (_table && v == _table_version) return;
  _table = d.current();
  _table_version = v;
  _last_slot = nullptr;  // it may be gone from the new table
  _kind_slot = nullptr;
}

void shard::end_of_turn() noexcept {
  _buffers->commit();
  for (connection* c : _rearm) {
    if (c->reading == read_state::open && c->receive == recv_state::idle && !_quiesced && !c->budget_paused &&
        (!c->paused.load(std::memory_order_relaxed) || reads_while_paused(c))) {
      arm_recv(c);
    }
    release(c);
  }
  _rearm.clear();
  for (connection* c : _to_release) release(c);
  _to_release.clear();
  if (_downstreams) _downstreams->flush();
  // The writes of everything answered this turn go out with this turn's submit.
  _responder.flush();
  // Then the workers given calls: through the ring, the wake comes after those writes in the
  // same submit.
  for (auto& [pool, n] : _to_wake) wake_pool(pool, n);
  _to_wake.clear();
}

void shard::resume_later(connection* c) noexcept {
  retain(c);  // dropped by on_resume()
  c->resume_next = _resumes;  // at most once: only the one who cleared `paused` calls this
  _resumes = c;
}

void shard::run_resumes() noexcept {
  // Resuming delivers held frames, whose answers may resume others: those join the list and
  // are taken in this loop too.
  while (connection* c = _resumes) {
    _resumes = c->resume_next;
    c->resume_next = nullptr;
    on_resume(c);
  }
}

}  // namespace ringrpc::detail

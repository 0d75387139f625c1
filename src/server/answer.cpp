// The way back, part one: every answer a call gets goes through here — a handler's reply or
// error, a deferred reply, a refusal by a pool or an endpoint, the shard's own answers to
// frames it will not run, the stopping server's answers. Each is encoded into the call on the
// answering thread and handed to the call's shard by finish(): at once when this is the shard's
// thread, else through the responder's inbox with one wake-up per shard per burst (answer.hpp
// names the two files that take it from there).

#include "server/answer.hpp"

#include <sys/socket.h>

#include <mutex>
#include <new>
#include <utility>

#include "server/deferred_state.hpp"
#include "server/interceptors.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {

// The server whose pool worker this thread is while its replies' wake-ups are batched.
thread_local constinit const server_core* batching_replies = nullptr;

// Shards this pool worker posted replies to since its last burst hook. A burst of replies to
// one shard costs one wake-up (and none while that shard is awake anyway).
struct reply_wakeups {
  static constexpr std::size_t max = 16;
  shard* shards[max];
  std::size_t n = 0;
};
thread_local constinit reply_wakeups pending_wakeups{};

void note_reply_wakeup(shard& r) noexcept {
  reply_wakeups& w = pending_wakeups;
  for (std::size_t i = 0; i < w.n; ++i) {
    if (w.shards[i] == &r) return;
  }
  if (w.n == reply_wakeups::max) {
    r.notify_replies();  // more shards than we keep: this one is woken now
    return;
  }
  w.shards[w.n++] = &r;
}

// Whether this thread is a pool worker with more calls waiting for it.
bool more_work_here() noexcept {
  const thread_pool* p = thread_pool::current();
  return p != nullptr && p->has_queued_work();
}

}  // namespace

void batch_reply_wakeups(const server_core* core) noexcept {
  if (batching_replies == core || !thread_pool::on_worker_thread()) return;
  flush_reply_wakeups();  // another server's, should there be one
  batching_replies = core;
}

void flush_reply_wakeups() noexcept {
  reply_wakeups& w = pending_wakeups;
  for (std::size_t i = 0; i < w.n; ++i) w.shards[i]->notify_replies();
  w.n = 0;
  batching_replies = nullptr;
}

void server_core::wake_for_reply(shard& r) const noexcept {
  if (batching_replies == this) {
    note_reply_wakeup(r);  // the pool's burst hook wakes each shard once
  } else {
    r.notify_replies();
  }
}

void server_core::finish(call* c) noexcept {
  if (c->conn == nullptr) {  // a local post: nobody to answer
    _pool->put(c);
    return;
  }
  if (c->purpose != call_purpose::request) c->reply.clear();
  shard& r = *c->conn->owner;
  if (r.on_its_thread()) {
    r.replies().enqueue_local(c);  // a direct endpoint, or the shard refusing: no hand-off
    return;
  }
  // While the shard sleeps, handing the reply over would cost a wake-up; writing it here costs
  // one send (responder_inline.cpp). While it is awake, or while this worker has more calls to
  // run (their replies share the burst's one wake-up), the shard gathers replies into fewer
  // writes.
  if (_inline_replies && r.asleep() && !more_work_here() && write_inline(r, c)) return;
  r.replies().post(c);
  wake_for_reply(r);
}

bool server_core::write_inline(shard& r, call* k) noexcept {
  connection* c = k->conn;
  // Plain ringrpc frames only: a TLS or gRPC connection's replies go through its session,
  // which the shard's thread owns. Its protocol was settled before any call of it existed.
  if (k->reply.empty() || k->stream_out || k->stream_end || c->tls || c->protocol != wire_protocol::frames ||
      c->write_failed.load(std::memory_order_relaxed)) {
    return false;
  }
  std::uint32_t nothing_queued = 0;
  if (!c->reply_gate.compare_exchange_strong(nothing_queued, inline_writer_bit, std::memory_order_seq_cst)) {
    return false;  // replies wait in the responder's hands: this one goes after them
  }
  const std::size_t size = k->reply.size();
  const ssize_t n = ::send(c->fd, k->reply.data(), size, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(size)) {
    k->written_by_handler = call::inline_write::whole;
    const std::uint32_t before = c->reply_gate.fetch_and(~inline_writer_bit, std::memory_order_seq_cst);
    // The bookkeeping waits for the shard's next turn, unless a reply handed over meanwhile
    // waits for our write to end, or the connection waits for this call's release to read on.
    // (Asked before the post: once posted, the call and its connection may be gone.)
    const bool wake = before != inline_writer_bit || c->paused.load(std::memory_order_seq_cst);
    r.replies().post_written(k);
    // Not held for this worker's burst hook: replies wait behind our write, or reading does.
    if (wake) r.notify_replies();
    return true;
  }
  // Part of it, none (a full socket buffer), or an error the responder's own write will meet:
  // the rest is the responder's, ahead of anything queued meanwhile.
  k->written_by_handler = call::inline_write::partial;
  k->inline_sent = n > 0 ? static_cast<std::uint32_t>(n) : 0;
  r.replies().post_written(k);
  r.notify_replies();
  return true;
}

void server_core::post_answer(call* c) noexcept {
  shard& r = *c->conn->owner;
  r.replies().post(c);
  wake_for_reply(r);
}

void server_core::answer(call* c, wire::Kind kind, status code, std::string_view message,
                         std::uint32_t retry_after_ms) noexcept {
  if (c->purpose == call_purpose::request && kind != wire::Kind::OneWay) {
    try {
      encode_answer(*c, kind, code, message, retry_after_ms);
    } catch (const std::bad_alloc&) {
      // No memory for even an error frame: the peer learns by its connection closing.
      c->reply.clear();
      note_out_of_memory();
      if (c->conn != nullptr) ::shutdown(c->conn->fd, SHUT_RDWR);
    }
  } else {
    c->reply.clear();  // one-way traffic is never answered; the call only needs releasing
  }
  finish(c);
}

void server_core::refuse(work_item* item, status code, const std::string& message) noexcept {
  call* c = call::from_item(item);
  if (code == status::server_busy) _refused_busy.add();
  if (c->from_client()) _settled.add();
  answer(c, wire::Kind::Error, code, message);
}

std::shared_ptr<deferred_state> server_core::defer(call* c) {
  auto s = std::make_shared<deferred_state>();
  s->c = c;
  s->core = this;
  std::lock_guard lock(_deferred_mu);
  s->listed = true;
  _deferred.insert(s.get());
  return s;
}

void server_core::settle_deferred(deferred_state& s, call* c) noexcept {
  if (c->intercepted_count != 0) [[unlikely]] deferred_complete(_options.interceptors, *c);
  if (_options.metrics && c->from_client()) {
    // A deferred reply's time is from receipt to answer: there is no separate queue time.
    thread_metrics& m = _metrics.local();
    m.completed(c->method_name, c->answer_status);
    m.timed(c->method_name, 0, now_ns() - c->received_ns);
  }
  {
    std::lock_guard lock(_deferred_mu);
    if (s.listed) {
      s.listed = false;
      _deferred.erase(&s);
    }
  }
}

bool answer_deferred(std::shared_ptr<deferred_state> state, status code, std::string_view message,
                     std::span<const std::byte> payload, std::span<const std::byte> details) {
  if (!state) return false;
  std::unique_lock lock(state->mu);
  call* c = std::exchange(state->c, nullptr);
  if (c == nullptr) return false;  // answered already, by the handler or the stopping server
  // c is this thread's alone now. Its hooks end before the answer, outside the lock: one
  // running on another thread at this moment may itself be answering through this state.
  lock.unlock();
  state->core->close_hub(*c);
  bool encoded = true;
  if (c->purpose == call_purpose::request) {
    try {
      if (code == status::ok) {
        encode_reply(*c, payload);
      } else {
        encode_error(*c, code, message, details);
      }
    } catch (const std::bad_alloc&) {
      encoded = false;
    }
  }
  server_core& core = *state->core;
  core.settle_deferred(*state, c);
  if (encoded) {
    core.finish(c);
  } else {
    core.answer(c, wire::Kind::Error, status::internal, "server out of memory encoding the deferred reply");
  }
  return true;
}

}  // namespace ringrpc::detail

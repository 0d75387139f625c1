// A client stream's handle (ringrpc/client_stream.hpp) and client::open_stream (through
// client_access::open_stream, which a channel's open_stream calls too): the user threads' side.
// Frames are encoded here, under the stream's lock while it is open, and posted to the client
// loop (client_streams.cpp), which sends them while the stream is still open.
#include "ringrpc/client_stream.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "client/call_deadline.hpp"
#include "client/client_access.hpp"
#include "client/client_interceptors.hpp"
#include "client/client_loop.hpp"
#include "client/client_stream_ops.hpp"
#include "client/client_stream_state.hpp"
#include "client/request_encoder.hpp"

namespace ringrpc {

namespace {

using detail::client_stream_state;
using lock_type = std::unique_lock<std::mutex>;

// Waits beyond this are waits without a limit (a time point this far ahead could overflow).
constexpr std::chrono::nanoseconds no_limit{std::int64_t{1'000'000'000} * 1'000'000 * 1'000};

void refuse_on_runtime_thread(const char* what) {
  if (detail::client_loop::on_any_loop_thread()) {
    throw std::logic_error(std::string("ringrpc::client_stream::") + what +
                           ": called on a client runtime's thread, where the stream's frames are "
                           "received: it would wait forever");
  }
}

// Waits on the stream's condition until `ready` holds or `timeout` has passed; whether it holds.
template <class Pred>
bool wait(client_stream_state& s, lock_type& lock, std::chrono::nanoseconds timeout, Pred ready) {
  if (timeout >= no_limit) {
    s.cv.wait(lock, ready);
    return true;
  }
  return s.cv.wait_for(lock, timeout, ready);
}

// Hands `p` to the loop. Call with s.mu held and the stream not ended: that keeps its
// connection alive until the loop has taken it (client_stream_state.hpp).
void post_locked(client_stream_state& s, detail::pending* p) noexcept {
  s.conn->posted_by_callers.fetch_add(1, std::memory_order_relaxed);
  s.loop->post_from_stream(p);
}

// Encodes frame `f` of the stream into a fresh pending, not posted yet. Throws std::bad_alloc.
detail::pending* encode(client_stream_state& s, detail::frame_view& f) {
  detail::pending* p = s.loop->get_pending();
  p->kind = detail::pending::what::stream_frame;
  p->conn = s.conn;
  p->id = s.id;
  f.call_id = s.id;
  try {
    // TODO(perf): encoding a large message holds the lock the loop takes for each arrival.
    detail::encode_request(f, p->frame);
  } catch (...) {
    s.loop->recycle(p);
    throw;
  }
  return p;
}

// Ends the stream here with `o` and tells the loop (which sends Cancel) with the notice
// allocated at the open; s.mu held. False when it had ended.
bool end_here_locked(client_stream_state& s, const call_outcome& o) noexcept {
  if (!s.end_with(o)) return false;
  if (detail::pending* notice = std::exchange(s.end_notice, nullptr)) post_locked(s, notice);
  return true;
}

}  // namespace

namespace detail {

// Writes `m` if the stream is open, writable and has credit, and the connection has room for
// its bytes; s.mu held. The bytes count in max_pending_bytes, as a call's request does, until
// they have left: the server's credit alone would let it make the client buffer without end.
write_result write_locked(client_stream_state& s, std::span<const std::byte> m) {
  if (s.ended || s.half_closed || s.kind == stream_kind::server) return write_result::closed;
  if (!s.send.can_send()) return write_result::would_block;
  // A full budget answers before the encoding: write_wait asks again every millisecond, under
  // the lock the loop takes for each arrival. admit_bytes() below is the check that counts.
  if (s.conn->pending_bytes.load(std::memory_order_relaxed) >= s.conn->max_pending_bytes) return write_result::would_block;
  detail::frame_view f;
  f.kind = wire::Kind::StreamMessage;
  f.payload = m;
  detail::pending* p = encode(s, f);
  if (!s.conn->admit_bytes(p->frame.size())) {
    s.loop->recycle(p);
    return write_result::would_block;
  }
  p->counted = true;
  post_locked(s, p);
  s.send.spend(m.size());
  return write_result::ok;
}

// Gives back the credit of a message of `bytes` the reader took; s.mu held. Without memory for
// the grant the stream ends here (the server would wait for credit that never comes).
void consumed_locked(client_stream_state& s, std::size_t bytes) {
  const detail::receive_credit::grant g = s.receive.consumed(bytes);
  if (!g || s.ended) return;
  detail::frame_view f;
  f.kind = wire::Kind::StreamCredit;
  f.credit_messages = g.messages;
  f.credit_bytes = g.bytes;
  try {
    post_locked(s, encode(s, f));
  } catch (const std::bad_alloc&) {
    end_here_locked(s, detail::local_end(call_error::protocol_error, status::resource_exhausted,
                                         "client out of memory for a credit grant"));
  }
}

// cancel(): ends the stream here with `o`, dropping what was not read; false when it had ended.
bool cancel_with(client_stream_state& s, const call_outcome& o) noexcept {
  const detail::stream_lock lock(s);
  if (!end_here_locked(s, o)) return false;
  s.inbox.clear();
  s.buffered = 0;
  return true;
}

}  // namespace detail

namespace {

// A handle whose stream ended before it could open.
client_stream ended_stream(stream_kind kind, call_error e, status code, std::string_view why) {
  auto s = std::make_shared<client_stream_state>(kind, 0, 0);
  s->end_with(detail::local_end(e, code, why));
  return client_stream(std::move(s));
}

}  // namespace

detail::coro_waiter* detail::client_stream_state::take_writer_locked() noexcept {
  if (writer == nullptr) return nullptr;
  if (std::exchange(writer_needs_room, false)) conn->room_waiters.fetch_sub(1, std::memory_order_seq_cst);
  return std::exchange(writer, nullptr);
}

client_stream::client_stream(std::shared_ptr<detail::client_stream_state> state) noexcept
    : _state(std::move(state)) {}

client_stream& client_stream::operator=(client_stream&& other) noexcept {
  if (this != &other) {
    if (_state) cancel();
    _state = std::move(other._state);
  }
  return *this;
}

client_stream::~client_stream() {
  if (_state) {
    cancel_with(*_state, detail::local_end(call_error::cancelled, status::cancelled,
                                           "cancelled: the stream's handle was destroyed"));
  }
}

write_result client_stream::write(std::span<const std::byte> message) {
  if (!_state) return write_result::closed;
  const std::lock_guard lock(_state->mu);
  return write_locked(*_state, message);
}

write_result client_stream::write_wait(std::span<const std::byte> message, std::chrono::nanoseconds timeout) {
  if (!_state) return write_result::closed;
  refuse_on_runtime_thread("write_wait");
  client_stream_state& s = *_state;
  const auto until = std::chrono::steady_clock::now() + std::min(timeout, no_limit);
  lock_type lock(s.mu);
  for (;;) {
    const auto left = timeout >= no_limit ? no_limit : until - std::chrono::steady_clock::now();
    wait(s, lock, std::max(left, std::chrono::nanoseconds(0)),
         [&] { return s.ended || s.half_closed || s.send.can_send(); });
    const write_result r = write_locked(s, message);
    if (r != write_result::would_block || until <= std::chrono::steady_clock::now()) return r;
    if (s.send.can_send()) {
      // Credit is there, room in max_pending_bytes is not: the loop frees it as frames leave
      // without waking anyone (a wake per frame sent would cost every stream), so look again
      // shortly.
      s.cv.wait_for(lock, std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(1)));
    }
  }
}

std::optional<std::vector<std::byte>> client_stream::read(std::chrono::nanoseconds timeout) {
  if (!_state) return std::nullopt;
  refuse_on_runtime_thread("read");
  client_stream_state& s = *_state;
  detail::stream_lock locked(s);  // the credit it gives back may end the stream (out of memory)
  lock_type& lock = locked.lock;
  if (!wait(s, lock, timeout, [&] { return !s.inbox.empty() || s.ended; }) || s.inbox.empty()) return std::nullopt;
  std::vector<std::byte> m = std::move(s.inbox.front());
  s.inbox.pop_front();
  s.buffered -= m.size();
  consumed_locked(s, m.size());
  return m;
}

bool client_stream::half_close() {
  if (!_state) return false;
  client_stream_state& s = *_state;
  const detail::stream_lock lock(s);
  if (s.ended || s.half_closed || s.kind == stream_kind::server) return false;
  detail::frame_view f;
  f.kind = wire::Kind::StreamHalfClose;
  post_locked(s, encode(s, f));
  s.half_closed = true;
  s.cv.notify_all();  // a writer waiting for credit goes on: nothing more may be written
  s.wake_writer_locked();
  return true;
}

bool client_stream::cancel() {
  if (!_state) return false;
  return cancel_with(*_state, detail::local_end(call_error::cancelled, status::cancelled, "cancelled by the caller"));
}

call_result client_stream::finish(std::chrono::nanoseconds timeout) {
  if (!_state) {
    call_result r;
    r.error = call_error::client_closed;
    r.code = status::cancelled;
    r.message = "the handle names no stream";
    return r;
  }
  refuse_on_runtime_thread("finish");
  client_stream_state& s = *_state;
  const auto until = std::chrono::steady_clock::now() + std::min(timeout, no_limit);
  detail::stream_lock locked(s);
  lock_type& lock = locked.lock;
  for (;;) {
    // Unread messages are discarded, their credit given back, so the server can reach its end.
    while (!s.inbox.empty()) {
      const std::size_t bytes = s.inbox.front().size();
      s.inbox.pop_front();
      s.buffered -= bytes;
      consumed_locked(s, bytes);
    }
    if (s.ended) return s.end;
    const auto left = timeout >= no_limit ? no_limit : until - std::chrono::steady_clock::now();
    if (left.count() <= 0) break;
    wait(s, lock, left, [&] { return !s.inbox.empty() || s.ended; });
  }
  lock.unlock();
  cancel_with(s, detail::local_end(call_error::timeout, status::deadline_exceeded,
                                   "finish() timed out before the stream's end; cancelled"));
  lock.lock();
  return s.end;
}

bool client_stream::ended() const noexcept {
  if (!_state) return true;
  const std::lock_guard lock(_state->mu);
  return _state->ended;
}

std::uint64_t client_stream::id() const noexcept { return _state ? _state->id : 0; }

stream_kind client_stream::kind() const noexcept { return _state ? _state->kind : stream_kind::bidi; }

std::vector<metadata_entry> client_stream::headers() const {
  if (!_state) return {};
  const std::lock_guard lock(_state->mu);
  return _state->ended ? _state->end.headers : _state->headers;
}

std::size_t client_stream::buffered_bytes() const noexcept {
  if (!_state) return 0;
  const std::lock_guard lock(_state->mu);
  return _state->buffered;
}

// --- client::open_stream

client_stream client::open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request) {
  static const stream_options defaults;
  return open_stream(method, kind, request, defaults);
}

client_stream client::open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                                  const stream_options& options) {
  call_error refused = call_error::none;
  return detail::client_access::open_stream(*this, method, kind, request, options, nullptr, refused);
}

client_stream detail::client_access::ended_stream(stream_kind kind, call_error e, status code, std::string_view why) {
  return ringrpc::ended_stream(kind, e, code, why);
}

client_stream detail::client_access::open_stream(client& c, std::string_view method, stream_kind kind,
                                                 std::span<const std::byte> request, const stream_options& options,
                                                 std::shared_ptr<void> hold, call_error& refused) {
  detail::client_conn* const conn = c._conn;
  const auto refuse = [&](call_error e, status code, std::string_view why) {
    refused = e;
    return ringrpc::ended_stream(kind, e, code, why);
  };
  if (conn == nullptr) return refuse(call_error::client_closed, status::cancelled, "client is closed");
  const detail::call_deadline d = detail::call_deadline::of(options.timeout, conn->default_timeout, nullptr);
  if (d.expired) {
    return refuse(call_error::timeout, status::deadline_exceeded, "deadline passed before the stream was opened; not sent");
  }
  // The interceptors see the open as they see a call (client_interceptors.hpp): they may add
  // to its metadata, or refuse it; those that saw it see its end once (the loop's end_stream).
  std::shared_ptr<detail::client_chain_run> run;
  std::vector<metadata_entry> intercepted_metadata;
  std::span<const metadata_entry> open_metadata = options.metadata;
  if (conn->interceptors) [[unlikely]] {
    run = std::make_shared<detail::client_chain_run>();
    run->chain = conn->interceptors;
    intercepted_metadata = options.metadata;
    const auto budget = options.timeout.count() > 0 ? options.timeout : conn->default_timeout;
    run->before(method, kind == stream_kind::server ? request : std::span<const std::byte>{}, intercepted_metadata,
                budget, false);
    if (run->refused) {
      run->after_then(run->refusal(), 0, nullptr);
      return refuse(call_error::intercepted, run->code, run->message);
    }
    open_metadata = intercepted_metadata;
  }
  // The window announced is the one enforced: both within the wire's maxima (stream_credit.hpp).
  const auto window_messages = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(options.window_messages, detail::max_stream_credit_messages));
  const auto window_bytes = std::min<std::uint64_t>(options.window_bytes,
                                                    static_cast<std::uint64_t>(detail::max_stream_credit_bytes));
  auto state = std::make_shared<client_stream_state>(kind, window_messages, window_bytes);
  detail::client_loop& loop = *c._runtime->_loop;
  detail::pending* p = loop.get_pending();
  p->kind = detail::pending::what::stream_open;
  p->conn = conn;
  p->id = conn->next_id.fetch_add(1, std::memory_order_relaxed);
  detail::frame_view f;
  f.call_id = p->id;
  f.kind = wire::Kind::StreamOpen;
  f.method = method;
  f.timeout_us = d.wire_timeout_us();
  if (kind == stream_kind::server) f.payload = request;
  f.stream_kind = static_cast<std::uint8_t>(kind);
  f.credit_messages = state->receive.window_messages();
  f.credit_bytes = state->receive.window_bytes();
  const detail::metadata_to_send md{conn->metadata, open_metadata};
  if (!md.defaults.empty() || !md.pairs.empty()) f.metadata_out = &md;
  try {
    detail::encode_request(f, p->frame);
  } catch (...) {
    loop.recycle(p);
    throw;
  }
  detail::pending* notice = nullptr;
  try {
    notice = loop.get_pending();
  } catch (...) {
    loop.recycle(p);
    throw;
  }
  notice->kind = detail::pending::what::stream_cancel;
  notice->conn = conn;
  notice->id = p->id;
  if (!conn->admit(p->frame.size())) {
    loop.recycle(p);
    loop.recycle(notice);
    constexpr std::string_view busy =
        "client_busy: the connection's max_pending_calls or max_pending_bytes (client_options) is reached; a "
        "stream holds one call until its end";
    if (run) run->after_then(detail::local_end(call_error::client_busy, status::resource_exhausted, busy), 0, nullptr);
    return refuse(call_error::client_busy, status::resource_exhausted, busy);
  }
  state->id = p->id;
  state->loop = &loop;
  state->conn = conn;
  state->admitted_bytes = p->frame.size();
  state->deadline_ns = d.at_ns;
  state->end_notice = notice;
  state->opener_hold = std::move(hold);
  state->intercepted = std::move(run);
  state->loop_ref = state;  // the loop's reference, dropped at the stream's end (end_stream)
  p->stream = state.get();
  loop.post(p);
  return client_stream(std::move(state));
}

}  // namespace ringrpc

// The coroutine forms of a client stream's operations (ringrpc/stream_coro.hpp): the blocking
// handle's read, write and finish (client_stream.cpp), with a coroutine parked on the stream's
// state (reader, writer) where a thread would wait on its condition variable. Whoever notifies
// the condition takes the parked coroutine out and wakes it after unlocking (stream_lock).
#include "ringrpc/stream_coro.hpp"

#include <atomic>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <utility>

#include "base/coro_waiter.hpp"
#include "client/client_access.hpp"
#include "client/client_loop.hpp"
#include "client/client_stream_ops.hpp"
#include "client/client_stream_state.hpp"

namespace ringrpc {

// Named types only, none in an anonymous namespace or a lambda: the frames of these coroutines
// hold them, and the functions have external linkage (GCC's -Wsubobject-linkage).
namespace detail {

// In a coroutine handler's frame, the frame's cancellation (the server's stop(), past its drain
// timeout) cancels the stream an operation waits on: the end wakes it, and stop() never waits
// on a frame parked on a stream.
struct client_stream_canceller {
  client_stream_state* s;
  void operator()() const noexcept {
    cancel_with(*s, local_end(call_error::cancelled, status::cancelled,
                              "cancelled: the coroutine handler's frame was cancelled"));
  }
};
using client_stream_frame_guard = std::optional<std::stop_callback<client_stream_canceller>>;

void guard_with_frame(client_stream_frame_guard& guard, coro_abi::frame_context* ctx, client_stream_state& s) {
  if (ctx != nullptr) guard.emplace(coro_abi::frame_cancel(ctx, std::stop_token{}), client_stream_canceller{&s});
}

void park_reader_locked(client_stream_state& s, coro_waiter& w) {
  if (s.reader != nullptr) {
    throw std::logic_error("ringrpc::co_read/co_finish: another coroutine is already waiting to read this stream");
  }
  s.reader = &w;
}

// Parks `w` as the writer after a write said would_block; s.mu held. Waiting for credit, a grant
// or the end wakes it; waiting for room in max_pending_bytes, the loop does as bytes leave.
void park_writer_locked(client_stream_state& s, coro_waiter& w) {
  if (s.writer != nullptr) {
    throw std::logic_error("ringrpc::co_write: another coroutine is already waiting to write this stream");
  }
  s.writer = &w;
  if (!s.send.can_send()) return;
  s.writer_needs_room = true;
  // Counted before looking again (seq_cst, as the loop's give-back in uncount()): either this
  // look sees the room a give-back made, or that give-back sees the count and wakes us.
  s.conn->room_waiters.fetch_add(1, std::memory_order_seq_cst);
  if (s.conn->pending_bytes.load(std::memory_order_seq_cst) < s.conn->max_pending_bytes) {
    s.wake_writer_locked();  // room came back meanwhile: go on at once
  }
}

// One try of co_read: the next message, or the end; else the reader parks.
struct client_read_try {
  client_stream_state* s;
  std::optional<std::vector<std::byte>>* m;
  bool* done;
  bool operator()(coro_waiter& w) const {
    const stream_lock lock(*s);
    if (!s->inbox.empty()) {
      m->emplace(std::move(s->inbox.front()));
      s->inbox.pop_front();
      s->buffered -= (*m)->size();
      consumed_locked(*s, (*m)->size());
      *done = true;
      return false;
    }
    if (s->ended) {
      *done = true;
      return false;
    }
    park_reader_locked(*s, w);
    return true;
  }
};

// One try of co_write: written, or closed; else the writer parks.
struct client_write_try {
  client_stream_state* s;
  std::span<const std::byte> message;
  write_result* r;
  bool operator()(coro_waiter& w) const {
    const stream_lock lock(*s);
    *r = write_locked(*s, message);
    if (*r != write_result::would_block) return false;
    park_writer_locked(*s, w);
    return true;
  }
};

// One try of co_finish: the unread messages discarded (their credit given back, so the server
// can reach its end), then the end; else the reader parks.
struct client_finish_try {
  client_stream_state* s;
  std::optional<call_result>* end;
  bool operator()(coro_waiter& w) const {
    const stream_lock lock(*s);
    while (!s->inbox.empty()) {
      const std::size_t bytes = s->inbox.front().size();
      s->inbox.pop_front();
      s->buffered -= bytes;
      consumed_locked(*s, bytes);
    }
    if (s->ended) {
      end->emplace(s->end);
      return false;
    }
    park_reader_locked(*s, w);
    return true;
  }
};

}  // namespace detail

task<std::optional<std::vector<std::byte>>> co_read(client_stream& stream) {
  detail::client_stream_state* const s = detail::client_access::state_of(stream);
  if (s == nullptr) co_return std::nullopt;
  detail::client_stream_frame_guard guard;
  detail::guard_with_frame(guard, co_await detail::current_context{}, *s);
  for (;;) {
    std::optional<std::vector<std::byte>> m;
    bool done = false;
    co_await detail::park_awaitable(detail::client_read_try{s, &m, &done});
    if (done) co_return m;
  }
}

task<write_result> co_write(client_stream& stream, std::span<const std::byte> message) {
  detail::client_stream_state* const s = detail::client_access::state_of(stream);
  if (s == nullptr) co_return write_result::closed;
  detail::client_stream_frame_guard guard;
  detail::guard_with_frame(guard, co_await detail::current_context{}, *s);
  for (;;) {
    write_result r = write_result::would_block;
    co_await detail::park_awaitable(detail::client_write_try{s, message, &r});
    if (r != write_result::would_block) co_return r;
  }
}

task<call_result> co_finish(client_stream& stream) {
  detail::client_stream_state* const s = detail::client_access::state_of(stream);
  if (s == nullptr) {
    call_result r;
    r.error = call_error::client_closed;
    r.code = status::cancelled;
    r.message = "the handle names no stream";
    co_return r;
  }
  detail::client_stream_frame_guard guard;
  detail::guard_with_frame(guard, co_await detail::current_context{}, *s);
  for (;;) {
    std::optional<call_result> end;
    co_await detail::park_awaitable(detail::client_finish_try{s, &end});
    if (end) co_return std::move(*end);
  }
}

}  // namespace ringrpc

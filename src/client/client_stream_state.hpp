#pragma once
// One client stream (ringrpc/client_stream.hpp): what its handle, on user threads, and the client
// loop, on its own thread, share. The loop holds it (loop_ref) while the stream is in its
// connection's table; the handle holds it for its own life.
//
// The connection may be freed once the loop has ended every stream on it (fail_connection ends
// them all before a detached connection can go), and only the loop ends streams that way, under
// `mu`. So a user thread that finds `ended` false under `mu` may still post to the loop for this
// connection: it counts the message in posted_by_callers, under `mu`, and the connection is not
// freed before the loop has taken it.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "base/coro_waiter.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/stream.hpp"
#include "wire/stream_credit.hpp"

namespace ringrpc::detail {

class client_loop;
struct client_chain_run;
struct client_conn;
struct pending;

struct client_stream_state {
  client_stream_state(stream_kind k, std::uint32_t window_messages, std::uint64_t window_bytes) noexcept
      : kind(k), receive(window_messages, window_bytes) {}

  // --- Set by open_stream before the open is posted; read-only after.
  std::uint64_t id = 0;  // the key of client_conn::streams
  const stream_kind kind;
  client_loop* loop = nullptr;
  client_conn* conn = nullptr;
  std::size_t admitted_bytes = 0;  // the open's share of conn->pending_bytes, given back at the end
  std::int64_t deadline_ns = 0;    // steady clock; 0 = none
  // What the stream's opener keeps alive and counted while the stream is open: a channel's
  // member connection and its outstanding count (channel_streams.cpp); null for a client's own
  // streams. The loop's alone once the open is posted: end_stream releases it.
  std::shared_ptr<void> opener_hold;
  // The client's interceptors that saw the open (client_interceptors.hpp): their after_call
  // runs once, at the loop's end_stream. Null when the client has none.
  std::shared_ptr<client_chain_run> intercepted;

  // --- The loop thread's alone.
  std::shared_ptr<client_stream_state> loop_ref;  // while in the connection's table
  bool heard = false;  // a frame of the server came for it (an old server's refusal comes first)

  // --- Under mu. The loop notifies cv on every arrival, grant and end; readers and writers wait on
  // it, and coroutines park on `reader` and `writer` (client_stream_coro.cpp), woken with it.
  mutable std::mutex mu;
  std::condition_variable cv;
  send_credit send{default_stream_window_messages, default_stream_window_bytes};  // the server's grants
  receive_credit receive;  // the window announced at the open, and the grants owed as we read
  std::deque<std::vector<std::byte>> inbox;  // received, not read yet
  std::size_t buffered = 0;                  // payload bytes in inbox
  std::vector<metadata_entry> headers;       // from the server's first frame
  bool half_closed = false;
  bool ended = false;
  call_result end;  // once ended
  // The loop's notice of an end of the handle's making (cancel, or a credit grant it could not
  // make), allocated at the open so that it reaches the loop, and the server its Cancel, with no
  // memory left; taken by whichever side ends the stream first (the loop recycles it unused).
  pending* end_notice = nullptr;
  // A coroutine reading (co_read, co_finish) and one writing (co_write), parked: taken out
  // (wake_*_locked) where cv is notified, and woken by the stream_lock after it unlocks.
  coro_waiter* reader = nullptr;
  coro_waiter* writer = nullptr;
  // The writer waits for room in the connection's max_pending_bytes, not for credit: it is
  // counted in conn->room_waiters, which the loop looks at as bytes leave (client_loop::uncount).
  bool writer_needs_room = false;
  coro_waiter* woken = nullptr;  // taken out, to be woken after the unlock

  /// Moves the parked reader to `woken`; call with mu held.
  void wake_reader_locked() noexcept {
    if (reader == nullptr) return;
    reader->next = woken;
    woken = std::exchange(reader, nullptr);
  }
  /// Moves the parked writer to `woken`, uncounting a wait for room; call with mu held (the
  /// connection is alive while the stream has not ended, and ends wake before they count).
  void wake_writer_locked() noexcept {
    if (coro_waiter* w = take_writer_locked()) {
      w->next = woken;
      woken = w;
    }
  }
  /// The parked writer, taken out (a wait for room uncounted); null when none. mu held: the
  /// connection is alive while the stream has not ended, and ends wake before they count.
  coro_waiter* take_writer_locked() noexcept;  // client_stream.cpp

  /// Sets the end unless there is one already; call with mu held. Never throws: without memory
  /// for the message and metadata, the end keeps its error and code alone.
  bool end_with(const call_outcome& o) noexcept {
    if (ended) return false;
    ended = true;
    try {
      end = call_result::from(o);
      if (end.headers.empty()) end.headers = headers;
    } catch (const std::bad_alloc&) {
      end = call_result{};
      end.error = o.error;
      end.code = o.code;
    }
    cv.notify_all();
    wake_reader_locked();
    wake_writer_locked();
    return true;
  }
};

/// A client_stream_state's lock, which wakes the coroutines taken out under it once it has
/// unlocked: resumed inline (a coroutine with no home), one may take the lock again at once.
/// Every place that may wake one (an arrival, a grant, an end, a half-close) locks with it.
class stream_lock {
 public:
  explicit stream_lock(client_stream_state& s) : lock(s.mu), _s(s) {}
  ~stream_lock() {
    if (!lock.owns_lock()) lock.lock();
    coro_waiter* w = std::exchange(_s.woken, nullptr);
    lock.unlock();
    wake_all(w);
  }
  stream_lock(const stream_lock&) = delete;
  stream_lock& operator=(const stream_lock&) = delete;

  std::unique_lock<std::mutex> lock;  // for the condition variable's waits

 private:
  client_stream_state& _s;
};

/// An outcome of the client's own making (no server frame): error, code and message.
inline call_outcome local_end(call_error e, status code, std::string_view why) noexcept {
  call_outcome o;
  o.error = e;
  o.code = code;
  o.message = why;
  return o;
}

}  // namespace ringrpc::detail

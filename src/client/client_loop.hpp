#pragma once
// The client runtime's I/O thread: one ring serving any number of client connections.

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "wire/frame_assembler.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"
#include "client/inflight_table.hpp"
#include "base/mpmc_queue.hpp"
#include "base/mpsc_queue.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"
#include "uring/ring_waker.hpp"
#include "ringrpc/client.hpp"
#include "base/write_queue.hpp"
#include "client/tls_client_link.hpp"
#include "client/client_stream_state.hpp"
#include "base/cancel_hub.hpp"

namespace ringrpc::detail {

struct client_conn;
class client_loop;
struct pending;

/// Why a call is being cancelled by its caller (pending::cancel_requested).
enum class cancel_reason : std::uint8_t { none = 0, stop_token, parent };

/// Asks `loop` to cancel call `p` for `why` (client_loop::request_cancel).
void request_cancel(client_loop* loop, pending* p, cancel_reason why) noexcept;

/// What a stop_token's callback or a parent's cancellation runs: asks the loop to cancel one
/// call. Runs on any thread, never after the call completed (complete() disarms both first).
/// Two pointers, the reason in the type: a parent's listener is a std::function, which keeps
/// 16 trivially copyable bytes in place, so arming a parent allocates nothing for it.
template <cancel_reason Why>
struct cancel_trigger {
  client_loop* loop;
  pending* call;
  void operator()() const noexcept { request_cancel(loop, call, Why); }
};
static_assert(sizeof(cancel_trigger<cancel_reason::parent>) == 16);

/// A unit of work handed to the loop: a call, a one-way message, a cancel frame the loop
/// sends by itself, a stream's frame, or a connection command. Pooled; owned by the loop from
/// post() until it is recycled.
struct pending {
  /// cancel_call: a caller's cancellation of call `id` (cancel_trigger), posted from any thread.
  /// stream_open: a stream's StreamOpen (`stream` names it); stream_frame: a frame of stream `id`
  /// from its handle (message, half-close, credit), sent only while the stream is open;
  /// stream_cancel: the handle ended stream `id` (client_streams.cpp).
  enum class what : std::uint8_t { call, one_way, cancel, attach, detach, cancel_call, stream_open, stream_frame,
                                   stream_cancel };

  mpsc_node node;  // must stay the first member
  pending* wq_next = nullptr;
  what kind = what::call;
  client_conn* conn = nullptr;
  std::uint64_t id = 0;
  std::int64_t deadline_ns = 0;  // 0 = none
  call_callback done;
  std::vector<std::byte> frame;
  bool written = false;    // the frame left completely (or never will)
  bool finished = false;   // the callback has run
  bool counted = false;    // holds one of its connection's max_pending_calls and its bytes (a
                           // stream's message: its bytes only)
  std::promise<void>* detached = nullptr;  // detach: fulfilled once the connection is closed
  client_stream_state* stream = nullptr;   // stream_open only (set whenever that is the kind)
  // Cancellation by the caller (call_options::cancel / parent); armed only for calls that
  // have either, disarmed by complete() before the callback.
  std::atomic<cancel_reason> cancel_requested{cancel_reason::none};
  std::optional<std::stop_callback<cancel_trigger<cancel_reason::stop_token>>> stop;
  std::shared_ptr<cancel_hub> parent;
  cancel_hub::token parent_token = 0;

  std::span<const std::byte> wq_bytes() const noexcept { return frame; }
  static pending* from_node(mpsc_node* n) noexcept { return reinterpret_cast<pending*>(n); }
};

/// One connection. `open`, `next_id` and the pending counters are shared with calling
/// threads; the rest belongs to the loop thread.
struct client_conn {
  client_conn(int fd_, const client_options& o)
      : fd(fd_),
        default_timeout(o.default_timeout),
        sync_call_timeout(o.sync_call_timeout),
        max_pending_calls(o.max_pending_calls),
        max_pending_bytes(o.max_pending_bytes),
        metadata(o.metadata),
        response_metadata_caps{o.max_response_metadata_entries, o.max_response_metadata_bytes,
                               "the client's max_response_metadata_entries",
                               "the client's max_response_metadata_bytes"},
        max_frame_bytes(o.max_frame_bytes),
        inflight(o.max_pending_calls),
        streams(o.max_pending_calls) {
    assembler.emplace(max_frame_bytes);
    if (!o.interceptors.empty()) interceptors = std::make_shared<const client_interceptors>(o.interceptors);
    if (!o.bearer_token.empty()) {
      metadata.push_back({"authorization", std::string("Bearer ").append(o.bearer_token)});
    }
  }

  const int fd;
  std::atomic<bool> open{true};
  std::atomic<std::uint64_t> next_id{1};
  const std::chrono::microseconds default_timeout;
  const std::chrono::microseconds sync_call_timeout;
  const std::uint32_t max_pending_calls;
  const std::size_t max_pending_bytes;
  /// Sent with every call and one-way message (client_options::metadata and bearer_token);
  /// written before the connection is shared, read-only after.
  std::vector<metadata_entry> metadata;
  /// What an answer's headers and trailers together may hold (client_options).
  const metadata_limits response_metadata_caps;
  /// client_options::interceptors; null when there are none (client_interceptors.hpp).
  std::shared_ptr<const client_interceptors> interceptors;
  // Taken by the calling thread before a call is posted, given back by the loop (uncount()).
  std::atomic<std::uint32_t> pending_calls{0};
  std::atomic<std::size_t> pending_bytes{0};
  /// Messages posted for this connection by callers that do not keep it alive (cancel_call,
  /// a stream handle's frames) and not yet taken by the loop: the connection is not freed
  /// before they are (maybe_free).
  std::atomic<std::uint32_t> posted_by_callers{0};
  /// Coroutines parked in co_write for room in max_pending_bytes (client_stream_coro.cpp): the
  /// loop wakes them as bytes leave (uncount). Paired with pending_bytes by seq_cst, so that a
  /// writer counted after a check that found no room is seen by the next give-back.
  std::atomic<std::uint32_t> room_waiters{0};

  /// Reserves room for one request of `bytes`; false (nothing reserved) when the connection
  /// is at one of its limits.
  bool admit(std::size_t bytes) noexcept {
    if (pending_calls.fetch_add(1, std::memory_order_relaxed) >= max_pending_calls) {
      pending_calls.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    if (!admit_bytes(bytes)) {
      pending_calls.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  /// Reserves room for `bytes` of a stream's message, which holds no call of its own. Adds only
  /// when it admits (no add and roll back): a co_write that saw the budget full during a
  /// refused request's passing add would wait for a give-back that never comes.
  bool admit_bytes(std::size_t bytes) noexcept {
    std::size_t now = pending_bytes.load(std::memory_order_relaxed);
    do {
      if (now >= max_pending_bytes) return false;
    } while (!pending_bytes.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    return true;
  }

  const std::uint32_t max_frame_bytes;
  // Optional only so that it can be re-created in place (release_receive_memory()).
  std::optional<frame_assembler> assembler;
  bool assembler_grown = false;  // it held a frame much larger than a receive buffer
  gathered_writer<pending> out;
  inflight_table<pending> inflight;  // bounded by max_pending_calls: admit() reserved each one
  /// Open streams by id (client_streams.cpp); also bounded by max_pending_calls, as each holds one.
  inflight_table<client_stream_state> streams;
  struct deadline {
    std::int64_t at;
    std::uint64_t id;
    bool operator>(const deadline& o) const noexcept { return at > o.at; }
  };
  std::vector<deadline> deadlines;  // min-heap; entries of finished calls are skipped lazily
  bool keepalive_on = false;  // TCP keepalive set, at the first stream (client_streams.cpp)
  bool recv_armed = false;
  bool dirty = false;
  bool dead = false;      // no more traffic: pending calls failed, new ones fail at once
  /// Why fail_connection() ended it (first reason only): calls and streams the loop takes after
  /// that fail with it too, not with a bare "closed" (a TLS client whose handshake refused the
  /// server's certificate before its first call was posted must still say so).
  std::string failure;
  bool detached = false;  // the client let go; free once no request names this connection
  std::promise<void>* on_freed = nullptr;
  std::unique_ptr<tls_client_link> tls;  // TLS connections only (tls_client.cpp)
  /// A write of this connection is with the kernel (the plaintext writer's, or TLS's own).
  bool writing() const noexcept { return out.in_flight() || (tls && tls->in_flight); }
};

class client_loop {
 public:
  client_loop();  ///< probes io_uring and starts the thread; throws std::system_error
  ~client_loop();

  bool in_loop_thread() const noexcept { return std::this_thread::get_id() == _thread_id; }
  /// True on the thread of any client runtime (where blocking waits are refused).
  static bool on_any_loop_thread() noexcept;

  pending* get_pending();
  /// Returns a pending that was never posted (e.g. a refused call). Any thread.
  void recycle(pending* p) noexcept { put_pending(p); }
  /// Any thread: cancels call `p` (once; later requests do nothing). See cancel_trigger.
  void request_cancel(pending* p, cancel_reason why) noexcept;
  /// Ends a call's cancellation triggers: none of them runs (or is running) once this returns.
  static void disarm(pending* p) noexcept;
  /// Queues work for the loop; wakes it unless called from the loop itself.
  void post(pending* p) noexcept {
    _inbox.push(&p->node);
    if (!in_loop_thread()) _waker.notify();
  }
  /// post() from a stream handle (client_stream.cpp): the loop may take the frame, free its
  /// connection and be destroyed (client::close() racing the handle) before post() has
  /// notified; the destructor waits for posts in progress, so the notify never touches a freed
  /// loop. Unary calls do not pay for it: their own triggers are disarmed before a free.
  void post_from_stream(pending* p) noexcept {
    _stream_posts.fetch_add(1, std::memory_order_seq_cst);
    post(p);
    _stream_posts.fetch_sub(1, std::memory_order_release);
  }

 private:
  void run(std::promise<void>& ready);
  void handle(const io_uring_cqe& cqe);
  void take_inbox();
  void accept_work(pending* p);
  void arm_recv(client_conn* c) noexcept;
  void on_recv(client_conn* c, const io_uring_cqe& cqe);
  bool on_frame(client_conn* c, std::span<const std::byte> frame);
  void start_write(client_conn* c) noexcept;
  void on_write(client_conn* c, int res);
  void written(pending* p) noexcept;
  void complete(pending* p, const call_outcome& o) noexcept;
  void uncount(pending* p) noexcept;
  /// Gives back `bytes` of c's max_pending_bytes and wakes the co_writes waiting for room.
  void give_back_bytes(client_conn* c, std::size_t bytes) noexcept;
  void wake_room_writers(client_conn* c) noexcept;
  void send_cancel(client_conn* c, std::uint64_t id) noexcept;
  void on_cancel_call(pending* m) noexcept;
  void mark_dirty(client_conn* c);
  void release_receive_memory(client_conn* c) noexcept;
  void fail_connection(client_conn* c, call_error e, std::string_view why) noexcept;
  void expire_deadlines() noexcept;
  void add_deadline(client_conn* c, std::int64_t at, std::uint64_t id);
  std::int64_t next_deadline() const noexcept;
  void maybe_free(client_conn* c) noexcept;
  void put_pending(pending* p) noexcept;
  // TLS connections (tls_client.cpp): the session between the socket and the frames.
  void tls_start(client_conn* c) noexcept;
  void tls_receive(client_conn* c, std::span<const std::byte> cipher);
  void tls_start_write(client_conn* c) noexcept;
  void tls_on_write(client_conn* c, int res) noexcept;
  void feed_frames(client_conn* c, std::span<const std::byte> bytes);
  // Streams (client_streams.cpp): frames from the handles, frames from the server, the ends.
  void accept_stream_open(pending* p) noexcept;
  void accept_stream_frame(pending* p) noexcept;
  void on_stream_frame(client_conn* c, const frame_view& v) noexcept;
  void on_stream_message(client_conn* c, client_stream_state* s, const frame_view& v) noexcept;
  void end_stream(client_conn* c, client_stream_state* s, const call_outcome& o, bool tell_server) noexcept;
  void end_all_streams(client_conn* c, call_error e, status code, std::string_view why) noexcept;
  void expire_stream(client_conn* c, std::uint64_t id, std::int64_t at) noexcept;

  ring* _ring = nullptr;
  provided_buffers* _buffers = nullptr;
  ring_waker _waker;
  mpsc_queue _inbox;
  mpmc_queue<pending*> _free{16384};
  std::vector<client_conn*> _conns;
  std::vector<client_conn*> _dirty;
  std::vector<std::byte> _scratch;  // aligned copy of one incoming frame for decoding
  frame_encoder _encoder;           // cancel frames (a few dozen bytes each)
  std::atomic<bool> _stop{false};
  std::atomic<unsigned> _stream_posts{0};  // stream handles inside post_from_stream()
  std::thread _thread;
  std::thread::id _thread_id;
};

}  // namespace ringrpc::detail

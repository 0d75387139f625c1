#pragma once
// A shard of the server: one thread and one ring serving a share of the connections, in two
// roles. Its reader role receives, cuts and verifies frames and dispatches calls (shard.cpp:
// the loop; shard_connections.cpp: admitting and closing; shard_frames.cpp: frames to calls;
// shard_sweep.cpp: timeouts and liveness; shard_tls.cpp: TLS sessions). Its responder role is
// a part of its own (responder.hpp): the way back's writes, driven on the same thread and ring.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>
#include <thread>

#include "server/call.hpp"
#include "server/connection.hpp"
#include "base/clock.hpp"
#include "base/counter.hpp"
#include "base/mpsc_queue.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/server_counters.hpp"
#include "exec/dispatcher.hpp"
#include "wire/frame_codec.hpp"
#include "server/memory_budget.hpp"
#include "server/cancel_registry.hpp"
#include "server/responder.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"
#include "uring/ring_waker.hpp"

namespace ringrpc::detail {

class server_core;
class shard_downstreams;

/// One connection as /connections shows it.
struct connection_info {
  std::uint64_t id = 0;
  std::string peer;
  std::int64_t accepted_ns = 0;
  std::uint32_t calls_in_flight = 0;
  std::size_t queued_reply_bytes = 0;
  bool paused = false;
  unsigned reader = 0;
};

/// One shard of the server: one thread, one ring, one provided-buffer ring, and the shard's
/// responder (responder.hpp), which that thread drives on the same ring. Each connection has
/// one multishot recv armed; completed frames become calls handed to their endpoint's pool, or
/// are answered here (direct endpoints, unknown method, bad frame, busy, shutting down) and
/// written without leaving the thread. Calls handed off in one loop turn wake each pool once;
/// the turn's receives and writes are submitted together.
class shard final : grpc::session_host {
 public:
  shard(server_core& core, unsigned index);
  ~shard();

  /// Starts the thread and returns once its ring exists (its fd is needed for hand-offs).
  void start(const uring_features& features);
  int ring_fd() const noexcept { return _ring_fd.load(std::memory_order_acquire); }

  /// Draining: wake up so frames already received are answered SHUTTING_DOWN.
  void notify() noexcept { _waker.notify(); }
  /// Stop reading: cancel every receive (nothing new gets in).
  void quiesce() noexcept;
  /// True once the reader thread has acted on quiesce(): frames it read before are answered.
  bool quiesced() const noexcept { return _quiesce_acked.load(std::memory_order_acquire); }
  /// Shuts every connection down; the thread exits once none of them exists any more.
  void close_all() noexcept;
  void join();
  /// True once the thread has left its loop (every connection of this reader is gone).
  bool exited() const noexcept { return _exited.load(std::memory_order_acquire); }
  /// Called by ~connection on whichever thread drops the last reference.
  void connection_destroyed() noexcept;

  server_core& core() const noexcept { return _core; }
  /// Reader thread: where this shard's calls come from and go back to.
  call_cache& calls() noexcept { return _calls; }
  /// This shard's responder: handlers post() finished calls to it, then call notify_replies().
  responder& replies() noexcept { return _responder; }
  /// Any thread, after posting replies (once per batch): wakes the thread if it sleeps.
  void notify_replies() noexcept { _waker.notify(); }
  /// Any thread, a hint: the shard announced a sleep (a reply handed over now would wake it).
  bool asleep() const noexcept { return _waker.sleeping(); }
  /// Whether the calling thread is this reader's (then a reply is queued with no hand-off).
  bool on_its_thread() const noexcept { return current == this; }
  /// Reader thread: the clock read at the start of this loop turn.
  std::int64_t turn_ns() const noexcept { return _turn_ns; }
  /// A TLS connection whose peer sent close_notify: ours answers it once no call of the
  /// connection is owed an answer any more (the responder asks after each write).
  void close_notify_if_owed(connection* c) noexcept;
  /// Responder (this thread): sealing left frames for the server in the connection's gRPC
  /// session (stream credit, client messages); they are delivered after this turn's
  /// completions, or the next turn's when the seal ran in the turn's last flush; the loop does
  /// not sleep while any wait (shard_grpc.cpp).
  void session_frames_waiting(connection* c) noexcept;
  /// Reader thread: a paused connection may read again; resumed later in this turn.
  void resume_later(connection* c) noexcept;
  /// Responder (this thread): a stream's end was taken for writing; the stream leaves its
  /// connection's table (shard_streams.cpp).
  void stream_end_taken(call* end) noexcept;
  void stream_out_released(connection* c, std::uint32_t bytes) noexcept;
  /// Reader thread: work was submitted to `p` without a wake-up; the pool is woken once for
  /// all of it at the end of this turn (a stream's drain, as a call's hand-over).
  void wake_at_end_of_turn(thread_pool* p) noexcept { note_submitted(p); }
  /// Calls of this shard's connections with a cancel_hub (on_cancel hooks, child calls).
  cancel_registry& hubs() noexcept { return _hubs; }

  // Coroutine handler frames that stay on this shard (shard_coroutines.cpp; their home is
  // made in coro_server.cpp), and the stall detector for user code run on this thread.
  /// The shard whose thread this is, if any.
  static shard* here() noexcept { return current; }
  /// Any thread: queues the resumption of a frame of `method` (a frame's method buffer, read
  /// before the resumption runs) on this thread, and wakes it. False once its loop is over.
  bool post_resumption(coro_abi::resume_slot& slot, const char* method) noexcept;
  /// Reader thread: this shard's connections to the server's downstreams (made on first use).
  shard_downstreams& downstreams();
  /// Downstream calls taken from this shard's pool and not given back (any thread; tests).
  std::uint64_t downstream_calls_in_use() const noexcept { return _downstream_calls.load(std::memory_order_relaxed); }
  /// Reader thread: user code (a direct handler, a resumption) ended just now; its stretch is
  /// measured from the last mark and reported as a stall naming `method` if too long.
  void user_code_ran(std::string_view method) noexcept {
    const std::int64_t now = coarse_now_ns();
    const std::int64_t took = now - _stretch_ns;
    _stretch_ns = now;
    if (took > stall_threshold_ns) [[unlikely]] report_stall(method, took);
  }
  /// Reader thread: starts a stretch now (after the shard's own work that may be long).
  void mark_user_code() noexcept { _stretch_ns = coarse_now_ns(); }
  /// A stretch of user code longer than this is reported as a shard stall (and a loop turn
  /// longer than this counts as an event-loop stall).
  static constexpr std::int64_t stall_threshold_ns = 10'000'000;

  // Stats (any thread). The counters of the table (ringrpc/server_counters.hpp) this shard
  // keeps are slots of _counts; server_core::stats() adds them up. The rest are its own.
  using sc = server_counter;
  using counters = counter_array<server_counter, server_counter_count>;
  const counters& counts() const noexcept { return _counts; }
  std::uint64_t finished() const noexcept { return _finished.get(); }
  std::uint64_t calls_created() const noexcept { return _created.get(); }
  std::uint64_t calls_enqueued() const noexcept { return _enqueued.get(); }
  /// The connections of this reader now (any thread; for /connections).
  void snapshot_connections(std::vector<connection_info>& out) const;

 private:
  void run(const uring_features& features, std::promise<void>& ready);
  /// How long the next turn may sleep (-1: until something completes).
  std::chrono::nanoseconds longest_sleep(bool block) const noexcept;
  void handle(const io_uring_cqe& cqe);
  void on_handoff(int fd, bool tls = false);
  void on_recv(connection* c, const io_uring_cqe& cqe);
  // TLS connections (reader_tls.cpp).
  bool start_tls(connection* c) noexcept;
  bool admit_tls_handshake(connection* c, bool& per_address) noexcept;
  void refuse_handshake(connection* c, counter& count, const char* knob, unsigned value, const char* why) noexcept;
  void release_address_handshake(connection* c, bool per_address) noexcept;
  void end_handshake(connection* c, tls_link& t) noexcept;
  void on_recv_tls(connection* c, const io_uring_cqe& cqe);
  /// Bytes of a connection with a session (TLS, gRPC): through it, then frames to deliver().
  void receive_through_link(connection* c, std::span<const std::byte> bytes) noexcept;
  // gRPC on the plaintext port (shard_grpc.cpp).
  void receive_unframed(connection* c, std::span<const std::byte> bytes);
  bool start_grpc(connection* c) noexcept;
  bool grpc_in_tls(connection* c, tls_link& t) noexcept;
  /// What a gRPC session's own output may reach while the peer reads none of it: the replies
  /// its window let through (bounded by the session's held-reply cap) and the queue's cap.
  std::size_t grpc_pending_cap() const noexcept;
  void tls_failed(connection* c, tls_link& t, const std::string& why) noexcept;
  /// An orderly close of an established TLS connection: its close_notify before the FIN.
  void say_close_notify(connection* c) noexcept;
  void tls_established(connection* c, tls_link& t) noexcept;
  void finish_tls(connection* c) noexcept;
  void charge_tls(connection* c, tls_link& t) noexcept;
  void on_resume(connection* c);
  bool on_frame(connection* c, std::span<const std::byte> frame);
  void deliver(connection* c, std::span<const std::byte> data);
  bool should_pause(connection* c) const noexcept;
  bool pause(connection* c) noexcept;
  void arm_recv(connection* c) noexcept;
  void cancel_recv(connection* c) noexcept;
  void start_close(connection* c) noexcept;
  void maybe_finish(connection* c) noexcept;
  call* new_call(connection* c) noexcept;
  void dispatch(call* k, const frame_view& v);
  // dispatch()'s steps (shard_frames.cpp), in the order a call meets them. Those every call
  // takes are inline (defined there, dispatch() is their only caller) so the hot path stays
  // one function; the others run only for a refusal or a rare check.
  void refuse_by_server(call* k, std::uint64_t id, wire::Kind refuse_kind, bool no_memory);
  bool admit_caller(call* k, const frame_view& v, wire::Kind refuse_kind);
  endpoint_slot* look_up(call* k, const frame_view& v, wire::Kind refuse_kind);
  bool admit_at_endpoint(call* k, const frame_view& v, const authorizer& a, wire::Kind refuse_kind);
  inline void prepare(call* k, const frame_view& v, endpoint_slot* slot) noexcept;
  inline std::uint32_t charge_share(call* k) noexcept;
  inline void hand_over(call* k, std::uint64_t id, endpoint_slot* slot, std::uint32_t in_flight,
                        wire::Kind refuse_kind);
  void refuse_full(call* k, std::uint64_t id, endpoint_slot* slot, std::uint32_t in_flight, wire::Kind refuse_kind);
  void refuse_stopped(call* k, std::uint64_t id, endpoint_slot* slot, wire::Kind refuse_kind);
  void refuse_guarded(call* k, std::uint64_t id, wire::Kind refuse_kind, status code, std::string_view why,
                      const char* stage, std::uint32_t retry_after_ms = 0);
  void post_rejected(const call* k, std::uint64_t id, std::string_view name, std::string_view detail) noexcept;
  // Streams (shard_streams.cpp): the open after dispatch()'s checks, the frames of an open
  // stream, and the ends the shard decides (cancel, deadline, connection gone, stop).
  void remember_refused_open(connection* c, std::uint64_t id, std::uint8_t kind) noexcept;
  void open_stream(call* k, const frame_view& v, endpoint_slot* slot, std::uint32_t in_flight);
  bool take_stream_slots(call* k, std::uint64_t id, connection* c, std::size_t open_here,
                         std::shared_ptr<address_streams::count>& from);
  void refuse_stream(call* k, std::uint64_t id, server_counter which, const char* knob, std::string message);
  void give_back_stream_slots(address_streams::count* from) noexcept;
  void on_stream_frame(call* k, const frame_view& v) noexcept;
  bool cancel_stream(connection* c, std::uint64_t id) noexcept;
  bool take_reset_token(connection::connection_rare& r) noexcept;
  void end_streams(connection* c, status code, std::string_view why) noexcept;
  void expire_streams(connection* c) noexcept;
  void stream_protocol_error(connection* c) noexcept;
  void release_quietly(call* k) noexcept;
  void charge_message_share(call* m) noexcept;
  void notify_endpoints(connection* c, call_purpose purpose, std::string_view text = {});
  void arm_sweep_timer() noexcept;
  void sweep() noexcept;
  void shed(connection* c, close_cause reason, counter& count) noexcept;
  bool shed_handshake(connection* c, const tls_link& t, std::int64_t timeout, std::int64_t silence,
                      bool scarce) noexcept;
  bool peer_left(connection* c) noexcept;
  bool check_liveness(connection* c) noexcept;
  void give_back_memory() noexcept;
  void charge_assembler(connection* c) noexcept;
  void apply_budget() noexcept;
  void out_of_memory(connection* c, const char* what) noexcept;
  void refuse_connection(int fd, bool tls) noexcept;
  void refuse_connection(int fd, bool tls, const char* knob, unsigned value, const std::string& why) noexcept;
  void post_refusal(const char* knob, unsigned value) noexcept;
  void note_submitted(thread_pool* p) noexcept;
  /// Wakes up to n of p's parked workers: through the ring when it can (the turn's submit
  /// carries the wake), else with a futex() call now.
  void wake_pool(thread_pool* p, unsigned n) noexcept;
  void refresh_table() noexcept;
  void answer(call* c, std::uint64_t id, wire::Kind kind, status code, std::string_view message,
              std::uint32_t retry_after_ms = 0) noexcept;
  void answer_ping(call* k, std::uint64_t id, wire::Kind kind) noexcept;
  /// The peer is gone: running handlers see cancelled() and their on_cancel hooks run.
  void mark_gone(connection* c) noexcept {
    c->gone.store(true, std::memory_order_relaxed);
    _hubs.fire(c, 0);
  }
  void end_of_turn() noexcept;
  /// quiesce() and close_all(), once each, on the reader thread.
  void act_on_stop_requests() noexcept;
  void run_resumes() noexcept;
  /// Runs up to `at_most` queued resumptions; true when it stopped at that limit.
  bool run_coroutines(std::size_t at_most = resumptions_per_turn) noexcept;
  static constexpr std::size_t resumptions_per_turn = 256;
  void close_coroutines() noexcept;
  void report_stall(std::string_view method, std::int64_t took_ns) noexcept;

  // grpc::session_host (shard_grpc.cpp)
  health check_health(std::string_view service) noexcept override;
  void note(grpc::session_event e) noexcept override;
  std::uint8_t method_kind(std::string_view method) noexcept override;
  void deliver_session_frames() noexcept;

  static thread_local shard* current;  // the reader whose thread this is, if any

  server_core& _core;
  const unsigned _index;
  ring* _ring = nullptr;
  provided_buffers* _buffers = nullptr;
  std::thread _thread;
  std::atomic<int> _ring_fd{-1};
  ring_waker _waker;
  std::atomic<bool> _quiesce{false};
  std::atomic<bool> _close_all{false};
  std::atomic<bool> _quiesce_acked{false};
  std::atomic<bool> _exited{false};
  std::atomic<std::size_t> _alive{0};  // connections of ours not yet destroyed
  bool _quiesced = false;
  bool _closing_all = false;
  connection* _live = nullptr;  // intrusive list of this reader's connections
  std::vector<connection*> _rearm;
  std::vector<connection*> _to_release;
  connection* _resumes = nullptr;  // resume_later(), linked by resume_next; each holds a reference
  std::vector<connection*> _session_frames;  // session_frames_waiting(); each holds a reference
  std::shared_ptr<const dispatcher::table> _table;  // the routing table this thread uses
  std::uint64_t _table_version = 0;
  std::string _last_method;  // the method this thread looked up last, and what it found
  endpoint_slot* _last_slot = nullptr;
  endpoint_slot* _kind_slot = nullptr;  // the endpoint method_kind() was last asked about ...
  std::uint8_t _kind = 0;               // ... and its stream kind
  std::vector<std::pair<thread_pool*, unsigned>> _to_wake;  // pools given work this turn
  bool _ring_futex = false;  // wake_pool() goes through the ring (uring_features::futex_wake)
  std::uint64_t _next_connection = 0;
  frame_encoder _encoder;
  counters _counts;  // bumped on this thread only: _counts[sc::bytes_in].add(n)
  counter _finished, _created, _enqueued;
  std::vector<std::byte> _tls_plain;  // plaintext one receive yielded (reused: no allocation per call)
  memory_budget::account _account;  // this reader's share of the server's memory budget
  call_cache _calls;  // before _responder: its's calls come back to it
  responder _responder;
  std::size_t _budget_paused = 0;   // connections of ours paused for the budget
  call* _unposted = nullptr;    // the call on_frame is dispatching, until someone owns it
  std::int64_t _trim_mark = 0;  // the budget's high since memory was last handed back
  std::int64_t _turn_ns = 0;  // clock at the start of this loop turn
  bool _sweep_due = false;
  __kernel_timespec _sweep_ts{};
  cancel_registry _hubs;
  std::unique_ptr<shard_downstreams> _downstreams;  // null until a handler here calls one
  std::atomic<std::uint64_t> _downstream_calls{0};  // taken from its pool, not given back
  mutable std::mutex _live_mu;  // guards the links of _live (the reader alone mutates them)
  // Resumptions of frames homed here; posters enter the gate (_posting) so that the loop's
  // end can close it and know that nobody is still pushing.
  mpsc_queue _resumptions;
  std::atomic<unsigned> _posting{0};
  std::atomic<bool> _resumptions_closed{false};
  // The stall detector: the coarse clock at the start of the current stretch, and the log's
  // rate limit (one line a second, counting the stalls it did not log).
  std::int64_t _stretch_ns = 0;
  std::int64_t _stall_logged_ns = 0;
  std::uint64_t _stalls_unlogged = 0;
};

}  // namespace ringrpc::detail

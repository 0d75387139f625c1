#pragma once
// The server's parts and how they are wired; the public ringrpc::server is a facade over this.
// Implemented in server_core.cpp (wiring, start), server_stop.cpp and server_calls.cpp.

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/clock.hpp"
#include "base/counter.hpp"
#include "base/sharded_counter.hpp"
#include "server/call.hpp"
#include "server/coro_frames.hpp"
#include "exec/dispatcher.hpp"
#include "exec/exec_host.hpp"
#include "ringrpc/event_bus.hpp"
#include "ringrpc/log.hpp"
#include "ringrpc/server.hpp"
#include "server/acceptor.hpp"
#include "server/address_streams.hpp"
#include "server/answer.hpp"
#include "server/call_guard.hpp"
#include "server/caller_shares.hpp"
#include "server/deferred_state.hpp"
#include "server/memory_budget.hpp"
#include "server/peer_limits.hpp"
#include "server/shard.hpp"
#include "server/responder.hpp"
#include "server/server_attachment.hpp"
#include "server/server_metrics.hpp"
#include "uring/uring_probe.hpp"

namespace ringrpc::detail {

/// The next call this thread runs is timed for the histograms (the thread was idle: see
/// server_calls.cpp).
void time_next_call() noexcept;

/// Lifecycle: configured -> running -> draining (no new calls run; new ones get SHUTTING_DOWN)
/// -> stopped.
enum class server_state { configured, running, draining, stopped };

class server_core final : public exec_host {
 public:
  explicit server_core(server_options options);
  ~server_core();

  // Before start(): what a configuration file adds (libringrpc_ops reads the file).
  /// Options for endpoint `name` that replace what its registration gives (the operator wins).
  void set_endpoint_override(std::string name, endpoint_options options);
  /// The options the configuration gives endpoint `name`, if it names it.
  const endpoint_options* endpoint_override(std::string_view name) const noexcept;
  /// The structured log's event queue: its capacity and the level whose events it takes, and
  /// the bus's interval between drop warnings.
  void set_event_log(std::size_t queue_capacity, log_level level, std::chrono::milliseconds warning_interval);
  /// A part that lives and dies with the server (server_attachment.hpp); before start().
  void attach(std::unique_ptr<server_attachment> part);
  /// The first attached part of type T, or null.
  template <class T>
  T* attachment() const noexcept {
    for (const auto& p : _attachments) {
      if (auto* t = dynamic_cast<T*>(p.get())) return t;
    }
    return nullptr;
  }

  void start();
  void stop();

  // --- used by the stages
  const server_options& options() const noexcept { return _options; }
  dispatcher& endpoints() noexcept { return _dispatcher; }
  call_pool& pool() noexcept { return *_pool; }
  memory_budget& budget() noexcept { return *_budget; }
  peer_limits& peers() noexcept { return *_peers; }
  /// Streams open per source address (max_streams_per_address; shard_streams.cpp).
  address_streams& stream_addresses() noexcept { return _stream_addresses; }
  /// Fair-share counters of callers keyed by address (fair_share_by = address).
  caller_shares& callers() noexcept { return _callers; }
  /// Metadata caps, bearer tokens and the server's authorizer (call_guard.hpp).
  call_guard& guard() noexcept { return _guard; }
  /// Coroutine handler frames (server/coro_frames.hpp): stop() cancels them and waits for
  /// every one before the pools their resumptions run on shut down.
  coro_frame_registry& coro_frames() noexcept { return _coro_frames; }
  const coro_frame_registry& coro_frames() const noexcept { return _coro_frames; }
  /// A stream opens (shard_streams.cpp): false, and nothing taken, when `max` streams are open
  /// in the whole server already. One atomic on a stream's open and end, none on a call's.
  bool take_stream_slot(std::uint32_t max) noexcept {
    if (_open_streams.fetch_add(1, std::memory_order_relaxed) < max) return true;
    _open_streams.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  /// A stream's last callback has run.
  void give_back_stream_slot() noexcept { _open_streams.fetch_sub(1, std::memory_order_relaxed); }
  std::uint32_t open_streams() const noexcept { return _open_streams.load(std::memory_order_relaxed); }
  /// A handler's stream write found no room: `credit` the client's, else the connection's
  /// buffer of unwritten stream messages (any thread; a flow-control stall on /metrics).
  void note_stream_write_blocked(bool credit) noexcept {
    (credit ? _stream_blocked_credit : _stream_blocked_buffer).add();
  }
  /// Allocations that failed (a call or a connection was failed instead of the server).
  void note_out_of_memory() noexcept { _out_of_memory.add(); }
  shard& shard_at(std::size_t i) noexcept { return *_shards[i]; }
  const shard& shard_at(std::size_t i) const noexcept { return *_shards[i]; }
  std::size_t shard_count() const noexcept { return _shards.size(); }
  server_state state() const noexcept { return _state.load(std::memory_order_acquire); }
  bool draining() const noexcept { return state() >= server_state::draining; }
  /// True from the moment stop() begins (before deregistration's grace): the built-in ping
  /// answers SHUTTING_DOWN so channels move calls away while every other call is still served.
  bool leaving() const noexcept { return _leaving.load(std::memory_order_relaxed) || draining(); }
  /// Set once the drain deadline passed: queued calls are answered SHUTTING_DOWN unrun.
  bool abandoning() const noexcept { return _abandon.load(std::memory_order_acquire); }

  /// A pool wired to this server: its workers wake the readers they answered for after each
  /// burst, and its
  /// refusals are reported (rate-limited) on stderr.
  std::unique_ptr<thread_pool> make_pool(const std::string& name, const pool_options& options,
                                         bool quiet = false) override;
  /// "3/4 threads busy, 1024/1024 queued", for refusal messages.
  std::string pool_state(const thread_pool& p) const override;

  // --- exec_host (the rest of it; guarded() comes from there)
  unsigned handler_threads() const noexcept override { return _options.handlers; }
  unsigned handler_queue_size() const noexcept override { return _options.handler_queue_size; }
  /// Runs one admitted call (or event) for `slot` on this thread and lets go of the call.
  void run_item(endpoint_slot& slot, work_item* item) noexcept override;
  /// Answers an admitted call without running it (and settles it for stop()).
  void refuse(work_item* item, status code, const std::string& message) noexcept override;
  void report_error(endpoint_slot& slot, const char* what, std::string_view message) noexcept override;
  void endpoint_started(endpoint_slot& slot) noexcept override;
  void endpoint_stopped(endpoint_slot& slot) noexcept override;

  // The way back (answer.cpp).
  /// Sends the answer encoded in c->reply to c's shard (or releases c when nothing goes back).
  void finish(call* c) noexcept;
  /// Hands `c` (answered, or empty to be released) to its shard's responder inbox from any
  /// thread, the shard's own included: what streams send keeps one order per connection,
  /// which a direct enqueue on the shard's thread could overtake (answer.cpp).
  void post_answer(call* c) noexcept;
  /// Whether pool handlers write their replies themselves while their shard sleeps
  /// (responder_inline.cpp). On unless RINGRPC_INLINE_REPLIES=0, which benchmarks use to
  /// measure the hand-off it saves.
  bool inline_replies() const noexcept { return _inline_replies; }
  /// A pool handler's thread writes c's reply itself (responder_inline.cpp): true if it
  /// handed c over that way, false if c takes the usual way.
  bool write_inline(shard& r, call* c) noexcept;
  void wake_for_reply(shard& r) const noexcept;
  /// Encodes a frame of `kind` answering c (none for one-way traffic), then finish(). Out of
  /// memory for even that frame: c's connection is shut down instead.
  void answer(call* c, wire::Kind kind, status code, std::string_view message,
              std::uint32_t retry_after_ms = 0) noexcept;
  /// A handler deferred c: the state its deferred_reply and a stopping server share.
  std::shared_ptr<deferred_state> defer(call* c);
  /// A deferred call was answered (its reply encoded): metrics, and off the pending list.
  void settle_deferred(deferred_state& s, call* c) noexcept;
  // --- Cancellation of a call as its listeners see it (call_cancel.cpp)
  /// c's hub, made (and registered with its shard) on first use by c's owner; fired at once
  /// when c is cancelled already. Throws std::bad_alloc.
  std::shared_ptr<cancel_hub> hub_of(call& c);
  /// c is answered: its hooks never run from now on (one running elsewhere is waited for).
  void close_hub(call& c) noexcept;
  /// The drain timeout passed: every call's hooks run, as their handlers see cancelled().
  void fire_all_hubs() noexcept;
  /// The hub of the call `ctx` serves (through its deferred state after defer()); null for a
  /// call without a server or already answered. Throws std::bad_alloc.
  static std::shared_ptr<cancel_hub> context_hub(const call_context& ctx);
  /// `stand_in` takes c's place on the way back (the responder releases it as it would c).
  static void stand_in_for(call* c, call* stand_in) noexcept;

  metrics_registry& metrics() noexcept { return _metrics; }
  const metrics_registry& metrics() const noexcept { return _metrics; }
  event_bus& events() noexcept { return *_bus; }
  const event_bus& events() const noexcept { return *_bus; }
  const dispatcher& endpoints() const noexcept { return _dispatcher; }
  /// Steady-clock time of start(); 0 before.
  std::int64_t started_ns() const noexcept { return _started_ns; }
  /// Every connection of every reader now (for /connections).
  void snapshot_connections(std::vector<connection_info>& out) const;
  /// Posts an event built by `make` only if some queue wants `kind` (no allocation otherwise).
  template <class Make>
  void post_event(event_kind kind, Make&& make) noexcept {
    if (!_bus->wants(kind)) return;
    try {
      event e = make();
      e.kind = kind;
      _bus->post(std::move(e));
    } catch (...) {
      // Out of memory building an event: the event is lost, the server goes on.
    }
  }

  /// server::post / post_to_all.
  bool post_local(std::string_view endpoint_name, std::span<const std::byte> payload);
  std::size_t post_local_to_all(std::span<const std::byte> payload);

  std::uint16_t port() const noexcept { return _acceptor ? _acceptor->port() : 0; }
  std::uint16_t tls_port() const noexcept { return _acceptor ? _acceptor->tls_port() : 0; }
  server_stats stats() const;

  /// max_connections: true if one more connection may open (then release it when it closes).
  bool admit_connection() noexcept {
    const unsigned max = _options.max_connections;
    if (_open_connections.fetch_add(1, std::memory_order_relaxed) >= max && max != 0) {
      _open_connections.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void release_connection_slot() noexcept { _open_connections.fetch_sub(1, std::memory_order_relaxed); }
  unsigned open_connections() const noexcept { return _open_connections.load(std::memory_order_relaxed); }
  /// max_tls_handshakes: true if one more handshake may start (then end_handshake() once it
  /// is done or its connection is gone). Once per TLS connection, never per call.
  bool admit_handshake() noexcept {
    const unsigned max = _options.max_tls_handshakes;
    if (_tls_handshakes.fetch_add(1, std::memory_order_relaxed) >= max) {
      _tls_handshakes.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void end_handshake() noexcept { _tls_handshakes.fetch_sub(1, std::memory_order_relaxed); }
  /// Half of max_tls_handshakes or more are under way: silent handshakes are closed early.
  bool handshakes_scarce() const noexcept {
    return 2ull * _tls_handshakes.load(std::memory_order_relaxed) >= _options.max_tls_handshakes;
  }

 private:
  void execute(endpoint_slot& slot, call* c) noexcept;
  void abandon_deferred() noexcept;
  /// Stopping past the drain's deadline: answers `shutting_down` for every call whose handler
  /// still runs user code, the handler's own answer being dropped; how many.
  std::uint64_t answer_for_running_handlers() noexcept;
  void answer_for_handler(call* c, call* stand_in) noexcept;
  void resolve_limits(std::size_t default_queue);
  void join_async_stop() noexcept;
  void stop_blocking();
  // noexcept: stop must reach the end (state stopped, pools joined) once frames are alive.
  void wait_for_coroutine_handlers(std::chrono::steady_clock::time_point drain_deadline) noexcept;
  void note_slow_call(call* c, std::int64_t processing_ns) noexcept;
  std::uint64_t calls_created() const noexcept;
  /// Calls whose answer was written (or whose peer was gone), over every shard.
  std::uint64_t calls_released() const noexcept;
  std::uint64_t calls_enqueued() const noexcept;
  template <class Pred>
  bool wait_until(Pred pred, std::chrono::steady_clock::time_point deadline);

  server_options _options;
  call_guard _guard{_options};
  uring_features _features;
  dispatcher _dispatcher{*this};
  std::unique_ptr<memory_budget> _budget;
  std::unique_ptr<peer_limits> _peers;
  caller_shares _callers;
  std::unique_ptr<call_pool> _pool;
  std::vector<std::unique_ptr<shard>> _shards;
  std::unique_ptr<acceptor> _acceptor;
  metrics_registry _metrics;
  std::unique_ptr<event_bus> _bus;
  std::size_t _log_queue_capacity = 10'000;
  log_level _log_level = log_level::info;
  std::map<std::string, endpoint_options, std::less<>> _endpoint_overrides;
  std::vector<std::unique_ptr<server_attachment>> _attachments;
  std::chrono::system_clock::time_point _started_at{};
  std::int64_t _started_ns = 0;
  bool _stop_after_start = false;  // stop() came from on_start(): start() stops once it is done
  std::atomic<unsigned> _open_connections{0};
  std::atomic<unsigned> _tls_handshakes{0};  // TLS handshakes under way
  std::atomic<std::uint32_t> _open_streams{0};  // see take_stream_slot
  address_streams _stream_addresses;
  sharded_counter _stream_blocked_credit;
  sharded_counter _stream_blocked_buffer;
  std::int64_t _slow_call_ns = 0;
  const bool _inline_replies;
  sharded_counter _settled;  // admitted client calls that ran or were refused
  sharded_counter _refused_busy;
  sharded_counter _out_of_memory;  // admitted, then refused with their inbox (serial endpoints)
  std::atomic<server_state> _state{server_state::configured};
  std::atomic<bool> _abandon{false};
  coro_frame_registry _coro_frames;
  std::atomic<bool> _leaving{false};  // stop() has begun; see leaving()
  std::mutex _stop_mu;        // one stop() at a time; later callers wait for it
  std::mutex _async_stop_mu;  // guards _async_stop
  std::thread _async_stop;    // stop() called from a handler runs here
  std::mutex _deferred_mu;
  std::unordered_set<deferred_state*> _deferred;  // unanswered deferred replies
};

}  // namespace ringrpc::detail

#pragma once
/// \file The ringrpc server: register endpoints (or plain methods), start, stop.
///
/// Threads (see docs/architecture.md): one acceptor, `readers` reader rings, thread pools (the
/// "default" pool has `handlers` threads) and one responder ring. Where an endpoint's work runs
/// is its dispatch policy's choice (docs/execution.md).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/authorizer.hpp"
#include "ringrpc/call_context.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/interceptor.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/server_counters.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/thread_pool.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace detail {
class server_core;
class server_seam;
}  // namespace detail

class event_bus;
class record_layer;

/// Knobs of one server. Zero for a count means "derive from the CPUs this process may use"
/// (its affinity mask, so `taskset` is honoured). Names in brackets are Hadoop IPC's.
/// Who counts as one caller for the fair share of the queues (server_options::fair_share_by).
enum class fair_share_caller : std::uint8_t { connection, address };

/// How many failed authentications (a bearer token presented and not accepted) one source
/// address may cause (docs/security.md, "Guessing tokens"): a token bucket per address holding
/// `burst`, refilled by `per_minute`. Once it is empty, that address's calls carrying a token are
/// refused UNAUTHENTICATED, with a retry-after, without the token being checked, until the bucket
/// holds one again. Addresses behind one NAT share a bucket.
struct auth_failure_limits {
  unsigned burst = 20;           ///< failures in a row an address may have; 0 = no limit
  unsigned per_minute = 60;      ///< refill rate: sustained failures a minute per address (>= 1)
  unsigned per_connection = 10;  ///< a connection is closed after this many; 0 = never
};

struct server_options {
  std::string host = "127.0.0.1";          ///< address to bind; "0.0.0.0" for all IPv4
  std::uint16_t port = 0;                  ///< 0 picks a free port; see server::port()
  int backlog = 1024;                      ///< listen backlog [ipc.server.listen.queue.size]
  unsigned readers = 0;                    ///< reader rings [ipc.server.read.threadpool.size]
  unsigned handlers = 0;                   ///< threads of the "default" pool [handler.count]
  unsigned handler_queue_size = 1024;      ///< its queue = handlers x this [ipc.server.handler.queue.size]
  /// Policy of endpoints registered through add_method() (and of the built-in methods).
  dispatch_policy default_policy = dispatch_policy::all;
  std::uint32_t max_frame_bytes = 16u << 20;  ///< largest frame body accepted [ipc.maximum.data.length]
  /// The server-wide budget, in bytes, for what peers make it hold: partial frames, admitted
  /// requests and unwritten replies. At it, new calls get SERVER_BUSY naming this knob and the
  /// connections holding the most stop being read; reading resumes below 90% of it.
  /// 0 = a quarter of the memory the process may use (cgroup memory.max, else MemTotal, and
  /// no more than RLIMIT_AS allows). See docs/operations.md.
  std::size_t max_buffered_bytes = 0;
  /// Past this many reply bytes queued but unwritten on one connection, the server stops
  /// reading that connection until half of it has drained. Replies of calls already admitted
  /// are still queued (nothing is lost); a peer that stops reading altogether is shed after
  /// write_stall_timeout.
  std::size_t max_queued_reply_bytes = 4u << 20;
  /// Past this many calls accepted but not yet answered on one connection, reading pauses.
  /// 0 = min(256, the default pool's queue), so one connection cannot fill the queue it feeds.
  unsigned max_inflight_per_connection = 0;
  /// Fair share of the pools' queues, in cost units (a call: 1 + its connection's recent handler
  /// time / 5 ms): a caller's calls beyond this many units in flight wait in a queue of their own
  /// (served one pop in four, or when nothing else waits; slow ones at most 1/4 of the handlers'
  /// time while others wait, never every handler); when full, SERVER_BUSY. See docs/execution.md.
  unsigned fair_share_calls = 2;
  /// Who a caller is for fair_share_calls: each connection, or all connections from one peer
  /// address together (then opening more connections gains a host nothing).
  fair_share_caller fair_share_by = fair_share_caller::connection;
  /// Past this many request bytes accepted but not yet answered on one connection, reading
  /// pauses (a cap in bytes beside the count).
  std::size_t max_inflight_bytes_per_connection = 32u << 20;
  /// Connections with no traffic either way for this long are closed; 0 = never. The default
  /// closes what a vanished peer would otherwise hold forever.
  /// [ipc.client.connection.maxidletime]
  std::chrono::milliseconds idle_timeout{300'000};
  /// A connection whose replies wait while its peer accepts no byte for this long is closed
  /// and its calls cancelled; 0 = never.
  std::chrono::milliseconds write_stall_timeout{30'000};
  /// A connection holding part of a frame that gets no further byte for this long is closed
  /// (slow-drip peers); 0 = never.
  std::chrono::milliseconds frame_stall_timeout{30'000};
  /// Connections open at once; further ones are accepted and closed at once, and counted.
  /// 0 = derive from RLIMIT_NOFILE (its soft limit less 64 fds for everything else).
  /// [Dubbo: accepts]
  unsigned max_connections = 0;
  /// Connections open at once from one source address; further ones are refused like those
  /// past max_connections. 0 = 90% of max_connections, so one host cannot take every slot.
  unsigned max_connections_per_address = 0;
  /// New connections per second from one source address (a token bucket holding one second's
  /// worth); faster ones are refused. 0 = no limit.
  unsigned accept_rate_per_address = 0;
  /// Streams open at once on one connection; further opens are answered SERVER_BUSY. Never
  /// more than max_inflight_per_connection - 1 whatever this says: each open stream holds one
  /// of the connection's calls until it ends, and one must stay free to read the frames that
  /// end streams. 0 = no cap of its own (max_inflight_per_connection's alone). See
  /// docs/operations.md, "Streams".
  unsigned max_streams_per_connection = 100;
  /// Streams open at once in the whole server; further opens are answered SERVER_BUSY.
  unsigned max_streams = 16'384;
  /// Streams open at once from one source address (all its connections together); further
  /// opens are answered SERVER_BUSY. 0 = 90% of max_streams, so one host cannot take them all.
  unsigned max_streams_per_address = 0;
  /// SO_SNDBUF for accepted sockets; 0 keeps the kernel's default (and its auto-tuning).
  int socket_send_buffer_bytes = 0;
  unsigned recv_buffer_bytes = 16 * 1024;  ///< size of each provided receive buffer
  unsigned recv_buffers_per_reader = 512;  ///< provided buffers per reader ring
  /// How long stop() waits for accepted calls to be answered and written before it cancels.
  std::chrono::milliseconds drain_timeout{5000};

  /// Per-call metrics (status counts, queue and processing time, per method). Off saves a
  /// clock read and a few stores per call; server_stats' counters are kept either way.
  bool metrics = true;
  /// Calls that spend longer than this in the server (queue included) post a slow_call event;
  /// 0 = off. Checked on the coarse clock: thresholds below a few ms are not meaningful.
  std::chrono::microseconds slow_call_threshold{0};
  /// Post a call_completed event for one call in this many (per thread); 0 = never.
  unsigned sample_completions_every = 0;

  /// Per-call metadata a call may carry (ringrpc/metadata.hpp): at most this many pairs and
  /// this many bytes of keys plus values; beyond either the call is answered BAD_REQUEST and
  /// does not run (the connection stays open). The frame itself is bounded by max_frame_bytes.
  std::uint32_t max_metadata_entries = default_max_metadata_entries;
  std::uint32_t max_metadata_bytes = default_max_metadata_bytes;
  /// Bearer tokens the server accepts (docs/security.md). Empty: tokens are not checked (an
  /// `authorization` pair is then just metadata). Otherwise every call must carry
  /// `authorization: Bearer <one of these>` or is answered UNAUTHENTICATED unrun; its token's
  /// subject becomes call_context::peer()->token_subject. Compared in constant time.
  std::vector<bearer_token> bearer_tokens;
  /// Failed bearer tokens allowed per source address and per connection.
  auth_failure_limits auth_failures;
  /// A TLS listener beside the plaintext one: set to a record layer (ringrpc::tls_context::server
  /// from ringrpc-tls, ringrpc/tls.hpp) and connections to `tls_port` speak TLS; frames inside
  /// are the same. Null (the default): no TLS listener, and the core links no TLS library.
  std::shared_ptr<record_layer> tls;
  std::uint16_t tls_port = 0;  ///< 0 picks a free port; see server::tls_port()
  /// A TLS connection that has not finished its handshake this long after it was accepted is
  /// closed (counted in tls_handshake_timeouts); 0 = never.
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  /// Handshakes under way at once, server-wide; connections beyond it are closed at once and
  /// counted (tls_handshakes_refused). 0 = 1024.
  unsigned max_tls_handshakes = 0;
  /// Handshakes under way at once from one source address; beyond it connections are closed
  /// at once and counted (tls_handshakes_refused_per_address). 0 = half of max_tls_handshakes,
  /// so one host cannot take every slot.
  unsigned max_tls_handshakes_per_address = 0;
  /// While half of max_tls_handshakes or more are under way, a handshake whose peer has sent
  /// nothing for this long is closed (tls_handshakes_silent_closed); 0 = never.
  std::chrono::milliseconds tls_handshake_silence_timeout{1000};

  /// Interceptors around every call that runs a handler (ringrpc/interceptor.hpp), in order:
  /// the first is the outermost. Empty (the default): a call pays two tests for them.
  server_interceptors interceptors;

  /// gRPC clients on the plaintext port (docs/grpc.md): a connection whose first bytes are
  /// HTTP/2's client preface is served as gRPC, each call reaching the method its path names,
  /// with every check and cap a ringrpc frame meets. False: the port speaks ringrpc frames only
  /// (a preface is then read as the frame it looks like, and refused as too large).
  bool grpc = true;
};

// server_stats, the counters server::stats() returns: ringrpc/server_counters.hpp (one table of
// every counter; its layout does not change when a counter is added).


/// What server::wait() does with SIGINT and SIGTERM.
enum class wait_signals {
  none,  ///< leaves them alone: wait() returns when something else stops the server
  /// As ringrpc-server (docs/operations.md, "Signals and exit codes"): the first SIGINT or
  /// SIGTERM stops the server (stop(): a full drain), a second one during the drain exits the
  /// process at once with status 3, after one line on stderr. The previous handlers are back
  /// when wait() returns. The signals must not be blocked in every thread (then nobody gets
  /// them), and one wait() at a time may handle them in a process.
  stop,
};

/// Where a service registry (etcd: ringrpc/discovery.hpp) hooks into a server's life, so the
/// core knows no registry. The server calls it from start() and stop(); it owns the registry's
/// threads and connections itself.
class registration {
 public:
  virtual ~registration() = default;
  /// Once the listener is up, before start() returns, with the bound port. An unreachable
  /// registry must not fail start(): keep trying in the background (a throw does fail it).
  virtual void on_started(std::uint16_t port) = 0;
  /// The first step of stop(), while the server still serves as usual: deregister, then wait
  /// while clients move away (deregister-first drain). The phased stop follows.
  virtual void before_stop() noexcept = 0;
  /// After the server has stopped.
  virtual void on_stopped() noexcept {}
  /// Lines appended to the server's /metrics page (Prometheus text, with # HELP and # TYPE),
  /// e.g. how often the registry was lost; empty for none.
  virtual std::string metrics_text() const { return {}; }
};

/// An RPC server. Register endpoints, then start(); stop() (or the destructor) drains and joins.
/// Not copyable. add_pool() must happen before start(); the other members are thread-safe.
class server {
 public:
  /// A server from a configuration file, with its admin pages, is ringrpc::make_server
  /// (ringrpc/ops.hpp, library ringrpc-ops).
  explicit server(server_options options = {});
  ~server();  ///< stop()s if still running
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// A named pool endpoints can share (endpoint_options::pool). The "default" pool exists
  /// already (fixed, `handlers` threads). Throws std::invalid_argument on a duplicate name or
  /// bad options, std::logic_error after start().
  void add_pool(std::string name, pool_options options);

  /// The server-wide authorizer (ringrpc/authorizer.hpp): every call must pass it (and then its
  /// endpoint's own, endpoint_options::authorizer). Runs on the reader threads: cheap and
  /// non-blocking. Null removes it. Throws std::logic_error after start().
  void set_authorizer(std::shared_ptr<const authorizer> a);

  /// Replaces the accepted bearer tokens (server_options::bearer_tokens) while running: calls
  /// checked from now on use `tokens`; connections stay open. Any thread. Throws
  /// std::invalid_argument on an empty list: turning token checks off takes a restart, so an
  /// emptied tokens file can never open the server to every caller.
  void replace_bearer_tokens(std::vector<bearer_token> tokens);

  /// Registers an endpoint under `name` (no dots; calls to "name" and "name.x" reach it). Before
  /// start() it starts with the server; after, on_start() runs here before it can get anything.
  /// Throws std::invalid_argument on an empty, dotted or taken name or an unknown pool.
  void register_endpoint(std::string name, std::shared_ptr<endpoint> ep, endpoint_options options = {});
  /// Stops and removes the endpoint: new calls for it get SHUTTING_DOWN at once, those already
  /// accepted are handled, then on_stop() runs (on this thread if it is idle, else on the thread
  /// that finishes its last message); this returns without waiting. False if there is none.
  bool unregister_endpoint(std::string_view name);

  /// A plain function as an endpoint of its own named `name`, with `default_policy` and the
  /// default pool, concurrent. Same errors as register_endpoint (dots are allowed here).
  void add_method(std::string name, method_handler handler);

  /// A streaming method (ringrpc/stream.hpp, docs/design/streams.md): each StreamOpen of
  /// `name` with this `kind` makes a handler with `factory`, on the method's pool. Policy as
  /// add_method's, except that `direct` runs on the default pool (a stream's callbacks may
  /// wait for credit, never on the reader). Same errors as add_method. The server's
  /// interceptors (server_options::interceptors) see each stream's open, which they may refuse,
  /// and its end (ringrpc/interceptor.hpp, "Streams").
  void add_stream_method(std::string name, stream_kind kind, stream_factory factory);

  /// Local one-way messages (Spark's send / postToAll): delivered to receive() through the
  /// endpoint's policy. False when the endpoint is unknown or stopped, or its pool or inbox
  /// refused the message (counted in the pool's `rejected`).
  bool post(std::string_view endpoint_name, std::span<const std::byte> payload);
  /// Posts to every running endpoint; returns how many took it.
  std::size_t post_to_all(std::span<const std::byte> payload);

  /// A registry hook (see registration above); before start(), else std::logic_error.
  void add_registration(std::shared_ptr<registration> hook);

  /// Binds, listens and starts every thread. Throws std::system_error with a clear message when
  /// the address is taken or io_uring is unavailable (see docs/architecture.md).
  void start();

  /// Stops accepting, answers every accepted call (or fails it with `shutting_down` after the
  /// drain timeout), flushes replies, closes connections and joins all threads. Idempotent;
  /// concurrent callers wait for the one that stops. From a handler or an event of this
  /// server, a worker of one of its pools or a client's I/O thread (where a coroutine handler
  /// goes on after a call) it only starts the stop (on a thread of its own) and returns at
  /// once. After the drain
  /// timeout a handler that ignores cancelled() has its call answered `shutting_down` for it
  /// (its own answer is dropped), and stop() then waits only for such handlers to return,
  /// logging each of them every second (docs/execution.md). ~server() stops likewise.
  void stop();

  /// Blocks until the server has stopped: stop() from another thread or a handler, the
  /// destructor racing it, or (wait_signals::stop) a signal. Returns at once when the server is
  /// not running (start() not called yet, or stopped). Returns the signal that stopped the
  /// server, or 0. A stop by another thread is noticed within 50 ms; a signal at once. With
  /// wait_signals::stop throws std::logic_error while another wait() handles the signals.
  ///
  ///   server.start();
  ///   server.wait(ringrpc::wait_signals::stop);  // Ctrl-C drains and returns
  int wait(wait_signals signals = wait_signals::none);

  /// The bound port (useful with port 0). Valid after start().
  std::uint16_t port() const noexcept;
  /// The TLS listener's bound port (0 without one). Valid after start().
  std::uint16_t tls_port() const noexcept;
  /// Which record layer the TLS listener uses ("userspace OpenSSL"), or "" without one.
  std::string_view tls_record_layer() const noexcept;

  const server_options& options() const noexcept;
  server_stats stats() const;
  std::vector<pool_stats> pool_stats_all() const;

  /// The server's event bus (ringrpc/event_bus.hpp): add queues and subscribe listeners, before
  /// or after start(). A "log" queue feeding the structured log exists already.
  event_bus& events() noexcept;

 private:
  friend class detail::server_seam;  // what libringrpc_ops reads and sets (src/seam/)
  std::unique_ptr<detail::server_core> _core;
};

/// Registers the built-in test methods: "echo" (replies with the payload), "sleep" (payload:
/// ASCII decimal microseconds; sleeps, then replies with the payload) and "burn" (same, but
/// spins the CPU instead of sleeping).
void add_builtin_methods(server& s);

}  // namespace ringrpc

RINGRPC_API_END

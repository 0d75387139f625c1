#pragma once
/// \file The ringrpc server: register methods, start, stop.
///
/// Threads (see docs/architecture.md): one acceptor, `readers` reader rings, `handlers` handler
/// threads and one responder ring. Method handlers run on handler threads, several at once, so
/// they must be thread-safe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ringrpc/status.hpp"

namespace ringrpc {

namespace detail {
struct call;
class frame_encoder;
class server_core;
}  // namespace detail

/// Knobs of one server. Zero for a count means "derive from the CPUs this process may use"
/// (its affinity mask, so `taskset` is honoured). Names in brackets are Hadoop IPC's.
struct server_options {
  std::string host = "127.0.0.1";          ///< address to bind; "0.0.0.0" for all IPv4
  std::uint16_t port = 0;                  ///< 0 picks a free port; see server::port()
  int backlog = 1024;                      ///< listen backlog [ipc.server.listen.queue.size]
  unsigned readers = 0;                    ///< reader rings [ipc.server.read.threadpool.size]
  unsigned handlers = 0;                   ///< handler threads [handler.count]
  unsigned handler_queue_size = 1024;      ///< call queue = handlers x this [ipc.server.handler.queue.size]
  std::uint32_t max_frame_bytes = 16u << 20;  ///< largest frame body accepted [ipc.maximum.data.length]
  /// Past this many reply bytes queued but unwritten on one connection, the server stops
  /// reading that connection until half of it has drained.
  std::size_t max_queued_reply_bytes = 4u << 20;
  /// Past this many calls accepted but not yet answered on one connection, reading pauses.
  unsigned max_inflight_per_connection = 4096;
  /// SO_SNDBUF for accepted sockets; 0 keeps the kernel's default (and its auto-tuning).
  int socket_send_buffer_bytes = 0;
  unsigned recv_buffer_bytes = 16 * 1024;  ///< size of each provided receive buffer
  unsigned recv_buffers_per_reader = 512;  ///< provided buffers per reader ring
  /// How long stop() waits for accepted calls to be answered and written before it cancels.
  std::chrono::milliseconds drain_timeout{5000};
};

/// One call, as a method handler sees it. Valid only during the handler invocation.
class call_context {
 public:
  std::uint64_t call_id() const noexcept;
  std::string_view method() const noexcept;
  /// The request payload; the bytes live until the handler returns.
  std::span<const std::byte> payload() const noexcept;
  /// True when the caller set a deadline.
  bool has_deadline() const noexcept;
  /// Time left before the caller's deadline (negative once passed); max() when none was set.
  std::chrono::nanoseconds remaining() const noexcept;
  /// True for one-way messages, whose reply is discarded.
  bool one_way() const noexcept;

  /// Answers with status ok and `payload`. The last of reply()/fail() wins; with neither, the
  /// caller gets ok with an empty payload.
  void reply(std::span<const std::byte> payload);
  void reply(std::string_view payload) {
    reply(std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload.data()), payload.size()));
  }
  /// Answers with an error status and a message for the caller.
  void fail(status code, std::string_view message);

  call_context(detail::call& c, detail::frame_encoder& enc) noexcept : _call(c), _encoder(enc) {}

 private:
  friend class detail::server_core;
  detail::call& _call;
  detail::frame_encoder& _encoder;
  bool _answered = false;
};

/// A method: runs on a handler thread; an exception becomes an `internal` error reply whose
/// message is what() (the server keeps running).
using method_handler = std::function<void(call_context&)>;

/// Counters of a running server, merged from per-thread counters when read.
struct server_stats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_open = 0;
  std::uint64_t calls_received = 0;     ///< frames that became calls (requests and one-ways)
  std::uint64_t calls_completed = 0;    ///< replies written or discarded for vanished peers
  std::uint64_t calls_rejected_busy = 0;  ///< SERVER_BUSY because the call queue was full
  std::uint64_t bad_frames = 0;         ///< frames that failed verification or limits
  std::uint64_t partial_writes = 0;     ///< writes the kernel took partly; remainder requeued at head
  std::uint64_t reads_paused = 0;       ///< times a connection was paused for back-pressure
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
};

/// An RPC server. Register methods, then start(); stop() (or the destructor) drains and joins.
/// Not copyable. add_method() must happen before start(); the other members are thread-safe.
class server {
 public:
  explicit server(server_options options = {});
  ~server();  ///< stop()s if still running
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Registers `name`. Throws std::invalid_argument on a duplicate or empty name, or after start.
  void add_method(std::string name, method_handler handler);

  /// Binds, listens and starts every thread. Throws std::system_error with a clear message when
  /// the address is taken or io_uring is unavailable (see docs/architecture.md).
  void start();

  /// Stops accepting, answers every accepted call (or fails it with `shutting_down` after the
  /// drain timeout), flushes replies, closes connections and joins all threads. Idempotent.
  void stop();

  /// The bound port (useful with port 0). Valid after start().
  std::uint16_t port() const noexcept;

  const server_options& options() const noexcept;
  server_stats stats() const;

 private:
  std::unique_ptr<detail::server_core> _core;
};

/// Registers the built-in test methods: "echo" (replies with the payload), "sleep" (payload:
/// ASCII decimal microseconds; sleeps, then replies with the payload) and "burn" (same, but
/// spins the CPU instead of sleeping).
void add_builtin_methods(server& s);

}  // namespace ringrpc

#pragma once
/// \file The ringrpc client: connections, synchronous and asynchronous calls, deadlines.
///
/// A client_runtime is one I/O thread with one io_uring; any number of clients (connections)
/// can share it. Calls may be made from any thread. Callbacks run on the runtime's thread: keep
/// them short and never block in them (a synchronous call() from a callback is refused).
///
/// Limits: each connection takes at most client_options::max_pending_calls calls (and one-way
/// messages) and about max_pending_bytes of request bytes that are queued or in flight; beyond
/// that a call fails at once with call_error::client_busy instead of queueing without bound.
/// A call whose local deadline passes is failed with call_error::timeout and a Cancel frame is
/// sent for it, so the server drops it if still queued and its handler sees cancelled().
///
/// Deadlines and cancellation propagate (docs/execution.md, "Deadlines and cancellation"): a
/// call made from a server handler (on its thread, while it runs) ends by that handler's
/// deadline and is cancelled with it; call_options::parent names the incoming call from
/// elsewhere, call_options::detached opts out, call_options::cancel cancels one call. An
/// already expired deadline fails at once without sending anything. Blocking waits (call(),
/// connect(), a reply_future's get()) on a client runtime's thread throw std::logic_error at
/// once instead of hanging; sync calls have a finite default deadline (sync_call_timeout).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/call_parent.hpp"
#include "ringrpc/interceptor.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/reply_future.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class record_layer;    // ringrpc/record_layer.hpp
class client_stream;   // ringrpc/client_stream.hpp
struct stream_options;  // ringrpc/client_stream.hpp

namespace detail {
class client_loop;
struct client_conn;
struct client_access;  // src/client/client_access.hpp: the library's own layers above a client
/// Where an object that typed stubs call through (a client, a channel) lives now: moves update
/// it, destruction clears it. Stubs hold it shared, so they follow the object through moves
/// (ringrpc/service.hpp). Read by calling threads, written by moves: as close(), a move must
/// not race with calls.
template <class T>
struct object_home {
  std::atomic<T*> at{nullptr};
};
}  // namespace detail

/// Why a call did not produce a reply payload.
enum class call_error {
  none = 0,           ///< the server answered with status ok
  server_status,      ///< the server answered with an error status (see code and message)
  timeout,            ///< the local deadline passed before the reply came
  connection_closed,  ///< the connection closed or failed with the call in flight
  protocol_error,     ///< the server sent something that is not a valid ringrpc frame
  client_closed,      ///< close() was called, or the call was made after it
  client_busy,        ///< refused at once: the connection's max_pending_calls or
                      ///< max_pending_bytes was reached (nothing was sent; retrying later is safe)
  /// Cancelled here: call_options::cancel was requested, or the parent call (call_options::
  /// parent, or the handler's call the call was made from) was cancelled. The code is
  /// status::cancelled; a Cancel frame went to the server if the request had been queued.
  cancelled,
  /// A client or channel interceptor (ringrpc/interceptor.hpp) refused the call before it was
  /// sent (code and message are its verdict's), or threw (code internal, message "client
  /// interceptor threw: ..."; the reply, if any, is dropped).
  intercepted,
};

/// Stable lower-case name, e.g. "timeout".
std::string_view to_string(call_error e) noexcept;

/// The outcome of a call as a callback sees it: views valid only during the callback.
struct call_outcome {
  call_error error = call_error::none;
  status code = status::ok;            ///< the server's status (ok unless server_status)
  std::string_view message;            ///< the server's or the client's explanation
  std::span<const std::byte> payload;  ///< reply payload when error == none
  std::uint32_t retry_after_ms = 0;    ///< hint sent with server_busy
  bool ok() const noexcept { return error == call_error::none; }
  // --- Response metadata and error details (docs/protocol.md 3.2, 3.3): what the server's
  // handler added (call_context::add_header / add_trailer / fail with details), checked
  // against client_options::max_response_metadata_*; empty from a server that predates them.
  metadata_view headers;                ///< response headers, with an ok answer or an error
  metadata_view trailers;               ///< response trailers
  std::span<const std::byte> details;   ///< structured error details (server_status only)
};

/// An owning copy of a call_outcome, as synchronous calls and futures return it.
struct call_result {
  call_error error = call_error::none;
  status code = status::ok;
  std::string message;
  std::vector<std::byte> payload;
  std::uint32_t retry_after_ms = 0;
  bool ok() const noexcept { return error == call_error::none; }
  std::string_view payload_string() const noexcept {
    return {reinterpret_cast<const char*>(payload.data()), payload.size()};
  }
  static call_result from(const call_outcome& o);
  // --- Response metadata and error details, owned copies of call_outcome's
  std::vector<metadata_entry> headers;
  std::vector<metadata_entry> trailers;
  std::vector<std::byte> details;
  /// The value of header (trailer) `key`; nullptr when the answer has none.
  const std::string* find_header(std::string_view key) const noexcept;
  const std::string* find_trailer(std::string_view key) const noexcept;
};

using call_callback = std::function<void(const call_outcome&)>;

struct call_options {
  /// Time budget. Sent to the server (which will not start the call after it passes) and
  /// enforced here: the callback gets call_error::timeout at the latest this long after the
  /// call was made, and a Cancel frame tells the server to give up on it (a late reply is
  /// dropped, including one the client reads only after the deadline: the call still ends
  /// with call_error::timeout, whatever the reply said). Zero: the client's default_timeout.
  /// Negative: the deadline has passed already, so the call fails at once with
  /// call_error::timeout and status::deadline_exceeded and nothing is sent. Beyond 10^15 us
  /// (31 years; e.g. nanoseconds::max() from a handler's remaining() without a deadline, cast
  /// down): no deadline, never an overflow. A call with a parent (below) ends by the parent's
  /// deadline too, whichever comes first.
  std::chrono::microseconds timeout{0};
  /// Per-call metadata (ringrpc/metadata.hpp), sent with this call after the connection's own
  /// (client_options::metadata): a key set here replaces the connection's pair of that key.
  /// Keys must be lowercase tokens and unique, and the whole within the server's caps
  /// (default 32 pairs, 8 KiB), or the server answers bad_request. E.g.
  /// {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}.
  std::vector<metadata_entry> metadata;

  // --- Deadlines and cancellation (docs/execution.md, "Deadlines and cancellation")
  /// The incoming call this one is made for: it inherits the parent's remaining deadline and
  /// is cancelled (call_error::cancelled, Cancel frame) when the parent is. Empty: the call
  /// made on a handler's thread while the handler runs has that handler's call as its parent
  /// anyway; set it for calls made later or elsewhere (from a deferred_reply). A parent that
  /// is cancelled already fails the call at once, nothing sent.
  call_parent parent;
  /// True: no parent, implicit or explicit; the call keeps only its own deadline and is not
  /// cancelled with the handler's call (work that must finish whatever the caller does).
  bool detached = false;
  /// Per-call cancellation: once stop is requested on this token's source the call fails with
  /// call_error::cancelled (at once if stop was requested before the call was made, nothing
  /// sent), and a Cancel frame tells the server, whose handler sees cancelled() and its
  /// on_cancel hooks. request_stop() may come from any thread; the callback runs on the
  /// runtime thread as for any other outcome. A stop requested after the call ended does
  /// nothing. Costs nothing when left empty.
  std::stop_token cancel;
};

struct client_options {
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::microseconds default_timeout{0};  ///< zero: calls have no deadline
  /// The deadline of a synchronous call() (and channel and typed synchronous calls) that has
  /// none from call_options::timeout or default_timeout: a sync call never waits forever on a
  /// hung peer. A parent call's earlier deadline still wins. Beyond 10^15 us: none (wait as
  /// long as it takes).
  std::chrono::microseconds sync_call_timeout{std::chrono::seconds(30)};
  /// Largest reply body accepted; a larger length prefix fails the connection with
  /// protocol_error before anything is reserved for it.
  std::uint32_t max_frame_bytes = 64u << 20;
  /// Calls and one-way messages that may be queued or in flight on the connection at once. A
  /// call counts from call_async() until its callback has run and its request has left for
  /// the socket (a timed-out call still waiting to be written keeps counting). Beyond it,
  /// calls fail at once with client_busy. The server's own window per connection is smaller
  /// (server_options::max_inflight_per_connection, 256 by default): the rest wait in buffers.
  std::uint32_t max_pending_calls = 4096;
  /// Request bytes (encoded frames) that may be queued or in flight on the connection. Checked
  /// before a call is added, so a single request larger than this is still accepted when less
  /// is pending; beyond it, client_busy.
  std::size_t max_pending_bytes = 64u << 20;
  /// Sent with every call and one-way message of the connection.
  std::vector<metadata_entry> metadata;
  /// Non-empty: every call and one-way message carries `authorization: Bearer <token>`, for a
  /// server that checks bearer tokens (docs/security.md). Plaintext on the wire: for trusted
  /// networks only. Never logged by ringrpc.
  std::string bearer_token;
  /// TLS to the server: a client context of ringrpc-tls (ringrpc::tls_context::client with
  /// the CA, an optional client certificate, the server name, `insecure`). Null: plaintext.
  /// Calls made while the handshake runs wait for it; a failed handshake fails them with
  /// connection_closed and the reason.
  std::shared_ptr<record_layer> tls;
  // --- Caps on response metadata
  /// Caps on response metadata (call_outcome::headers / trailers), against a hostile or
  /// broken server: headers and trailers of one answer together at most this many pairs and
  /// this many bytes of keys plus values, with well-formed keys unique within each list. An
  /// answer beyond them fails its call with call_error::protocol_error and a message naming
  /// the cap; the connection and its other calls go on. Defaults: the server's own caps on
  /// request metadata (and on what its handlers add), so ringrpc peers with defaults agree.
  std::uint32_t max_response_metadata_entries = default_max_metadata_entries;
  std::uint32_t max_response_metadata_bytes = default_max_metadata_bytes;
  /// Interceptors around every call and one-way message of the connection
  /// (ringrpc/interceptor.hpp), in order: the first is the outermost. For a channel's members
  /// (channel_options::client) they see each attempt; channel_options::interceptors see each
  /// logical call once. Empty (the default): a call pays one test for them.
  client_interceptors interceptors;
};

/// One I/O thread with its own ring. Shared by the clients created with it; lives as long as
/// the last of them (and the caller's handle).
class client_runtime {
 public:
  /// Starts the thread. Throws std::system_error naming the cause if io_uring is unavailable.
  static std::shared_ptr<client_runtime> create();
  ~client_runtime();
  client_runtime(const client_runtime&) = delete;
  client_runtime& operator=(const client_runtime&) = delete;

  /// True on the runtime's own thread (inside callbacks).
  bool in_runtime_thread() const noexcept;

 private:
  friend class client;
  friend struct detail::client_access;
  client_runtime();
  std::unique_ptr<detail::client_loop> _loop;
};

/// One connection to a ringrpc server. Many calls may be in flight at once (pipelining); each
/// is matched to its reply by call id. Thread-safe. Not copyable; movable.
class client {
 public:
  /// Connects (blocking, bounded by connect_timeout). Throws std::system_error: ECONNREFUSED
  /// for a refused connection, ETIMEDOUT, or the io_uring probe's explanation. With no runtime
  /// given the client gets a private one. Throws std::logic_error at once on a client
  /// runtime's thread (inside a callback), where blocking would stall every connection of
  /// that runtime: connect from another thread.
  static client connect(const std::string& host, std::uint16_t port, client_options options = {},
                        std::shared_ptr<client_runtime> runtime = nullptr);

  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  ~client();  ///< close()s

  /// Asynchronous call: `done` runs exactly once, on the runtime thread; except that a call
  /// refused at once (client_busy, client_closed after close(), an expired deadline, a call
  /// cancelled before it was sent) runs `done` before call_async returns, on the calling
  /// thread. So a callback that retries at once on client_busy recurses: back off (or give
  /// up) instead. Either way an exception thrown by `done` is caught and reported on stderr
  /// ("ringrpc: a call callback threw: ..."), never passed to call_async's caller nor the
  /// runtime: a callback handles its own errors.
  void call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                  call_options options = {});
  /// Future-returning call. Its get()/wait() throw std::logic_error on a client runtime's
  /// thread while the reply is not there yet (reply_future.hpp): it could never come.
  reply_future<call_result> call_future(std::string_view method, std::span<const std::byte> payload,
                                       call_options options = {});
  /// Synchronous call. Its deadline: call_options::timeout, else default_timeout, else
  /// sync_call_timeout (30 s by default), capped by the parent call's. Throws
  /// std::logic_error if made on a client runtime's thread (it would wait forever there).
  call_result call(std::string_view method, std::span<const std::byte> payload,
                   call_options options = {});
  call_result call(std::string_view method, std::string_view payload, call_options options = {}) {
    return call(method, std::span(reinterpret_cast<const std::byte*>(payload.data()), payload.size()),
                options);
  }
  /// One-way message: queued for sending, never answered. False when it was refused (the
  /// client is closed, or the connection's pending limits were reached) and nothing was sent.
  bool send_one_way(std::string_view method, std::span<const std::byte> payload);
  /// One-way message with per-call options: `options.metadata` is sent as a call's is (after
  /// the connection's own); `options.timeout` is sent as the frame's budget, which the server
  /// uses to drop the message if it is still queued when the budget has passed.
  bool send_one_way(std::string_view method, std::span<const std::byte> payload, const call_options& options);

  /// Opens a stream (include ringrpc/client_stream.hpp): `request` is a server stream's one
  /// request (ignored for the other kinds). Never blocks and never fails by throwing (but
  /// std::bad_alloc): a stream that cannot open is returned ended, finish() saying why
  /// (client_busy, client_closed, an expired deadline, interceptors). A server that predates
  /// streams ends it with status::unimplemented, "the server does not support streams".
  client_stream open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                            const stream_options& options);
  client_stream open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request = {});

  /// Fails every pending call with client_closed and closes the socket. Idempotent; waits for
  /// the runtime to finish unless called from the runtime thread. Calls may come from many
  /// threads at once, but close() (and the destructor) must not race with them: stop the
  /// calling threads first. No Cancel frames are sent: a ringrpc server treats a closed
  /// connection as the cancellation of every call on it (docs/protocol.md, Cancelled).
  void close();

  /// False once the connection failed or was closed.
  bool connected() const noexcept;

  const std::shared_ptr<client_runtime>& runtime() const noexcept { return _runtime; }

  /// For typed stubs: the cell that follows this client through moves (detail::object_home).
  const std::shared_ptr<detail::object_home<client>>& home() const noexcept { return _home; }

 private:
  friend struct detail::client_access;
  client(std::shared_ptr<client_runtime> rt, detail::client_conn* conn,
         std::shared_ptr<detail::object_home<client>> home) noexcept;
  std::shared_ptr<client_runtime> _runtime;
  detail::client_conn* _conn = nullptr;
  std::shared_ptr<detail::object_home<client>> _home;  // one per connection, made by connect()
};

}  // namespace ringrpc

RINGRPC_API_END

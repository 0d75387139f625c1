#pragma once
/// \file Streaming calls on the server: the handle a stream handler writes and ends its stream
/// through, the handler's callbacks, and the factory a stream method is registered with
/// (server::add_stream_method). The wire and the credit rules are docs/design/streams.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

struct peer_identity;  // ringrpc/peer_identity.hpp

namespace detail {
class stream_state;
}  // namespace detail

/// Who sends messages on a stream besides its opening request.
enum class stream_kind : std::uint8_t {
  server = 1,  ///< one request (the StreamOpen's payload), then messages from the server
  client = 2,  ///< messages from the client, then one answer from the server (finish(reply))
  bidi = 3,    ///< messages both ways, independently
};

std::string_view to_string(stream_kind k) noexcept;

/// What server_stream::write() did with a message.
enum class write_result : std::uint8_t {
  ok,           ///< taken: it goes to the client in order, after the messages written before
  would_block,  ///< no send credit now: nothing was taken; on_writable() says when to retry
  closed,       ///< the stream has ended (or the server is out of memory): nothing was taken
};

/// A stream as its handler sees it. Copyable and thread-safe: every copy names the same stream,
/// and any thread may write or end it, also after the callback that got it has returned. Copies
/// may outlive the stream (and the server): every operation on an ended stream is a no-op that
/// says so.
class server_stream {
 public:
  /// Made by the server; a default-made handle names no stream (every write is `closed`).
  server_stream() noexcept = default;
  explicit server_stream(std::shared_ptr<detail::stream_state> state) noexcept;

  /// Sends one message, never blocking: `would_block` when the client's credit is used up (the
  /// stream's on_writable() follows once it grants more), `closed` after the end.
  write_result write(std::span<const std::byte> message) noexcept;
  write_result write(std::string_view message) noexcept {
    return write(std::span<const std::byte>(reinterpret_cast<const std::byte*>(message.data()), message.size()));
  }
  /// Ends the stream with status ok and the trailers added so far. False when it had ended.
  bool finish() noexcept;
  /// Ends the stream with status ok, its end carrying `reply` as a unary reply does: a client
  /// stream's one answer (any kind may end so). False when it had ended.
  bool finish(std::span<const std::byte> reply) noexcept;
  bool finish(std::string_view reply) noexcept {
    return finish(std::span<const std::byte>(reinterpret_cast<const std::byte*>(reply.data()), reply.size()));
  }
  /// Ends the stream with an error (never ok on the wire: ok becomes internal). False when it
  /// had ended.
  bool fail(status code, std::string_view message) noexcept;
  /// A response header, sent with the stream's first frame (message or end); false once that
  /// frame is on its way, or on a bad key or value.
  bool add_header(std::string_view key, std::string_view value) noexcept;
  /// A trailer, sent with the stream's end; false once the stream has ended.
  bool add_trailer(std::string_view key, std::string_view value) noexcept;

  /// Stops handing this stream's messages (and its half-close, which follows them) to the
  /// handler until resume_reading(). They wait within the credit the server granted, which comes
  /// back only as they are handled, so the client is held back too: what a handler that cannot
  /// write as fast as it reads (an echo whose client does not read) does instead of keeping
  /// messages without bound. Any thread; on_writable and the end's callbacks still run.
  void pause_reading() noexcept;
  /// Hands the waiting messages on again, in order (from the stream's callbacks' thread, after
  /// the callback that calls it returns).
  void resume_reading() noexcept;

  std::uint64_t call_id() const noexcept;
  /// The method the client opened; empty for a handle that names no stream.
  std::string_view method() const noexcept;
  stream_kind kind() const noexcept;
  /// The metadata the client sent with the open, in order (a ringrpc client sends its
  /// connection's pairs, then the open's); empty for a handle that names no stream. Lives as
  /// long as the stream's handles.
  std::span<const metadata_entry> metadata() const noexcept;
  /// Who the peer proved to be at the open (a TLS client certificate, an accepted token), as
  /// call_context::peer() says for a call; null for nobody. Lives as long as the stream's
  /// handles, whatever becomes of the connection.
  const peer_identity* peer() const noexcept;
  /// A note a server interceptor attached to the open (call_context::annotate in its
  /// before_call: an authenticated user, a tenant), as call_context::annotation gives a call's
  /// handler; nullopt when there is none (always, on a server without interceptors). Lives as
  /// long as the stream's handles.
  std::optional<std::string_view> annotation(std::string_view key) const noexcept;
  /// Time left before the client's deadline (negative once passed); max() when none was set.
  std::chrono::nanoseconds remaining() const noexcept;
  /// True once the stream has ended, whoever ended it (the handler, a cancel, the deadline,
  /// the connection, the server stopping).
  bool ended() const noexcept;

 private:
  std::shared_ptr<detail::stream_state> _state;
};

/// One stream's callbacks. They run on the method's pool, one at a time and in arrival order
/// per stream (different streams run in parallel); none runs after on_done(). A callback that
/// throws fails the stream with `internal`.
class stream_handler {
 public:
  virtual ~stream_handler() = default;
  /// A message from the client (client and bidi streams). The bytes live until it returns;
  /// the client's credit for it comes back once it has.
  virtual void on_message(server_stream& stream, std::span<const std::byte> message) {
    (void)stream;
    (void)message;
  }
  /// The client sends nothing more (every message it sent before came first).
  virtual void on_half_close(server_stream& stream) { (void)stream; }
  /// A write() said would_block and credit has come back since: write again.
  virtual void on_writable(server_stream& stream) { (void)stream; }
  /// The stream ended other than by this handler's finish()/fail(): the client cancelled, the
  /// deadline passed, the connection went, the server is stopping or out of memory, or the
  /// client broke the stream's rules (wrote beyond its credit, granted credit that overflows, a
  /// message on a server stream or after its half-close). on_done() follows.
  virtual void on_cancel(server_stream& stream) { (void)stream; }
  /// The last callback, with the status the stream ended with.
  virtual void on_done(status final_status) { (void)final_status; }
};

/// Makes the handler of a stream as it opens, on the method's pool (before any other callback
/// of that stream). `request` is a server stream's one request and empty for the other kinds;
/// its bytes live until the factory returns. It may write, or even end the stream, through
/// `stream` before returning. Returning null without ending the stream fails it with `internal`.
using stream_factory =
    std::function<std::unique_ptr<stream_handler>(server_stream& stream, std::span<const std::byte> request)>;

}  // namespace ringrpc

RINGRPC_API_END

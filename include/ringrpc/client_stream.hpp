#pragma once
/// \file Streaming calls on the client: the handle client::open_stream() returns. The wire and
/// the credit rules are docs/design/streams.md.
///
/// Threads: the client runtime's thread receives the server's frames and queues each stream's
/// messages on the stream itself; user threads write, read and end it through the handle. Any
/// thread may call any operation (the handle is thread-safe), but messages written from several
/// threads at once have no order among them. The blocking operations (write_wait, read,
/// finish) throw std::logic_error on a client runtime's thread, where they would wait forever.
/// Coroutines await the same operations without blocking: ringrpc/stream_coro.hpp.
///
/// Memory: unread messages are bounded by the receive window announced at the open
/// (stream_options::window_*; a message beyond it ends the stream with protocol_error), plus
/// one message; each message read returns its credit to the server, in batches of half the
/// window. Written messages are bounded by the server's credit and, until they have left for
/// the server, by the connection's client_options::max_pending_bytes, which they share with the
/// calls: write() says would_block when either is used up.
///
/// Ends: exactly one, whichever comes first: the server's answer (status ok or its error, with
/// trailers), cancel() or the handle's destruction (cancelled), the stream's deadline
/// (timeout, deadline_exceeded; a Cancel goes to the server), the connection lost (unavailable
/// "connection lost: ..."), the client closed (client_closed, cancelled), a server that broke
/// the stream's rules (protocol_error: more than the credit, response metadata past the
/// client's caps). Unlike a unary call's, the end's status code is set for the client's own
/// ends too (as listed). Messages that arrived before the end stay readable in order, except
/// after cancel(), which drops them. A handle may outlive its client: once the client is
/// closed (which may race with the handle's operations) its streams have ended.
///
/// A stream holds one of its client's max_pending_calls from open_stream() until its end, and
/// its id comes from the same space as the client's call ids. A channel opens streams on one of
/// its members' connections (channel::open_stream) and hands out the same handle. The client's
/// interceptors (client_options::interceptors) see the open, which they may add metadata to or
/// refuse, and the end, once (ringrpc/interceptor.hpp, "Streams"). Not yet:
/// call_options::parent and cancel tokens.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace detail {
struct client_stream_state;
}  // namespace detail

/// How client::open_stream() opens a stream.
struct stream_options {
  /// The stream's whole budget, from open to end: sent to the server (which ends the stream
  /// with deadline_exceeded when it passes) and enforced here (the stream ends with
  /// call_error::timeout, code deadline_exceeded, and a Cancel goes to the server). Zero: the
  /// client's default_timeout; zero there too: no deadline (sync_call_timeout does not apply:
  /// streams may last). Negative: passed already; the stream ends at once, nothing sent.
  std::chrono::microseconds timeout{0};
  /// Sent with the open after the connection's own, as call_options::metadata.
  std::vector<metadata_entry> metadata;
  /// The receive window: how many messages, and how many payload bytes, the server may send
  /// before the reader has read any. Zero: the protocol's default (16 messages, 256 KiB).
  std::uint32_t window_messages = 0;
  std::uint64_t window_bytes = 0;
};

/// One open stream. Movable, not copyable; the destructor cancels a stream that has not ended.
/// A default-made handle names no stream: it is ended, and every operation says so.
class client_stream {
 public:
  /// Wait without a limit of the call's own (the stream's deadline, if any, still ends it).
  static constexpr std::chrono::nanoseconds forever = std::chrono::nanoseconds::max();

  client_stream() noexcept = default;
  explicit client_stream(std::shared_ptr<detail::client_stream_state> state) noexcept;
  client_stream(client_stream&&) noexcept = default;
  /// Cancels the stream this handle named (if it had not ended), then takes `other`'s.
  client_stream& operator=(client_stream&& other) noexcept;
  ~client_stream();  ///< cancel()s

  /// Sends one message, never blocking: `ok` once it is queued for the server (in order after
  /// the messages written before it), `would_block` when the server's credit is used up or
  /// the connection's max_pending_bytes is full of bytes not sent yet (nothing taken: read, or
  /// write_wait), `closed` after the end or the half-close, or on a
  /// server stream (its client sends only the opening request).
  write_result write(std::span<const std::byte> message);
  write_result write(std::string_view message) {
    return write(std::span<const std::byte>(reinterpret_cast<const std::byte*>(message.data()), message.size()));
  }
  /// write(), waiting up to `timeout` for credit: `would_block` when it did not come in time.
  write_result write_wait(std::span<const std::byte> message, std::chrono::nanoseconds timeout = forever);
  write_result write_wait(std::string_view message, std::chrono::nanoseconds timeout = forever) {
    return write_wait(std::span<const std::byte>(reinterpret_cast<const std::byte*>(message.data()), message.size()),
                      timeout);
  }

  /// The next message from the server, in order, waiting up to `timeout` for it. Empty at the
  /// end (every message before it has been read: finish() says why), and when `timeout`
  /// passed first (ended() tells the two apart). Reading returns the message's credit.
  std::optional<std::vector<std::byte>> read(std::chrono::nanoseconds timeout = forever);

  /// Tells the server that no more messages come (client and bidi streams). False when it
  /// had been said already, the stream has ended, or it is a server stream.
  bool half_close();
  /// Ends the stream at once with status cancelled (unread messages are dropped) and sends
  /// Cancel to the server. False when it had ended already.
  bool cancel();
  /// Waits up to `timeout` for the end, discarding the messages not read yet (so that a
  /// server held back by credit can reach its end), and returns it: error none and code ok
  /// for the server's ok, else what ended it, with message, headers, trailers and details;
  /// `payload` is a client stream's answer (the server's finish(reply)), empty otherwise.
  /// When `timeout` passes first, the stream is cancelled and the result is call_error::
  /// timeout, code deadline_exceeded. Later calls return the same end again.
  call_result finish(std::chrono::nanoseconds timeout = forever);

  /// True once the stream has ended (messages may still be readable).
  bool ended() const noexcept;
  /// The stream's id on its connection (from the client's call ids); 0 for no stream.
  std::uint64_t id() const noexcept;
  stream_kind kind() const noexcept;
  /// The server's response headers, once its first frame (message or end) has come; empty
  /// before, or when it sent none.
  std::vector<metadata_entry> headers() const;
  /// Payload bytes received and not yet read: at most the receive window plus one message.
  std::size_t buffered_bytes() const noexcept;

 private:
  friend struct detail::client_access;
  std::shared_ptr<detail::client_stream_state> _state;
};

}  // namespace ringrpc

RINGRPC_API_END

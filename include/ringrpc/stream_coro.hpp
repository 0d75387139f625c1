#pragma once
/// \file co_await on streams: reads that wait for a message, writes that wait for credit, on a
/// client's stream and in a coroutine stream handler (docs/execution.md, "Coroutines and
/// streams"; the credit rules are docs/design/streams.md).
///
///     // Client: a coroutine that sends three messages and reads what comes back.
///     ringrpc::client_stream s = c.open_stream("echo_stream", ringrpc::stream_kind::bidi, {});
///     for (std::string_view m : {"a", "b", "c"}) co_await ringrpc::co_write(s, m);
///     s.half_close();
///     while (auto m = co_await ringrpc::co_read(s)) use(*m);
///     ringrpc::call_result end = co_await ringrpc::co_finish(s);
///
///     // Server: a bidi echo written as one coroutine per stream.
///     ringrpc::add_coroutine_stream_method(server, "echo", ringrpc::stream_kind::bidi,
///         [](ringrpc::coro_stream& s) -> ringrpc::task<void> {
///           while (auto m = co_await ringrpc::co_read(s)) {
///             if (co_await ringrpc::co_write(s, *m) != ringrpc::write_result::ok) co_return;
///           }
///           s.stream().finish();
///         });
///
/// What waits, and what wakes it:
/// - co_read waits for the next message or the end; co_write waits while the peer's credit is
///   used up (and, on a client, while the connection's max_pending_bytes is full of bytes not
///   sent yet), and returns `closed` once the stream has ended or been half-closed. Neither
///   polls: the thread that receives the message, the grant or the end wakes the coroutine.
/// - Where it resumes is ringrpc/coro.hpp's rule: a coroutine handler's frame (unary or
///   stream) at its home, any other coroutine inline on the thread that woke it (the client's
///   I/O thread for an arrival or a grant), under the restrictions of a call_async callback.
/// - One reader and one writer at a time per stream: a second coroutine that awaits co_read
///   (or co_finish) while one waits, or co_write while one waits, gets std::logic_error.
///   Blocking read()/write_wait() on other threads may be mixed in; a coroutine woken for a
///   message another thread took waits again.
/// - In a coroutine handler's frame, a co_read, co_write or co_finish on a client stream that
///   is waiting is part of the frame's cancellation: when the server stops (past its
///   drain_timeout) the stream is cancelled, and the coroutine resumes with the end.
/// - The message a co_write is given need only stay valid until its co_await returns (it is
///   copied when written).
///
/// Costs: each of these is a ringrpc::task, its frame from the per-thread frame pool (no heap
/// allocation once warm); a wait takes and gives back the stream's lock once more than the
/// non-waiting path. A client co_read hands over the message's own vector, as read() does.

#include "ringrpc/cxx20.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/export.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/task.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

// --- A client's stream (ringrpc/client_stream.hpp)

/// The next message from the server, in order, once there is one: empty at the end (every
/// message before it has been read; co_finish() says why). Returns its credit, as read() does.
task<std::optional<std::vector<std::byte>>> co_read(client_stream& stream);

/// write(), waiting for credit and for room in the connection's max_pending_bytes: `ok` once
/// queued for the server, `closed` after the end or the half-close, or on a server stream.
task<write_result> co_write(client_stream& stream, std::span<const std::byte> message);
inline task<write_result> co_write(client_stream& stream, std::string_view message) {
  return co_write(stream, std::as_bytes(std::span(message.data(), message.size())));
}

/// finish() without a limit of its own: discards the messages not read yet (returning their
/// credit, so a server held back by it can reach its end), waits for the end and returns it.
/// The stream's deadline, if it has one, still ends it.
task<call_result> co_finish(client_stream& stream);

// --- A coroutine stream handler (add_coroutine_stream_method)

namespace detail {
class coro_stream_state;
}  // namespace detail

/// What a coroutine stream handler gets: its stream, its request, and the messages the client
/// sends, read with co_read. Made by the server; valid for the handler's whole run.
class coro_stream {
 public:
  explicit coro_stream(std::shared_ptr<detail::coro_stream_state> state) noexcept;

  /// The stream: write() without waiting, finish(), fail(), headers and trailers, metadata(),
  /// peer(), remaining() (ringrpc/stream.hpp).
  server_stream& stream() noexcept;
  /// A server stream's one request (empty for the other kinds). A copy: it lives as long as
  /// the handler runs.
  std::span<const std::byte> request() const noexcept;

 private:
  friend task<std::optional<std::span<const std::byte>>> co_read(coro_stream& stream);
  friend task<write_result> co_write(coro_stream& stream, std::span<const std::byte> message);
  std::shared_ptr<detail::coro_stream_state> _state;
};

/// The next message from the client, in order, once there is one: empty once the client has
/// half-closed (every message before has been read), when the stream has ended, and at once on
/// a server stream (whose only input is request()). The bytes stay valid until the next co_read
/// on this stream, or the handler's end. One message waits for the handler at a time: the next
/// is handed on only when co_read is called again, so a handler that does not read holds its
/// client back within the credit, as pause_reading does.
task<std::optional<std::span<const std::byte>>> co_read(coro_stream& stream);

/// stream().write(), waiting while the client's credit is used up (or the connection's
/// stream bytes on their way are at their cap): `ok` once queued, `closed` once the stream
/// has ended.
task<write_result> co_write(coro_stream& stream, std::span<const std::byte> message);
inline task<write_result> co_write(coro_stream& stream, std::string_view message) {
  return co_write(stream, std::as_bytes(std::span(message.data(), message.size())));
}

namespace coro_abi {

/// A coroutine stream handler with its type erased (as coro_handler_fn, ringrpc/coro_handler.hpp).
struct coro_stream_fn {
  std::shared_ptr<void> object;
  task<void> (*invoke)(void* object, coro_stream& stream) = nullptr;
};

template <class F>
coro_stream_fn erase_coro_stream_handler(F handler) {
  return {std::make_shared<F>(std::move(handler)),
          [](void* object, coro_stream& stream) -> task<void> { return (*static_cast<F*>(object))(stream); }};
}

/// The factory's work: starts `fn` for `stream` as a handler frame on this pool thread (until
/// it first waits) and returns the stream's callbacks, which feed it. Ends the stream with
/// shutting_down (and returns null) once the server has stopped waiting for handler frames.
std::unique_ptr<stream_handler> start_coro_stream(server& s, const coro_stream_fn& fn, server_stream& stream,
                                                  std::span<const std::byte> request);

}  // namespace coro_abi

/// A streaming method whose handler is a coroutine, as server::add_stream_method (its pool,
/// limits, errors). `handler` is called as `handler(coro_stream&)` and returns task<void>; it
/// runs on the method's pool and resumes there. It is a handler frame like a coroutine method's
/// (ringrpc/coro_handler.hpp): stop() waits for it, and cancels what it awaits once the drain
/// timeout has passed (the stream itself ends when the server stops, which wakes its co_read
/// and co_write). A handler that returns without ending the stream ends it with `internal`
/// "coroutine stream handler finished without ending the stream"; an exception that leaves it
/// ends it with `internal` and its what().
template <class F>
void add_coroutine_stream_method(server& s, std::string name, stream_kind kind, F handler) {
  s.add_stream_method(std::move(name), kind,
                      [&s, fn = coro_abi::erase_coro_stream_handler(std::move(handler))](
                          server_stream& stream, std::span<const std::byte> request) {
                        return coro_abi::start_coro_stream(s, fn, stream, request);
                      });
}

}  // namespace ringrpc

RINGRPC_API_END

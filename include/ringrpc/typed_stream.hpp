#pragma once
/// \file Typed streams: what the headers `ringrpc-gen` writes for a streaming method of an
/// rpc_service (`Watch(Req): Rep (streaming: "server")`, also "client" and "bidi") build on.
/// They are the raw streams of ringrpc/stream.hpp and ringrpc/client_stream.hpp with each
/// message a FlatBuffers table: the same credit, the same back-pressure results, the same ends.
/// docs/services.md, "Typed streams", shows both sides.
///
/// Verification: every message is verified as its table before a handler or a reader sees it.
/// A client message the server cannot verify (or a server stream's request) fails the stream
/// with `bad_request` "Service.Method: message is not a valid T (FlatBuffers verification
/// failed)", as a unary typed call answers a bad request. A server message the client cannot
/// verify cancels the stream; read() returns that error and finish() returns call_error::
/// protocol_error with the same kind of message.

#include <flatbuffers/flatbuffers.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/client_stream.hpp"
#include "ringrpc/service.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/stream_coro.hpp"
#include "ringrpc/task.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// A typed stream as its server-side handler sees it: server_stream with messages of type
/// Reply. Copyable and thread-safe, as server_stream is (every copy names the same stream).
/// Lifetimes: the `typed_server_stream<Reply>&` a generated service's method gets, and a server
/// stream's `const Request&`, are valid only until that method returns (the first is a local of
/// the stream's factory, the second points into a request released after the open). A handler
/// that writes later keeps a copy of the stream (`typed_server_stream<Reply> s = stream;`) and of
/// what it needs from the request, not the references.
template <class Reply>
class typed_server_stream {
 public:
  typed_server_stream() noexcept = default;
  explicit typed_server_stream(server_stream raw) noexcept : _raw(std::move(raw)) {}

  /// Finishes `fbb` with `root` and writes it (server_stream::write: ok, would_block with
  /// on_writable() to follow, closed). `fbb` is cleared either way: a message that was not
  /// taken is built again when the handler retries.
  /// Out of memory finishing `fbb` ends the stream with `resource_exhausted` "server is out of
  /// memory" and returns closed, as server_stream::write does when it cannot take a message.
  write_result write(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Reply> root) noexcept {
    write_result r = write_result::closed;
    try {
      r = _raw.write(detail::finish(fbb, root));
    } catch (...) {
      out_of_memory();
    }
    fbb.Clear();
    return r;
  }
  /// Ends the stream with status ok.
  bool finish() noexcept { return _raw.finish(); }
  /// Ends the stream with status ok and `root` as its answer (a client stream's one reply).
  /// Out of memory finishing `fbb` ends it with `resource_exhausted` instead and returns false.
  bool finish(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Reply> root) noexcept {
    bool ended = false;
    try {
      ended = _raw.finish(detail::finish(fbb, root));
    } catch (...) {
      out_of_memory();
    }
    fbb.Clear();
    return ended;
  }
  /// Ends the stream with an error (ok becomes internal).
  bool fail(status code, std::string_view message) noexcept { return _raw.fail(code, message); }
  /// The raw stream: headers, trailers, pause_reading(), metadata, deadline, ended().
  server_stream& raw() noexcept { return _raw; }

 private:
  // fbb.Finish() throws only what its allocator throws, out of memory: the message is lost, so
  // the stream cannot go on (std::terminate through noexcept would take the whole server).
  void out_of_memory() noexcept { _raw.fail(status::resource_exhausted, "server is out of memory"); }

  server_stream _raw;
};

/// One typed stream's callbacks: stream_handler's, with each client message verified as a
/// Request first. Same threads, order and rules as stream_handler (a callback that throws
/// fails the stream with `internal`).
template <class Request, class Reply>
class typed_stream_handler {
 public:
  virtual ~typed_stream_handler() = default;
  /// A message from the client (client and bidi streams); it lives until the callback returns.
  virtual void on_message(typed_server_stream<Reply>& stream, const Request& message) {
    (void)stream;
    (void)message;
  }
  virtual void on_half_close(typed_server_stream<Reply>& stream) { (void)stream; }
  virtual void on_writable(typed_server_stream<Reply>& stream) { (void)stream; }
  virtual void on_cancel(typed_server_stream<Reply>& stream) { (void)stream; }
  virtual void on_done(status final_status) { (void)final_status; }
};

/// A typed stream on the client: client_stream with Request messages out and Reply messages
/// in. Movable, not copyable; the destructor cancels a stream that has not ended. Threads: as
/// with client_stream, one thread may write, half_close or cancel while another reads; read(),
/// finish(), finish_reply() and ended() belong to the reading thread (they share what a message
/// that did not verify left behind).
template <class Request, class Reply>
class typed_client_stream {
 public:
  typed_client_stream(client_stream raw, const detail::typed_method& m) noexcept : _raw(std::move(raw)), _method(m) {}
  /// A stream that never opened: ended, finish() returning `error` with `why`.
  typed_client_stream(const detail::typed_method& m, call_error error, std::string why)
      : _method(m), _bad(std::move(why)), _bad_kind(error) {}

  /// Finishes `fbb` with `root` and writes it (client_stream::write's results); `fbb` is
  /// cleared either way.
  write_result write(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> root) {
    const write_result r = _raw.write(detail::finish(fbb, root));
    fbb.Clear();
    return r;
  }
  /// write(), waiting up to `timeout` for credit (client_stream::write_wait).
  write_result write_wait(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> root,
                          std::chrono::nanoseconds timeout = client_stream::forever) {
    const write_result r = _raw.write_wait(detail::finish(fbb, root), timeout);
    fbb.Clear();
    return r;
  }
  /// The next message, verified as a Reply; empty at the end or when `timeout` passed first
  /// (client_stream::read). A message that does not verify cancels the stream and comes back
  /// as an error (call_error::protocol_error); nothing is read after it.
  std::optional<result<Reply>> read(std::chrono::nanoseconds timeout = client_stream::forever) {
    if (_bad) return std::nullopt;
    return verified(_raw.read(timeout));
  }
  bool half_close() { return _raw.half_close(); }
  bool cancel() { return _raw.cancel(); }
  /// How the stream ended (client_stream::finish); after a message that did not verify,
  /// call_error::protocol_error saying so; for a stream that never opened, why not.
  call_result finish(std::chrono::nanoseconds timeout = client_stream::forever) {
    return with_bad(_raw.finish(timeout));
  }
  /// finish() for a client stream: its answer verified as a Reply, or the end's error.
  result<Reply> finish_reply(std::chrono::nanoseconds timeout = client_stream::forever) {
    return detail::to_result<Reply>(finish(timeout), _method);
  }
  bool ended() const noexcept { return _bad.has_value() || _raw.ended(); }

  // The coroutine forms (ringrpc/stream_coro.hpp): the same results, waiting without a thread.
  // The stream must outlive the co_await; one reading and one writing coroutine at a time.

  /// write(), waiting for credit and for room in max_pending_bytes (co_write on the raw stream).
  task<write_result> co_write(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> root) {
    const write_result r = co_await ringrpc::co_write(_raw, detail::finish(fbb, root));
    fbb.Clear();
    co_return r;
  }
  /// read(), waiting for the next message or the end.
  task<std::optional<result<Reply>>> co_read() {
    if (_bad) co_return std::nullopt;
    co_return verified(co_await ringrpc::co_read(_raw));
  }
  /// finish(), waiting for the end without a limit of its own.
  task<call_result> co_finish() {
    co_return with_bad(co_await ringrpc::co_finish(_raw));
  }
  /// finish_reply(), waiting: a client stream's answer verified as a Reply, or the end's error.
  task<result<Reply>> co_finish_reply() { co_return detail::to_result<Reply>(co_await co_finish(), _method); }

  /// The raw stream: headers(), id(), kind(), buffered_bytes().
  client_stream& raw() noexcept { return _raw; }

 private:
  // A message read, verified as a Reply; one that does not verify cancels the stream.
  std::optional<result<Reply>> verified(std::optional<std::vector<std::byte>> bytes) {
    if (!bytes) return std::nullopt;
    result<Reply> r = result<Reply>::verified(std::move(*bytes), _method.full_name, _method.reply_type);
    if (!r.ok()) {
      _bad = r.error().message;
      _raw.cancel();
    }
    return r;
  }
  // The end as finish() reports it: a message that did not verify (or an open that never
  // happened) replaces the raw stream's own end.
  call_result with_bad(call_result r) const {
    if (_bad) {
      r.error = _bad_kind;
      r.code = status::ok;
      r.message = *_bad;
      r.payload.clear();
    }
    return r;
  }

  client_stream _raw;
  detail::typed_method _method;
  std::optional<std::string> _bad;  // why a server message did not verify, or why it never opened
  call_error _bad_kind = call_error::protocol_error;
};

namespace detail {

/// Opens a typed stream through a stub's target. A stub over a channel cannot (streams on a
/// channel are not built yet): the stream is returned ended, finish() saying so
/// (client_closed, as for a stub whose client is gone).
template <class Request, class Reply>
typed_client_stream<Request, Reply> open_typed_stream(const stub_target& t, const typed_method& m, stream_kind kind,
                                                     std::span<const std::byte> request,
                                                     const stream_options& options) {
  if (client* c = t.stream_client()) return {c->open_stream(m.full_name, kind, request, options), m};
  return {m, call_error::client_closed,
          std::string(m.full_name) + ": " +
              (t.over_channel() ? "streams on a channel are not built yet; open the stub on a client"
                                : "the stub's client is closed (destroyed)")};
}

template <class Request, class Reply>
typed_client_stream<Request, Reply> open_typed_stream(const stub_target& t, const typed_method& m, stream_kind kind,
                                                     flatbuffers::FlatBufferBuilder& fbb,
                                                     flatbuffers::Offset<Request> request,
                                                     const stream_options& options) {
  auto s = open_typed_stream<Request, Reply>(t, m, kind, finish(fbb, request), options);
  fbb.Clear();
  return s;
}

/// The raw stream_handler a typed one runs behind: verifies each client message, then hands it
/// over as a Request.
template <class Request, class Reply>
class typed_stream_adapter final : public stream_handler {
 public:
  typed_stream_adapter(server_stream& s, std::unique_ptr<typed_stream_handler<Request, Reply>> h,
                       const typed_method& m, std::size_t alignment)
      : _stream(s), _handler(std::move(h)), _method(m), _alignment(alignment) {}

  void on_message(server_stream&, std::span<const std::byte> message) override {
    const aligned_payload payload(message, _alignment);
    flatbuffers::Verifier v(payload.data(), payload.size());
    if (!v.VerifyBuffer<Request>(nullptr)) {
      _stream.fail(status::bad_request, std::string(_method.full_name) + ": message is not a valid " +
                                            _method.request_type + " (FlatBuffers verification failed)");
      return;
    }
    _handler->on_message(_stream, *flatbuffers::GetRoot<Request>(payload.data()));
  }
  void on_half_close(server_stream&) override { _handler->on_half_close(_stream); }
  void on_writable(server_stream&) override { _handler->on_writable(_stream); }
  void on_cancel(server_stream&) override { _handler->on_cancel(_stream); }
  void on_done(status final_status) override { _handler->on_done(final_status); }

 private:
  typed_server_stream<Reply> _stream;
  std::unique_ptr<typed_stream_handler<Request, Reply>> _handler;
  typed_method _method;
  std::size_t _alignment;
};

/// Registers one typed stream method on `r.target` and records its name in `r.added` (for
/// register_service to take it back if a later one fails). `open` makes the typed handler: for a
/// server stream it gets the verified request (a request that does not verify fails the
/// stream with bad_request and `open` does not run), for the others none.
template <class Request, class Reply, class Open>
void add_typed_stream(stream_registrar& r, const typed_method& m, stream_kind kind, std::size_t alignment,
                      Open open) {
  r.added.reserve(r.added.size() + 1);  // so that recording the name cannot fail once it is added
  r.target.add_stream_method(
      m.full_name, kind,
      [m, kind, alignment, open = std::move(open)](server_stream& raw,
                                                  std::span<const std::byte> request) -> std::unique_ptr<stream_handler> {
        typed_server_stream<Reply> typed(raw);
        std::unique_ptr<typed_stream_handler<Request, Reply>> h;
        if (kind == stream_kind::server) {
          const aligned_payload payload(request, alignment);
          flatbuffers::Verifier v(payload.data(), payload.size());
          if (!v.VerifyBuffer<Request>(nullptr)) {
            raw.fail(status::bad_request, std::string(m.full_name) + ": request is not a valid " + m.request_type +
                                              " (FlatBuffers verification failed)");
            return nullptr;
          }
          h = open(typed, flatbuffers::GetRoot<Request>(payload.data()));
        } else {
          h = open(typed, nullptr);
        }
        // A method that ended the stream itself (wrote everything, or failed it) may return null.
        if (!h) return nullptr;
        return std::make_unique<typed_stream_adapter<Request, Reply>>(raw, std::move(h), m, alignment);
      });
  r.added.emplace_back(m.full_name);
}

/// The answer of a stream method the implementation did not override.
template <class Reply>
std::nullptr_t stream_not_implemented(typed_server_stream<Reply>& stream, const typed_method& m) {
  stream.fail(status::unknown_method, std::string(m.full_name) + " is not implemented by this server");
  return nullptr;
}

}  // namespace detail
}  // namespace ringrpc

RINGRPC_API_END

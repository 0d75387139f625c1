#pragma once
/// \file Typed services: what the headers `ringrpc-gen` writes from a FlatBuffers schema build
/// on. docs/services.md shows the whole path from a `.fbs` file to a server and a client.
///
/// A generated `Greeter` (from `rpc_service Greeter { SayHello(HelloRequest): HelloReply; }`)
/// has `Greeter::stub`, a typed client over a ringrpc::client or a ringrpc::channel, and
/// `Greeter::service`, an
/// endpoint whose virtual `SayHello(call_context&, const HelloRequest&)` you override; both
/// trade in result<T>.

#include <flatbuffers/flatbuffers.h>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/call_context.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// The stable id of a method: 32-bit FNV-1a of the UTF-8 bytes of "Service.Method"
/// (docs/protocol.md, "Method ids"). method_id("Greeter.SayHello") == 0x978de4cc.
constexpr std::uint32_t method_id(std::string_view full_name) noexcept {
  std::uint32_t h = 0x811c9dc5u;
  for (const char c : full_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x01000193u;
  }
  return h;
}

/// Why a typed call has no reply, or what a typed method answers instead of one.
struct rpc_error {
  call_error kind = call_error::server_status;  ///< server_status: `code` says which
  status code = status::internal;               ///< the server's status when kind is server_status
  std::string message;
  std::uint32_t retry_after_ms = 0;             ///< the server's hint with server_busy
  /// Structured error details (call_outcome::details): a typed method may set them for its
  /// caller, a typed call receives them. Opaque bytes, e.g. a serialized google.rpc.Status.
  std::vector<std::byte> details;

  rpc_error() = default;
  /// An answer from a method: the caller gets `code` (ok becomes internal) and `message`.
  rpc_error(status c, std::string m) : code(c), message(std::move(m)) {}
  rpc_error(call_error k, status c, std::string m, std::uint32_t retry_after = 0)
      : kind(k), code(c), message(std::move(m)), retry_after_ms(retry_after) {}

  /// One line for logs: "server_status: bad_request: name is empty", "timeout: ...".
  std::string describe() const {
    std::string s(to_string(kind));
    if (kind == call_error::server_status) (s += ": ") += to_string(code);
    if (!message.empty()) (s += ": ") += message;
    return s;
  }
};

/// Thrown by result<T>::value() when the result is an error. A typed method may throw it too:
/// the caller then gets its status and message (any other exception becomes `internal`).
class rpc_exception : public std::runtime_error {
 public:
  explicit rpc_exception(rpc_error e) : std::runtime_error(e.describe()), _error(std::move(e)) {}
  rpc_exception(status code, std::string message) : rpc_exception(rpc_error(code, std::move(message))) {}
  const rpc_error& error() const noexcept { return _error; }

 private:
  rpc_error _error;
};

/// What a typed method returns after it took its reply for later with defer_reply():
/// `return ringrpc::deferred;`. The answer is whatever the deferred_result is given.
struct deferred_t {
  explicit constexpr deferred_t(int) noexcept {}
};
inline constexpr deferred_t deferred{0};

/// Either a FlatBuffers message whose root is T, owned and verified, or an rpc_error.
/// Typed methods return one (`return {fbb, CreateHelloReply(fbb, ...)};` or
/// `return ringrpc::rpc_error(status::bad_request, "...");`); typed calls produce one, after
/// verifying the reply against T. Movable, not copyable.
template <class T>
class result {
 public:
  /// Finishes `fbb` with `root` and takes over its bytes (`fbb` is left empty, reusable).
  result(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<T> root) {
    fbb.Finish(root);
    _built = fbb.Release();
  }
  /// Implicit, so a method can `return rpc_error(status::bad_request, "...");`.
  result(rpc_error error) : _error(std::move(error)) {}
  /// Implicit, so a method that called defer_reply() can `return ringrpc::deferred;`. Such a
  /// result is neither a message nor an error (ok() is false, error() names it).
  result(deferred_t)
      : _error(rpc_error(status::internal, "the reply was deferred (ringrpc::deferred)")), _deferred(true) {}

  /// True for `ringrpc::deferred`: the method answers through its deferred_result.
  bool is_deferred() const noexcept { return _deferred; }

  /// `bytes` as a T, or a protocol_error naming `what` when they fail FlatBuffers
  /// verification. The vector's storage is new'd, hence aligned enough for any scalar.
  static result verified(std::vector<std::byte> bytes, std::string_view what, std::string_view type) {
    flatbuffers::Verifier v(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (!v.VerifyBuffer<T>(nullptr)) {
      return rpc_error(call_error::protocol_error, status::ok,
                       std::string(what) + ": reply is not a valid " + std::string(type) +
                           " (FlatBuffers verification failed)");
    }
    result r;
    r._received = std::move(bytes);
    return r;
  }

  bool ok() const noexcept { return !_error.has_value(); }
  explicit operator bool() const noexcept { return ok(); }

  /// The message. Precondition: ok().
  const T& operator*() const noexcept {
    assert(ok());
    return *flatbuffers::GetRoot<T>(data());
  }
  const T* operator->() const noexcept { return &**this; }
  /// The message, or throws rpc_exception carrying the error.
  const T& value() const {
    if (_error) throw rpc_exception(*_error);
    return **this;
  }
  /// Precondition: !ok().
  const rpc_error& error() const noexcept {
    assert(!ok());
    return *_error;
  }
  /// The message's bytes (a finished FlatBuffers buffer); empty for an error.
  std::span<const std::byte> bytes() const noexcept {
    if (_built.size() != 0) return {reinterpret_cast<const std::byte*>(_built.data()), _built.size()};
    return _received;
  }

 private:
  result() = default;
  const std::uint8_t* data() const noexcept { return reinterpret_cast<const std::uint8_t*>(bytes().data()); }

  flatbuffers::DetachedBuffer _built;  // what a method built
  std::vector<std::byte> _received;    // what a call received
  std::optional<rpc_error> _error;
  bool _deferred = false;
};

/// The reply of a typed method, answered after the method has returned, from any thread:
///
///   result<HelloReply> SayHello(call_context& call, const HelloRequest& req) override {
///     auto later = ringrpc::defer_reply<HelloReply>(call);
///     std::string name = req.name() ? req.name()->str() : "";  // req dies with the method
///     _work.push([later = std::move(later), name]() mutable {
///       flatbuffers::FlatBufferBuilder fbb;
///       later.reply(fbb, CreateHelloReplyDirect(fbb, ("hello, " + name).c_str()));
///     });
///     return ringrpc::deferred;
///   }
///
/// The first reply()/fail() answers; later ones, and those after the server stopped (it answers
/// shutting_down itself), return false. Dropping it unanswered answers `internal`. Movable.
template <class Reply>
class deferred_result {
 public:
  deferred_result() noexcept = default;
  explicit deferred_result(deferred_reply reply) noexcept : _reply(std::move(reply)) {}

  /// Finishes `fbb` with `root` and sends it; `fbb` is left reusable.
  bool reply(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Reply> root) {
    fbb.Finish(root);
    const bool sent =
        _reply.reply(std::span(reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize()));
    fbb.Clear();
    return sent;
  }
  /// Answers with a result: its message, or its error's status (ok becomes internal).
  bool reply(const result<Reply>& r) {
    if (r.ok()) return _reply.reply(r.bytes());
    const rpc_error& e = r.error();
    return _reply.fail(e.code == status::ok ? status::internal : e.code, e.message, e.details);
  }
  bool fail(status code, std::string_view message) { return _reply.fail(code, message); }
  /// The caller cancelled, its deadline passed or the server stopped: answering is pointless.
  bool cancelled() const noexcept { return _reply.cancelled(); }
  /// Until the caller's deadline (nanoseconds::max() without one).
  std::chrono::nanoseconds remaining() const noexcept { return _reply.remaining(); }
  /// False once answered (or when made empty).
  explicit operator bool() const noexcept { return static_cast<bool>(_reply); }

 private:
  deferred_reply _reply;
};

/// Takes the reply of the typed method `call` is running for later: the method then returns
/// `ringrpc::deferred`. Throws std::logic_error when called twice for one call.
template <class Reply>
deferred_result<Reply> defer_reply(call_context& call) {
  return deferred_result<Reply>(call.defer());
}

namespace detail {
/// What register_service hands a generated service's ringrpc_add_streams: the server, and the
/// stream methods added so far, so that a failure part-way can remove exactly those again.
struct stream_registrar {
  server& target;
  std::vector<std::string> added;
};
}  // namespace detail

/// Registers a generated service implementation under its service name (no dots; calls to
/// "Service.Method" reach it). Same errors as server::register_endpoint.
/// A service with streaming methods (ringrpc/typed_stream.hpp) also registers each of them as
/// a stream method "Service.Method" (server::add_stream_method, which `options` do not apply
/// to; if one is refused, e.g. for a name taken, nothing stays registered). Server interceptors
/// see their opens and ends as they see calls (ringrpc/interceptor.hpp).
template <class Service>
void register_service(server& s, std::shared_ptr<Service> impl, endpoint_options options = {}) {
  s.register_endpoint(Service::service_name, impl, std::move(options));
  if constexpr (requires(detail::stream_registrar& r) { Service::ringrpc_add_streams(r, impl); }) {
    detail::stream_registrar r{s, {}};
    try {
      Service::ringrpc_add_streams(r, impl);
    } catch (...) {
      // Only what this call added: a taken name belongs to whoever registered it first.
      for (const std::string& name : r.added) s.unregister_endpoint(name);
      s.unregister_endpoint(Service::service_name);
      throw;
    }
  }
}

namespace detail {

/// What generated code knows about one method.
struct typed_method {
  const char* full_name;     ///< "Greeter.SayHello"
  const char* request_type;  ///< "example.HelloRequest"
  const char* reply_type;    ///< "example.HelloReply"
};

template <class Reply>
result<Reply> to_result(call_result&& r, const typed_method& m) {
  if (!r.ok()) {
    rpc_error e(r.error, r.code, std::move(r.message), r.retry_after_ms);
    e.details = std::move(r.details);
    return e;
  }
  return result<Reply>::verified(std::move(r.payload), m.full_name, m.reply_type);
}

template <class Reply>
result<Reply> to_result(const call_outcome& o, const typed_method& m) {
  if (!o.ok()) {
    rpc_error e(o.error, o.code, std::string(o.message), o.retry_after_ms);
    e.details.assign(o.details.begin(), o.details.end());
    return e;
  }
  return result<Reply>::verified(std::vector<std::byte>(o.payload.begin(), o.payload.end()), m.full_name,
                                 m.reply_type);
}

template <class Request>
std::span<const std::byte> finish(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> root) {
  fbb.Finish(root);
  return {reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize()};
}

/// What a typed stub calls through: a client or a channel, by the home cell that follows it
/// through moves (detail::object_home). Once the client or channel is destroyed (or was moved
/// from when the stub was made) calls fail with client_closed. A move must not race with calls
/// through its stubs, as client::close() must not.
class stub_target {
 public:
  explicit stub_target(client& c) noexcept : _client(c.home()) {}
  stub_target(channel& ch, bool idempotent) noexcept : _channel(ch.home()), _idempotent(idempotent) {}

  void call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                  const call_options& options) const {
    if (client* c = client_now()) {
      c->call_async(method, payload, std::move(done), options);
    } else if (channel* ch = channel_now()) {
      ch->call_async(method, payload, std::move(done), for_channel(options));
    } else {
      call_outcome o;
      o.error = call_error::client_closed;
      o.message = closed_message();
      if (done) done(o);
    }
  }
  call_result call(std::string_view method, std::span<const std::byte> payload, const call_options& options) const {
    if (client* c = client_now()) return c->call(method, payload, options);
    if (channel* ch = channel_now()) return ch->call(method, payload, for_channel(options));
    call_result r;
    r.error = call_error::client_closed;
    r.message = closed_message();
    return r;
  }
  /// The client to open a stream on; null over a channel (streams stick to one connection and
  /// a channel does not open them yet) or once the client is gone.
  client* stream_client() const noexcept { return client_now(); }
  bool over_channel() const noexcept { return _channel != nullptr; }
  bool send_one_way(std::string_view method, std::span<const std::byte> payload) const {
    if (client* c = client_now()) return c->send_one_way(method, payload);
    if (channel* ch = channel_now()) return ch->send_one_way(method, payload);
    return false;
  }

 private:
  client* client_now() const noexcept { return _client ? _client->at.load(std::memory_order_acquire) : nullptr; }
  channel* channel_now() const noexcept {
    return _channel ? _channel->at.load(std::memory_order_acquire) : nullptr;
  }
  channel_call_options for_channel(const call_options& o) const {
    channel_call_options c;
    c.timeout = o.timeout;
    c.idempotent = _idempotent;
    c.metadata = o.metadata;
    c.parent = o.parent;
    c.detached = o.detached;
    c.cancel = o.cancel;
    return c;
  }
  const char* closed_message() const noexcept {
    return _channel ? "the stub's channel is closed (destroyed)" : "the stub's client is closed (destroyed)";
  }

  std::shared_ptr<object_home<client>> _client;
  std::shared_ptr<object_home<channel>> _channel;
  bool _idempotent = false;
};

template <class Reply, class Request>
result<Reply> typed_call(const stub_target& t, const typed_method& m, flatbuffers::FlatBufferBuilder& fbb,
                         flatbuffers::Offset<Request> request, const call_options& options) {
  call_result r = t.call(m.full_name, finish(fbb, request), options);
  fbb.Clear();
  return to_result<Reply>(std::move(r), m);
}

template <class Reply, class Request>
void typed_call_async(const stub_target& t, const typed_method& m, flatbuffers::FlatBufferBuilder& fbb,
                      flatbuffers::Offset<Request> request, std::function<void(result<Reply>)> done,
                      const call_options& options) {
  t.call_async(m.full_name, finish(fbb, request),
               [m, done = std::move(done)](const call_outcome& o) { done(to_result<Reply>(o, m)); }, options);
  // The client encoded the request into its own frame before returning.
  fbb.Clear();
}

template <class Reply, class Request>
reply_future<result<Reply>> typed_call_future(const stub_target& t, const typed_method& m,
                                             flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> request,
                                             const call_options& options) {
  // Through call_async rather than client::call_future: the reply is verified and wrapped on
  // the runtime thread, and no thread waits just to convert one future into another.
  auto promise = std::make_shared<std::promise<result<Reply>>>();
  auto future = promise->get_future();
  typed_call_async<Reply>(t, m, fbb, request, [promise](result<Reply> r) { promise->set_value(std::move(r)); },
                          options);
  return future;
}

/// A typed one-way message: the request is verified by the server as for a call, the method
/// runs, its answer is dropped. False when nothing was sent (see client::send_one_way).
template <class Request>
bool typed_one_way(const stub_target& t, const typed_method& m, flatbuffers::FlatBufferBuilder& fbb,
                   flatbuffers::Offset<Request> request) {
  const bool sent = t.send_one_way(m.full_name, finish(fbb, request));
  fbb.Clear();
  return sent;
}

/// A request payload at an address aligned for `alignment`: FlatBuffers reads scalars in
/// place, and the payload inside a frame is only guaranteed 4-byte alignment. Copies only
/// when the payload is misaligned.
class aligned_payload {
 public:
  aligned_payload(std::span<const std::byte> payload, std::size_t alignment) : _alignment(alignment) {
    if (reinterpret_cast<std::uintptr_t>(payload.data()) % alignment == 0 || payload.empty()) {
      _data = reinterpret_cast<const std::uint8_t*>(payload.data());
    } else {
      _copy = static_cast<std::byte*>(::operator new(payload.size(), std::align_val_t(alignment)));
      std::memcpy(_copy, payload.data(), payload.size());
      _data = reinterpret_cast<const std::uint8_t*>(_copy);
    }
    _size = payload.size();
  }
  ~aligned_payload() {
    if (_copy) ::operator delete(_copy, std::align_val_t(_alignment));
  }
  aligned_payload(const aligned_payload&) = delete;
  aligned_payload& operator=(const aligned_payload&) = delete;
  const std::uint8_t* data() const noexcept { return _data; }
  std::size_t size() const noexcept { return _size; }

 private:
  std::size_t _alignment;
  std::byte* _copy = nullptr;
  const std::uint8_t* _data = nullptr;
  std::size_t _size = 0;
};

/// endpoint::on_error must not throw; what it throws anyway is dropped, as the server does.
inline void report_error(endpoint& ep, const std::string& what) noexcept {
  try {
    ep.on_error(what);
  } catch (...) {
  }
}

/// Runs one typed method for `call`: verifies the request, calls `method`, answers with its
/// result. Exceptions are answered here (rpc_exception: its status; anything else: internal
/// with what(), also reported to ep.on_error) so the caller's message can name the method.
template <class Request, class Reply, class Method>
void serve(endpoint& ep, call_context& call, const typed_method& m, std::size_t alignment, Method&& method) {
  const aligned_payload payload(call.payload(), alignment);
  flatbuffers::Verifier verifier(payload.data(), payload.size());
  if (!verifier.VerifyBuffer<Request>(nullptr)) {
    call.fail(status::bad_request, std::string(m.full_name) + ": request is not a valid " + m.request_type +
                                       " (FlatBuffers verification failed)");
    return;
  }
  try {
    result<Reply> r = method(call, *flatbuffers::GetRoot<Request>(payload.data()));
    if (r.is_deferred()) {
      // The deferred_result answers. This fail() is ignored after defer_reply(); without one it
      // is the answer, or the caller would wait for nothing.
      call.fail(status::internal, std::string(m.full_name) + " returned ringrpc::deferred without defer_reply()");
      return;
    }
    if (r.ok()) {
      call.reply(r.bytes());
    } else {
      const auto& e = r.error();
      call.fail(e.code == status::ok ? status::internal : e.code, e.message, e.details);
    }
  } catch (const rpc_exception& e) {
    const auto& err = e.error();
    call.fail(err.code == status::ok ? status::internal : err.code, err.message, err.details);
  } catch (const std::exception& e) {
    // Reported before answering, so a caller that sees the answer can rely on the report.
    report_error(ep, std::string(m.full_name) + ": " + e.what());
    call.fail(status::internal, e.what());
  } catch (...) {
    report_error(ep, std::string(m.full_name) + ": handler threw a non-standard exception");
    call.fail(status::internal, "handler threw a non-standard exception");
  }
}

/// The answer for a method name the service does not have.
inline void unknown_method(call_context& call, std::string_view service) {
  call.fail(status::unknown_method,
            "service '" + std::string(service) + "' has no method named '" + std::string(call.method()) + "'");
}

/// The answer of a method the implementation did not override.
inline rpc_error not_implemented(const typed_method& m) {
  return rpc_error(status::unknown_method, std::string(m.full_name) + " is not implemented by this server");
}

}  // namespace detail
}  // namespace ringrpc

RINGRPC_API_END

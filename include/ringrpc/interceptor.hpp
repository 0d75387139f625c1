#pragma once
/// \file Interceptors: code that wraps every call of a server, a client or a channel — for
/// logging, metrics, authorization, trace context — without touching the handlers or callers.
///
/// Each side keeps an ordered chain (server_options::interceptors,
/// client_options::interceptors, channel_options::interceptors). For one call, before_call runs
/// in the chain's order (the first interceptor is the outermost), then the call itself, then
/// after_call in the reverse order, for every interceptor whose before_call ran. An interceptor
/// may
///   - look: the method, the request metadata, the deadline (remaining time or timeout),
///     whether it is one-way, and after the call its status and timing;
///   - refuse: before_call returns call_verdict::refuse(code, message): the rest of the chain's
///     before_call and the call itself do not run (a server answers the caller with that
///     status; a client fails the call with call_error::intercepted and that code);
///   - annotate: a client or channel interceptor adds request metadata (client_call::metadata);
///     a server interceptor attaches key/value annotations its handler reads with
///     call_context::annotation(key).
///
/// An interceptor that throws fails that one call, never its connection: a throw from
/// before_call or after_call makes the answer status `internal` with the message
/// "server interceptor threw: <what()>" (server; the handler does not run if before_call threw)
/// or call_error::intercepted with code `internal` and the message
/// "client interceptor threw: <what()>" (client, channel).
///
/// Cost: with no interceptor installed a call pays a test or two that always go the same way
/// (one to skip the chain, one to skip its completion), no allocation and no clock read. Installed ones cost their own code, plus two clock reads per call for
/// the timing (on a server only when an interceptor wants_timing()), and on a client one
/// allocation per call for the wrapped completion.
///
/// Interceptors are shared by every thread that runs calls: their methods must be thread-safe
/// (usually by keeping no mutable state, or per-thread or atomic state).
///
/// Streams: interceptors see a stream's open and its end, not its messages (gRPC's stream
/// interceptors wrap the stream; these keep the call's interface, which has no per-message
/// hook). before_call runs on the open as on a call — on a server with the open's context
/// (method, metadata, peer, deadline; payload() a server stream's request), on a client with the
/// open's method, request, metadata and timeout — and a refusal ends the stream with its status
/// before anything else happens (a server's factory does not run; a client sends nothing). A
/// server interceptor's annotations reach the stream's handler (server_stream::annotation).
/// after_call runs once, when the stream ends however it ends, with its final status: one record
/// per stream. The end has gone to the caller by then, so a throw from it is dropped. Details in
/// docs/services.md, "Interceptors on streams".

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class call_context;
struct call_outcome;
struct peer_identity;

/// What before_call decides: go on, or refuse the call with a status and a message.
class call_verdict {
 public:
  /// Go on with the next interceptor, then the call.
  static call_verdict proceed() noexcept { return call_verdict(); }
  /// Stop here: the call does not run. `code` ok is turned into `internal` (a refusal must say
  /// what went wrong).
  static call_verdict refuse(status code, std::string message) {
    call_verdict v;
    v._refused = true;
    v._code = code == status::ok ? status::internal : code;
    v._message = std::move(message);
    return v;
  }
  bool refused() const noexcept { return _refused; }
  status code() const noexcept { return _code; }
  const std::string& message() const noexcept { return _message; }

 private:
  call_verdict() noexcept = default;
  bool _refused = false;
  status _code = status::ok;
  std::string _message;
};

// --- server side

/// A finished server call, as server_interceptor::after_call sees it. Views valid only during
/// after_call.
struct server_call_summary {
  std::string_view method;
  std::uint64_t call_id = 0;
  bool one_way = false;
  /// The handler took a deferred_reply: after_call runs when that answer is given (on the
  /// answering thread), which may be before the handler itself has returned.
  bool deferred = false;
  /// The answer's status (one-way messages: ok unless the handler called fail()).
  status code = status::ok;
  metadata_view metadata;               ///< the request metadata
  const peer_identity* peer = nullptr;  ///< as call_context::peer()
  /// Steady clock: when the reader received the call, when the chain started (the handler's
  /// thread took the call), when the answer was decided (handler returned, or deferred answer).
  std::chrono::steady_clock::time_point received, start, end;
  /// Time in the server, queue included.
  std::chrono::nanoseconds in_server() const noexcept { return end - received; }
  /// Time from the chain's start to the answer (interceptors and handler).
  std::chrono::nanoseconds duration() const noexcept { return end - start; }
};

/// Wraps every call a server runs a handler for (server_options::interceptors).
///
/// Where it runs: on the thread that runs the handler, right before and after it — a pool
/// worker for pool endpoints, the connection's reader thread for direct ones, whichever thread
/// drains a serial endpoint's inbox — so it sees the same thread-local state the handler does.
/// It runs for every call from a client that reaches its endpoint (plain methods, endpoints,
/// typed services, whatever the dispatch policy) and each stream's open and end (the file's
/// "Streams": after_call then runs on the stream's callbacks' thread after on_done, `code` the
/// final status, `end - start` the stream's life), and not for calls refused before that (bad
/// metadata, authorizers, bearer tokens, a full queue, a deadline passed or a cancel received
/// while queued, a stopping server), local posts (server::post) or connection events.
class server_interceptor {
 public:
  virtual ~server_interceptor() = default;
  /// Before the handler. `call` is the handler's own context: method(), metadata(),
  /// remaining(), peer(), payload(), annotate(). Refusing answers the caller with the verdict's
  /// status; the handler does not run.
  virtual call_verdict before_call(call_context& call) {
    (void)call;
    return call_verdict::proceed();
  }
  /// Once the answer is decided, before it is sent.
  virtual void after_call(const server_call_summary& done) { (void)done; }
  /// Whether this interceptor reads server_call_summary::start and end. They cost two clock
  /// reads a call (together tens of ns, several percent of a small call's server CPU), paid
  /// only when some interceptor of the chain returns true; otherwise start and end are both
  /// `received` (the reader's time, which is free). Asked once per call, before before_call.
  virtual bool wants_timing() const noexcept { return true; }
};

// --- client and channel side

/// A call as a client or channel interceptor sees it before it is sent.
struct client_call {
  std::string_view method;
  std::span<const std::byte> payload;
  /// The call's own metadata (call_options::metadata / channel_call_options::metadata): add
  /// pairs to annotate it (e.g. a traceparent), within the server's caps.
  std::vector<metadata_entry>& metadata;
  /// The time budget the call will have (its own timeout, else the client's default_timeout);
  /// zero: none. A channel's is per attempt.
  std::chrono::microseconds timeout{0};
  bool one_way = false;
};

/// A finished client or channel call, as after_call sees it (views valid only during it).
struct client_call_summary {
  std::string_view method;
  bool one_way = false;
  /// The outcome the caller's callback gets next. One-way messages: none once queued,
  /// client_busy when the connection refused it (at its pending limits, or closed),
  /// intercepted when an interceptor refused it; a throwing after_call makes send_one_way
  /// return false although the message was queued.
  const call_outcome& outcome;
  /// Attempts made: 0 when an interceptor refused the call (nothing was sent), else 1 on a
  /// client; on a channel, more when the call was retried on another member (channel
  /// interceptors see one logical call, the member clients' see each attempt).
  unsigned attempts = 1;
  std::chrono::steady_clock::time_point start, end;  ///< steady clock: call made, outcome known
  std::chrono::nanoseconds duration() const noexcept { return end - start; }
};

/// Wraps every call (and one-way message) of a client (client_options::interceptors) or
/// channel (channel_options::interceptors), and each stream a client opens (its open, in
/// open_stream(), and its end, on the I/O thread; see the file's "Streams").
///
/// Threads: before_call runs on the thread making the call, inside call_async()/call()/
/// send_one_way(). after_call runs where the call's callback runs, just before it: the
/// runtime's I/O thread, or the calling thread for a call refused at once (by an
/// interceptor, client_busy, a channel without a live member). Calls on a closed (or
/// moved-from) client fail with client_closed without reaching the chain.
class client_interceptor {
 public:
  virtual ~client_interceptor() = default;
  virtual call_verdict before_call(client_call& call) {
    (void)call;
    return call_verdict::proceed();
  }
  virtual void after_call(const client_call_summary& done) { (void)done; }
};

/// An ordered chain, as the option structs hold it.
using server_interceptors = std::vector<std::shared_ptr<server_interceptor>>;
using client_interceptors = std::vector<std::shared_ptr<client_interceptor>>;

}  // namespace ringrpc

RINGRPC_API_END

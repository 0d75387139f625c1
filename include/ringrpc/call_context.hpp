#pragma once
/// \file One call as its handler sees it, and the handle that answers it later.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <optional>

#include "ringrpc/metadata.hpp"
#include "ringrpc/peer_identity.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace detail {
struct call;
struct deferred_state;
class server_core;
class intercepted_call;
struct call_annotations;
}  // namespace detail

class deferred_reply;

/// One call (or one-way message), as a handler sees it. Valid only during the handler
/// invocation; to answer after returning, take a deferred_reply with defer().
class call_context {
 public:
  std::uint64_t call_id() const noexcept;
  /// The full method name from the frame, e.g. "Greeter.say_hello" or "echo".
  std::string_view method() const noexcept;
  /// The request payload; the bytes live until the handler returns (or the deferred reply is
  /// answered, when deferred).
  std::span<const std::byte> payload() const noexcept;
  /// True when the caller set a deadline.
  bool has_deadline() const noexcept;
  /// Time left before the caller's deadline (negative once passed); max() when none was set.
  std::chrono::nanoseconds remaining() const noexcept;
  /// True for one-way messages, whose reply is discarded.
  bool one_way() const noexcept;
  /// True once the caller cancelled this call (a Cancel frame), its connection ended, or the
  /// server gave up on it while stopping. Cheap enough to poll in a loop; a handler that sees
  /// it may stop early and fail(status::cancelled, ...).
  bool cancelled() const noexcept;
  /// Who the caller proved to be: its connection's TLS identity and, when the call carried an
  /// accepted bearer token, that token's subject (peer_identity::token_subject). Null for a
  /// plaintext call without a token. Valid while the call is (as payload()).
  const peer_identity* peer() const noexcept;
  /// The per-call metadata the caller sent (ringrpc/metadata.hpp), already checked against
  /// the server's caps and key rules; empty when it sent none. Valid as payload() is.
  metadata_view metadata() const noexcept;
  /// The caller's W3C trace context, from a valid `traceparent` pair; nullopt when there is
  /// none or it is malformed (then the call runs as if it had none).
  std::optional<trace_context> trace() const noexcept;

  /// Answers with status ok and `payload`. The last of reply()/fail() wins; with neither, the
  /// caller gets ok with an empty payload.
  void reply(std::span<const std::byte> payload);
  void reply(std::string_view payload) {
    reply(std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload.data()), payload.size()));
  }
  /// Answers with an error status and a message for the caller.
  void fail(status code, std::string_view message);

  /// Takes over answering: the handler may return and any thread may answer later through the
  /// returned handle (Spark's RpcCallContext). Anything answered through this context before
  /// is discarded. A handle destroyed unanswered answers `internal`; the server answers
  /// `shutting_down` for handles still unanswered when its drain timeout passes.
  deferred_reply defer();

  // --- Response metadata, error details, the caller's address (docs/protocol.md 3.2, 3.3)
  /// Adds a response header: a pair the caller receives with the answer, ok or not
  /// (call_outcome::headers), e.g. a server-timing or a redirect hint. Keys follow the request
  /// rules (ringrpc/metadata.hpp): a lowercase token, unique among the headers. Headers and
  /// trailers together are capped as request metadata is (server_options::
  /// max_metadata_entries / max_metadata_bytes), so a client with default caps accepts them.
  /// False, and nothing added, for a malformed or repeated key, past the caps, on a one-way
  /// call (never answered), and once the answer was given (reply()/fail() encode it at once:
  /// add pairs first) or handed to defer() (add them on the deferred_reply). Nothing is
  /// allocated for a call whose handler adds none.
  bool add_header(std::string_view key, std::string_view value);
  /// Adds a response trailer (call_outcome::trailers): as add_header, for what is known only
  /// at the end (a checksum, a cost). Headers and trailers are separate lists: a key may be in
  /// both. On the wire both travel in the one answer frame.
  bool add_trailer(std::string_view key, std::string_view value);
  /// fail() with structured error details: opaque bytes the caller receives in
  /// call_outcome::details (e.g. a serialized google.rpc.Status or a FlatBuffer of the
  /// service's own); copied here.
  void fail(status code, std::string_view message, std::span<const std::byte> details);
  /// The caller's address as "127.0.0.1:54321" or "[::1]:54321" ("unknown" when the socket
  /// could not tell; empty for a local post that has no caller). Formatted on each call: read
  /// it once.
  std::string peer_address() const;
  // --- interceptors (ringrpc/interceptor.hpp)
  /// Attaches a note to this call for the handler (and the interceptors after this one), e.g.
  /// an authenticated user's id from a server interceptor's before_call. A key set again is
  /// replaced. False, with nothing kept, when the server has no interceptors installed (notes
  /// live only on intercepted calls, so other calls pay nothing for them).
  bool annotate(std::string_view key, std::string_view value);
  /// The note under `key`, valid until the handler returns; nullopt when there is none.
  std::optional<std::string_view> annotation(std::string_view key) const noexcept;

  call_context(detail::call& c, detail::server_core* core) noexcept : _call(c), _core(core) {}

  // --- Deadlines and cancellation (docs/execution.md, "Deadlines and cancellation")
  /// The caller's deadline on the steady clock; nullopt when it set none (never a max() to
  /// overflow). Client calls made from this handler inherit it by themselves.
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept;
  /// Runs `hook` once when this call is cancelled: a Cancel frame from the caller, its
  /// connection gone, or the server stopping past its drain timeout — what makes cancelled()
  /// true. It runs on the server thread that noticed (the shard's I/O thread for a Cancel
  /// frame or a lost connection, the stopping thread for a stop), or at once on this thread
  /// when the call is cancelled already. Never after the call is answered: once the handler
  /// has returned (or, deferred, the deferred_reply has answered) a hook that has not run
  /// never will, and answering waits for one running on another thread at that moment. So
  /// keep it short and non-blocking (set a flag, cancel a stop_source, answer a
  /// deferred_reply); an exception it throws is dropped. Several hooks may be added; each
  /// runs once. Costs nothing for calls that never add one. Throws std::logic_error after
  /// defer() (use the deferred_reply's on_cancel), std::bad_alloc.
  void on_cancel(std::function<void()> hook);

 private:
  friend class detail::server_core;
  friend class call_parent;
  friend class detail::intercepted_call;
  detail::call& _call;
  detail::server_core* _core;
  bool _answered = false;
  bool _deferred = false;
  std::shared_ptr<detail::deferred_state> _deferred_state;  // after defer(): for call_parent
  detail::call_annotations* _notes = nullptr;  // set while an interceptor chain runs the call
};

/// The right to answer one call later, from any thread. Movable, not copyable. Exactly one
/// answer reaches the caller: the first of reply()/fail() (later ones return false), the
/// destructor's `internal` if neither happened, or the server's `shutting_down` when it stops
/// first.
class deferred_reply {
 public:
  deferred_reply() noexcept = default;
  deferred_reply(deferred_reply&&) noexcept = default;
  deferred_reply& operator=(deferred_reply&& other) noexcept;
  ~deferred_reply();

  /// False if this handle was already used, or the server answered for it while stopping.
  bool reply(std::span<const std::byte> payload);
  bool reply(std::string_view payload) {
    return reply(std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload.data()), payload.size()));
  }
  bool fail(status code, std::string_view message);

  /// The request payload, valid until this handle answers; if the stopping server answered
  /// for it at its drain timeout, valid until this handle is destroyed or tries to answer (a
  /// worker still reading it meanwhile is safe).
  std::span<const std::byte> payload() const noexcept;
  bool cancelled() const noexcept;
  std::chrono::nanoseconds remaining() const noexcept;
  /// True while the handle still owes an answer.
  explicit operator bool() const noexcept;

  // --- Response metadata, error details, the caller's address (as on call_context)
  /// As call_context::add_header; also false once this handle answered (or never held a call).
  bool add_header(std::string_view key, std::string_view value);
  bool add_trailer(std::string_view key, std::string_view value);
  /// fail() with structured error details (call_context::fail with details).
  bool fail(status code, std::string_view message, std::span<const std::byte> details);
  /// As call_context::peer_address; empty once this handle answered.
  std::string peer_address() const;
  // --- Deadlines and cancellation (docs/execution.md, "Deadlines and cancellation")
  /// As call_context::on_cancel, for a call answered later: the hook runs once if the call is
  /// cancelled before this handle answers (at once, on this thread, if it is already), never
  /// after. The stopping server's drain timeout counts as a cancellation. False when the handle
  /// has answered already (the hook is dropped).
  bool on_cancel(std::function<void()> hook);

 private:
  friend class call_context;
  friend class call_parent;
  explicit deferred_reply(std::shared_ptr<detail::deferred_state> s) noexcept : _state(std::move(s)) {}
  std::shared_ptr<detail::deferred_state> _state;
};

/// A method as a plain function; registered with server::add_method it becomes an endpoint of
/// its own. An exception becomes an `internal` reply whose message is what().
using method_handler = std::function<void(call_context&)>;

}  // namespace ringrpc

RINGRPC_API_END

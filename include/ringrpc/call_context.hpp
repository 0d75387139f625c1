#pragma once
/// \file One call as its handler sees it, and the handle that answers it later.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include <optional>

#include "ringrpc/metadata.hpp"
#include "ringrpc/peer_identity.hpp"
#include "ringrpc/status.hpp"

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

  // --- interceptors (ringrpc/interceptor.hpp)
  /// Attaches a note to this call for the handler (and the interceptors after this one), e.g.
  /// an authenticated user's id from a server interceptor's before_call. A key set again is
  /// replaced. False, with nothing kept, when the server has no interceptors installed (notes
  /// live only on intercepted calls, so other calls pay nothing for them).
  bool annotate(std::string_view key, std::string_view value);
  /// The note under `key`, valid until the handler returns; nullopt when there is none.
  std::optional<std::string_view> annotation(std::string_view key) const noexcept;

  call_context(detail::call& c, detail::server_core* core) noexcept : _call(c), _core(core) {}

 private:
  friend class detail::server_core;
  friend class detail::intercepted_call;
  detail::call& _call;
  detail::server_core* _core;
  bool _answered = false;
  bool _deferred = false;
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

  /// The request payload, valid until this handle answers.
  std::span<const std::byte> payload() const noexcept;
  bool cancelled() const noexcept;
  std::chrono::nanoseconds remaining() const noexcept;
  /// True while the handle still owes an answer.
  explicit operator bool() const noexcept;

 private:
  friend class call_context;
  explicit deferred_reply(std::shared_ptr<detail::deferred_state> s) noexcept : _state(std::move(s)) {}
  std::shared_ptr<detail::deferred_state> _state;
};

/// A method as a plain function; registered with server::add_method it becomes an endpoint of
/// its own. An exception becomes an `internal` reply whose message is what().
using method_handler = std::function<void(call_context&)>;

}  // namespace ringrpc

#pragma once
/// \file Downstreams: services an on-shard coroutine handler calls on its own shard's ring, with
/// no thread hop (docs/architecture.md, "Shard-local clients"; docs/execution.md, "Coroutines
/// on a shard").
///
///     ringrpc::downstream inventory = ringrpc::add_downstream(server, "inventory", "10.0.0.7", 7000);
///     ringrpc::add_coroutine_method(server, "order", [inventory](ringrpc::deferred_reply& call)
///                                                        -> ringrpc::task<void> {
///       ringrpc::call_result r = co_await ringrpc::co_call(inventory, "reserve", call.payload());
///       if (r.ok()) call.reply(r.payload);
///       else call.fail(r.code, r.message);
///     }, ringrpc::on_shard);
///
/// - A downstream is a name and an address, not a connection: each shard that calls it opens
///   its own connection on first use (IORING_OP_CONNECT on the shard's ring), writes its
///   requests with the shard's other writes and reads the replies with its receives. The
///   handler resumes on the shard that decoded its incoming call, in the loop turn that read the
///   reply.
/// - co_call(downstream, ...) may only be awaited on a shard of the server that added it (an
///   on-shard handler, or a coroutine such a handler awaits or starts); anywhere else it throws
///   std::logic_error ("use a client"): a pool thread or a thread of yours reaches a service
///   through a ringrpc::client.
/// - Results are a client's: call_result, the same call_error values and messages, the call's
///   deadline (its options, else downstream_options::default_timeout, capped by its parent's)
///   and cancellation (its parent, the frame's stop, call_options::cancel). A deadline that
///   passes or a cancellation sends the downstream a Cancel frame.
/// - A target that is down: a connect that fails fails the calls waiting for it with
///   connection_closed naming the target and the reason, and starts a backoff (100 ms doubling
///   to 5 s, with jitter) during which calls fail at once, unsent, the same way. The first call
///   after it tries again. A connection that fails later fails its calls in flight; the next
///   call reconnects.
/// - Bounds per shard: downstream_options::max_pending_calls and max_pending_bytes (client_busy
///   beyond them, at once), max_frame_bytes for a reply.
/// - Plaintext only, unary calls only (no metadata defaults, no interceptors) in this version;
///   a TLS target, streams and per-downstream metadata are reached through a ringrpc::client.
/// - The server's stop() fails the downstream calls still in flight once its shards close their
///   connections (connection_closed, "server is stopping").

#include "ringrpc/cxx20.hpp"

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ringrpc/client.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class server;

namespace detail {
struct downstream_access;
}

struct downstream_options {
  /// How long a connect may take before it fails (and the backoff starts).
  std::chrono::milliseconds connect_timeout{1000};
  /// The deadline of a call whose options give none (zero: no deadline).
  std::chrono::microseconds default_timeout{0};
  /// Calls queued or in flight on one shard's connection to the downstream; beyond it,
  /// client_busy at once.
  std::uint32_t max_pending_calls = 4096;
  /// Request bytes queued or in flight on one shard's connection; beyond it, client_busy.
  std::size_t max_pending_bytes = 64u << 20;
  /// Largest reply frame accepted; a larger one fails the connection with protocol_error.
  std::uint32_t max_frame_bytes = 64u << 20;
};

/// A downstream of one server (add_downstream). Cheap to copy; valid while its server lives.
class downstream {
 public:
  downstream() = default;
  /// The name it was added with ("" for a default-constructed one).
  std::string_view name() const noexcept;

 private:
  friend downstream add_downstream(server&, std::string, std::string, std::uint16_t, downstream_options);
  friend struct detail::downstream_access;
  const void* _spec = nullptr;  // the server's record of it (src/server/downstream.hpp)
};

/// Adds downstream `name` (unique per server; letters, digits, '.', '-', '_') at `host` (a name
/// or an address, resolved now) and `port`. Before start(): std::logic_error after it;
/// std::invalid_argument for a bad or duplicate name, a port of 0 or a host that does not
/// resolve.
downstream add_downstream(server& s, std::string name, std::string host, std::uint16_t port,
                          downstream_options options = {});

namespace coro_abi {

/// Starts a call to `d` on the calling thread's shard; `done` runs on that shard (or inline,
/// for a call refused at once). A coroutine with no home gets the shard as its home (`slot`),
/// so that it never resumes in the middle of the shard's receive. Throws std::logic_error off a
/// shard of d's server.
void start_downstream_call(const downstream& d, std::string_view method, std::span<const std::byte> payload,
                           call_callback done, call_options options, resume_slot& slot);

}  // namespace coro_abi

/// `co_await co_call(downstream, ...)`: a call on this shard's connection to the downstream,
/// yielding call_result. `method` and `payload` need to stay valid only until the co_await
/// starts.
class downstream_call_awaitable : public coro_abi::call_awaiter_base {
 public:
  downstream_call_awaitable(const downstream& d, std::string_view method, std::span<const std::byte> payload,
                            call_options options) noexcept
      : _downstream(d), _method(method), _payload(payload), _options(std::move(options)) {}
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    return suspend_with(h, [this](coro_abi::frame_context* ctx) {
      coro_abi::prepare_call(ctx, _options);
      coro_abi::start_downstream_call(_downstream, _method, _payload, callback(), std::move(_options), _slot);
    });
  }

 private:
  downstream _downstream;
  std::string_view _method;
  std::span<const std::byte> _payload;
  call_options _options;
};

inline downstream_call_awaitable co_call(const downstream& d, std::string_view method,
                                         std::span<const std::byte> payload, call_options options = {}) {
  return downstream_call_awaitable(d, method, payload, std::move(options));
}
inline downstream_call_awaitable co_call(const downstream& d, std::string_view method, std::string_view payload,
                                         call_options options = {}) {
  return co_call(d, method, std::as_bytes(std::span(payload.data(), payload.size())), std::move(options));
}

}  // namespace ringrpc

RINGRPC_API_END

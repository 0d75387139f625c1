#pragma once
/// \file A client channel: calls balanced over the live members of a service, one
/// ringrpc::client connection per member.
///
///     auto ch = ringrpc::channel::create("10.0.0.5:7000,10.0.0.6:7000");
///     auto r = ch.call("echo", "hi", {.idempotent = true});
///
/// Targets: "HOST:PORT", a comma-separated static list, or any membership a resolver pushes
/// (ringrpc/discovery.hpp's etcd resolver gives "etcd://HOST:PORT/service"; the core knows
/// only the resolver interface below).
///
/// Members: each has one connection. A member whose connection fails, or that misses
/// `eject_after_failures` health checks in a row (a call of `health_method`, by default the
/// server's built-in `ringrpc.ping`; any answer but SHUTTING_DOWN counts as alive, so does
/// "unknown method" from a server too old to have the ping), or whose ping says SHUTTING_DOWN
/// (it is stopping), is ejected: no call goes to it until
/// it is reconnected, with exponential backoff from `reconnect_backoff_min` to `_max`.
///
/// Failover: a call whose connection fails under it is retried on another member only when
/// it is marked idempotent (channel_call_options::idempotent), within the channel's retry
/// budget (gRPC's retry throttling: each failure costs a token, each success gives back
/// `retry_token_ratio`, and retries stop while fewer than half the tokens remain). A call not
/// marked idempotent fails with call_error::connection_closed and a message saying it was not
/// retried. A call refused before anything was sent (client_busy, or a member found closed)
/// moves to another member whether idempotent or not.
///
/// Streams (open_stream): a stream goes to one member, picked as a call's first attempt, and
/// lives on that member's connection until its end: never retried nor moved once open.
///
/// Thread-safe: calls from any thread; the member set is an immutable snapshot read without a
/// lock. Callbacks run on the channel's I/O thread (one client_runtime per channel).

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace detail {
class channel_core;
}  // namespace detail

/// One member of a service as a resolver reports it.
struct member_address {
  std::string host;
  std::uint16_t port = 0;
  std::uint32_t weight = 1;  ///< recorded and reported; the policies treat members alike
  std::string zone;
  bool operator==(const member_address&) const = default;
};

/// Pushes the full membership whenever it changes. start() is called once by the channel; the
/// resolver calls `update` (from any thread, one call at a time) with every member each time.
/// stop() must return only once no `update` call is running or will start.
class resolver {
 public:
  virtual ~resolver() = default;
  virtual void start(std::function<void(std::vector<member_address>)> update) = 0;
  virtual void stop() noexcept = 0;
  /// For messages and stats, e.g. "etcd://127.0.0.1:2379/echo".
  virtual std::string describe() const = 0;
};

/// A resolver for a fixed list: "HOST:PORT" or "H1:P1,H2:P2,...". Throws std::invalid_argument.
std::shared_ptr<resolver> make_static_resolver(std::string_view list);

enum class balancing_policy : std::uint8_t {
  round_robin,           ///< each member in turn (per calling thread)
  least_outstanding,     ///< the member with the fewest calls in flight
  power_of_two_choices,  ///< the less loaded of two members picked at random
};

std::string_view to_string(balancing_policy p) noexcept;
/// "round_robin", "least_outstanding", "p2c" (or "power_of_two_choices"); throws
/// std::invalid_argument for anything else.
balancing_policy parse_balancing_policy(std::string_view name);

struct channel_options {
  balancing_policy policy = balancing_policy::round_robin;
  client_options client;  ///< for each member's connection
  std::chrono::milliseconds health_interval{1000};
  std::chrono::milliseconds health_timeout{1000};
  /// The server's built-in ping, answered by its reader thread (docs/protocol.md). A member
  /// whose ping says SHUTTING_DOWN (it is stopping) is ejected at once.
  std::string health_method = "ringrpc.ping";
  unsigned eject_after_failures = 2;  ///< health checks missed in a row; a failed connection ejects at once
  std::chrono::milliseconds reconnect_backoff_min{100};
  std::chrono::milliseconds reconnect_backoff_max{5000};
  unsigned max_attempts = 3;           ///< per call, the first included
  double retry_max_tokens = 10;        ///< the retry budget (gRPC retryThrottling maxTokens)
  double retry_token_ratio = 0.1;      ///< tokens a success gives back (tokenRatio)
  /// The I/O thread the members' connections use; null: the channel starts its own. Many
  /// channels (or channels and clients) may share one, as clients do.
  std::shared_ptr<client_runtime> runtime;
  /// Interceptors around each logical call of the channel (ringrpc/interceptor.hpp), in order:
  /// before_call once when the call is made, after_call once with its final outcome and the
  /// number of attempts; retries inside are not seen separately. Interceptors in
  /// `client.interceptors` instead run on each member's connection: for every attempt (and
  /// the health checks). Empty (the default): a call pays two tests for them.
  client_interceptors interceptors;
};

struct channel_call_options {
  std::chrono::microseconds timeout{0};  ///< per attempt; 0: client_options::default_timeout
  /// The call may run twice without harm: it may then be retried on another member when its
  /// connection fails with the call in flight.
  bool idempotent = false;
  /// Per-call metadata, sent with every attempt as call_options::metadata is (after the
  /// member connection's own client_options::metadata), e.g. a per-call traceparent.
  std::vector<metadata_entry> metadata;

  // --- Deadlines and cancellation: as call_options (client.hpp), for every attempt. The
  // parent (the one named, else the handler's call on this thread when call_async is called)
  // is taken once, at call_async: retries run on the channel's I/O thread and follow it too,
  // and never outlive its deadline.
  call_parent parent;
  bool detached = false;
  std::stop_token cancel;
};

/// Counters of a channel (monotonic unless said otherwise).
struct channel_stats {
  std::uint64_t calls = 0;          ///< call_async() calls
  std::uint64_t streams = 0;        ///< open_stream() calls
  std::uint64_t retries = 0;        ///< attempts after the first (of calls and stream opens)
  std::uint64_t retries_throttled = 0;  ///< retries the budget refused
  std::uint64_t failed_not_idempotent = 0;  ///< failed in flight, not retried: not idempotent
  std::uint64_t no_member = 0;      ///< failed at once: no live member (calls and streams)
  std::uint64_t ejections = 0;
  std::uint64_t reconnects = 0;     ///< members connected again after an ejection
  std::uint64_t membership_updates = 0;
  double retry_tokens = 0;          ///< now
};

/// A member as the channel sees it now.
struct channel_member_state {
  member_address address;
  bool up = false;                 ///< connected and taking calls
  std::uint64_t outstanding = 0;   ///< calls in flight and streams open on it now
  std::uint64_t calls = 0;         ///< attempts sent to it (streams not included)
  std::uint64_t failures = 0;      ///< connection failures and missed health checks
};

class channel {
 public:
  /// "HOST:PORT" or a comma-separated list. Throws std::invalid_argument for anything else
  /// (etcd:// targets: ringrpc::discovery::open_channel).
  static channel create(std::string_view target, channel_options options = {});
  /// Members from `r`. Connects in the background (wait_for_members() waits for it); a call
  /// made while no member is up fails at once with connection_closed naming the target.
  channel(std::shared_ptr<resolver> r, channel_options options = {});
  channel(channel&&) noexcept;
  channel& operator=(channel&&) noexcept;
  ~channel();  ///< close()s

  /// `done` runs exactly once, on the channel's I/O thread, or on the calling thread when the
  /// call fails at once (no live member, channel closed).
  void call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                  channel_call_options options = {});
  reply_future<call_result> call_future(std::string_view method, std::span<const std::byte> payload,
                                       channel_call_options options = {});
  /// Synchronous; without a timeout from the options or client_options::default_timeout,
  /// each attempt is bounded by client_options::sync_call_timeout. Throws std::logic_error on
  /// a client runtime's thread (the channel's I/O thread included).
  call_result call(std::string_view method, std::span<const std::byte> payload,
                   channel_call_options options = {});
  call_result call(std::string_view method, std::string_view payload, channel_call_options options = {}) {
    return call(method, std::span(reinterpret_cast<const std::byte*>(payload.data()), payload.size()),
                options);
  }

  /// One-way message (client::send_one_way with call_options) to one member, picked as a
  /// call's first attempt; `options.metadata` and `timeout` go with it, `idempotent` is moot:
  /// a one-way message is never retried. False, and nothing sent, when the channel is closed,
  /// no member is up, or that member's connection refused it (its pending limits).
  bool send_one_way(std::string_view method, std::span<const std::byte> payload,
                    const channel_call_options& options = {});

  /// Opens a stream (include ringrpc/client_stream.hpp) on one member, as client::open_stream
  /// does on its connection, with the same options and the same handle: `request` is a server
  /// stream's one request; `options.timeout` zero means client_options::default_timeout of
  /// `channel_options::client`. Never blocks and never throws (but std::bad_alloc): a stream
  /// that cannot open is returned ended, finish() saying why.
  ///
  /// The member is picked by the channel's policy, as a call's first attempt; while the stream
  /// is open it counts in that member's `outstanding`, which least_outstanding and p2c weigh.
  /// The stream stays on that member's connection for its whole life, also when the member is
  /// ejected or leaves the membership (the connection is closed after the stream's end, as
  /// after a call in flight): it is never retried nor moved, and a lost connection ends it with
  /// connection_closed, code unavailable, "connection lost: ...", as on a client.
  ///
  /// Before that, one retry: members whose connections the channel knows to be down are passed
  /// over, and a member whose client refuses the open at once (client_busy: its
  /// max_pending_calls or _bytes full; nothing was sent) is followed by one more member, if
  /// `max_attempts` is at least 2 and the retry budget allows (idempotent or not, as calls
  /// refused before they are sent). No more: the open is never blocked, and a connection that
  /// fails after open_stream has returned fails a stream whose handle is the caller's, who may
  /// have written to it already (open again). Other refusals (an expired deadline, a member
  /// connection with interceptors) would be the same on every member and end the stream as is.
  ///
  /// Ends at once: no live member: call_error::connection_closed, code unavailable, "no live
  /// member of TARGET" (a call's failure, counted in channel_stats::no_member); the channel
  /// closed: client_closed, code cancelled; channel interceptors (channel_options::interceptors;
  /// they do not see streams yet): intercepted, code unimplemented. close() ends the streams
  /// still open as closing a client does: client_closed, code cancelled, "client closed".
  client_stream open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                            const stream_options& options);
  client_stream open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request = {});

  /// Blocks until `n` members are up or `timeout` passes; true if they are.
  bool wait_for_members(std::size_t n, std::chrono::milliseconds timeout) const;
  std::vector<channel_member_state> members() const;
  channel_stats stats() const;
  /// Stops the resolver, fails pending calls with client_closed, ends open streams (as above)
  /// and closes every connection. Must not race with calls or stream opens (as client::close()).
  void close();

  /// For typed stubs: the cell that follows this channel through moves (detail::object_home).
  const std::shared_ptr<detail::object_home<channel>>& home() const noexcept { return _home; }

 private:
  std::shared_ptr<detail::channel_core> _core;
  std::shared_ptr<detail::object_home<channel>> _home;
};

}  // namespace ringrpc

RINGRPC_API_END

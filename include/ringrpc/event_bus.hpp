#pragma once
/// \file The event bus: what the server does (lifecycle, connections, rejections, slow calls,
/// exhausted pools, limits hit) delivered to listeners on named asynchronous queues, after
/// Spark's LiveListenerBus / AsyncEventQueue.
///
/// Threads. Any thread may post(); posting never blocks and never waits for a listener, so I/O
/// threads may post. Each queue has one dispatch thread that calls that queue's listeners one
/// event at a time, in order. A slow listener holds up (and makes drop) only its own queue. One
/// more thread per bus writes the rate-limited drop warnings, so the logger never runs on a
/// posting thread.
///
/// Ordering. Per queue, events are delivered in the order they were posted as seen by each
/// posting thread (two threads' events interleave in some order). Lifecycle events keep their
/// place in that order even though they never wait for capacity.
///
/// Wiring (no globals: main() or the server builder owns the bus):
///
///     event_bus bus;
///     bus.add_queue("log", 1024);
///     bus.subscribe("log", std::make_shared<my_logging_listener>());
///     bus.post(event{.kind = event_kind::server_started});  // buffered: not started yet
///     bus.start();
///     ...
///     bus.stop();  // delivers everything queued, then joins

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// What happened. The first five are lifecycle events: never dropped for lack of capacity.
enum class event_kind : std::uint8_t {
  server_started,     ///< detail: listen address
  server_stopping,    ///< detail: why (signal, request)
  server_stopped,
  endpoint_started,   ///< name: endpoint; detail: its policy and pool
  endpoint_stopped,   ///< name: endpoint
  connection_opened,  ///< peer; id: connection id. TLS: once the handshake is done; detail: the verified certificate's subject
  connection_closed,  ///< peer; id: connection id; detail: reason (eof, idle, error text, ...). Only for opened ones
  call_rejected,      ///< peer; name: pool or queue; detail: which path (busy, deadline, ...)
  slow_call,          ///< peer; name: method; duration_ns; value: threshold in ns
  pool_exhausted,     ///< name: pool; value: its size
  limit_hit,          ///< peer; name: the knob (e.g. "max_connections"); value: its setting
  call_completed,     ///< sampled; peer; name: method; duration_ns; detail: status
};

inline constexpr std::size_t event_kind_count = 12;

/// True for server_* and endpoint_* kinds.
constexpr bool is_lifecycle(event_kind k) noexcept {
  return k <= event_kind::endpoint_stopped;
}

/// Stable lower-case name, e.g. "slow_call"; "unknown_event" for values not listed above.
std::string_view to_string(event_kind k) noexcept;

/// A set of kinds, for listeners that want only some. A plain value.
class event_kind_set {
 public:
  constexpr event_kind_set() noexcept = default;
  constexpr event_kind_set(std::initializer_list<event_kind> kinds) noexcept {
    for (event_kind k : kinds) add(k);
  }
  static constexpr event_kind_set all() noexcept {
    event_kind_set s;
    s._bits = (std::uint32_t{1} << event_kind_count) - 1;
    return s;
  }
  constexpr event_kind_set& add(event_kind k) noexcept {
    _bits |= bit(k);
    return *this;
  }
  constexpr bool contains(event_kind k) const noexcept { return (_bits & bit(k)) != 0; }
  constexpr bool empty() const noexcept { return _bits == 0; }
  /// Bit i stands for the kind whose value is i.
  constexpr std::uint32_t bits() const noexcept { return _bits; }
  constexpr bool operator==(const event_kind_set&) const noexcept = default;

 private:
  static constexpr std::uint32_t bit(event_kind k) noexcept {
    return std::uint32_t{1} << static_cast<unsigned>(k);
  }
  std::uint32_t _bits = 0;
};

/// One event, a plain value. Which fields a kind fills is listed at event_kind; the rest stay
/// empty or zero. Posting copies nothing per queue: the bus shares one immutable copy.
struct event {
  event_kind kind = event_kind::server_started;
  /// Wall-clock time of the event; post() stamps it when left at the epoch.
  std::chrono::system_clock::time_point timestamp{};
  std::string peer;    ///< remote "address:port", when the event concerns a connection
  std::string name;    ///< what it is about: endpoint, method, pool, queue or knob
  std::string detail;  ///< why, or other free text
  std::uint64_t duration_ns = 0;
  std::uint64_t value = 0;  ///< a size, count or threshold, by kind
  std::uint64_t id = 0;     ///< connection or call id; 0 when none
};

/// Receives events. Implementations are called on the dispatch thread of each queue they are
/// subscribed to, one event at a time per queue; a listener subscribed to two queues is called
/// from two threads and must then be thread-safe. An exception thrown by on_event() is caught,
/// counted (event_queue_stats::listener_errors) and logged at a limited rate; the queue goes on.
/// A listener must not call event_bus::stop() (it would wait for itself).
class event_listener {
 public:
  virtual ~event_listener() = default;
  virtual void on_event(const event& e) = 0;
};

/// Knobs of one bus.
struct event_bus_options {
  /// Receives warning lines (no trailing newline): drops, listener exceptions. Called from the
  /// bus's own threads, never from a posting thread, possibly from several threads at once.
  /// Empty: one line at a time to stderr.
  std::function<void(std::string_view)> logger;
  /// At most one drop warning per queue per interval, and one listener-error line per queue per
  /// interval (Spark's LOGGING_INTERVAL is one minute too).
  std::chrono::steady_clock::duration warning_interval = std::chrono::minutes(1);
  /// The time the rate limit is measured in; empty: steady_clock::now. Tests inject a fake. Must
  /// be callable from any thread.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

/// One queue's counters at some recent moment; each field is exact once the bus is stopped.
/// Then posted == delivered + dropped.
struct event_queue_stats {
  std::string name;
  std::size_t capacity = 0;     ///< effective capacity (the requested one rounded up to 2^n)
  std::uint64_t posted = 0;     ///< events offered to this queue (accepted or dropped)
  std::uint64_t delivered = 0;  ///< events handed to all of the queue's listeners
  std::uint64_t dropped = 0;    ///< events refused because the queue was full
  std::array<std::uint64_t, event_kind_count> dropped_by_kind{};  ///< index: event_kind value
  /// Events posted after stop() began; neither delivered nor counted in `posted`.
  std::uint64_t rejected_after_stop = 0;
  std::uint64_t listener_errors = 0;  ///< exceptions thrown by on_event()
  std::uint64_t depth = 0;            ///< accepted, not yet delivered (includes the one in hand)
  std::uint64_t processing_ns_total = 0;  ///< time spent in listeners, all events
  std::uint64_t processing_ns_max = 0;    ///< longest single event, all listeners together
};

/// Named asynchronous queues of events, each with its own capacity, listeners and dispatch
/// thread. Every posted event goes to every queue (that wants its kind, once started).
///
/// Threads: post() and stats() from any thread, at any time during the bus's lifetime.
/// add_queue(), subscribe(), unsubscribe(), start() and stop() from any thread, also
/// concurrently, but not from inside a listener for stop().
/// Ownership: the bus owns its queues and threads and shares ownership of its listeners (a
/// listener lives at least until it is unsubscribed and the dispatch thread has moved on, or
/// the bus is destroyed).
/// Lifetime: the bus must outlive every thread that may still post; the destructor stop()s.
class event_bus {
 public:
  explicit event_bus(event_bus_options options = {});
  ~event_bus();  ///< stop()s if still running
  event_bus(const event_bus&) = delete;
  event_bus& operator=(const event_bus&) = delete;

  /// Adds a queue holding at most `capacity` (rounded up to a power of two, at least 2)
  /// undelivered non-lifecycle events. A queue added after start() starts at once and sees only
  /// events posted from then on. Throws std::invalid_argument for an empty or duplicate name or
  /// a capacity of 0 or above 2^30; std::logic_error after stop(); std::system_error if its
  /// thread cannot be created.
  void add_queue(std::string name, std::size_t capacity);

  /// Adds `listener` to queue `queue` for the kinds in `kinds`. Takes effect for the events the
  /// dispatch thread takes next; events posted before start() reach listeners subscribed before
  /// start(). Once started, a queue accepts only kinds some listener of it wants (lifecycle
  /// always), so unwanted kinds cost no capacity and are not counted. Throws
  /// std::invalid_argument for an unknown queue or a null listener.
  void subscribe(std::string_view queue, std::shared_ptr<event_listener> listener,
                 event_kind_set kinds = event_kind_set::all());

  /// Removes every subscription of `listener` from `queue`; returns false if there was none. The
  /// listener may still be inside on_event() for an event taken before the call.
  bool unsubscribe(std::string_view queue, const event_listener* listener);

  /// Starts the dispatch threads; events buffered so far are delivered first, in order.
  /// Idempotent; does nothing after stop(). Throws std::system_error if a thread cannot be
  /// created.
  void start();

  /// Delivers every event accepted so far, then ends the threads and returns. Events posted
  /// once stop() has begun are rejected (counted, not delivered). Starts the threads first if
  /// start() was never called, so buffered events are still delivered. Idempotent: a second
  /// call returns once the first has finished.
  void stop();

  /// Offers `e` to every queue. Never blocks: a full queue drops it and counts it (per queue,
  /// per kind), except lifecycle events, which are always accepted. Before start() events are
  /// buffered, within the same capacities. Costs one allocation (the shared immutable copy) and
  /// one compare-and-swap per queue; a wake-up system call only when a dispatch thread sleeps.
  /// If the allocation fails, the event counts as dropped by every queue.
  void post(event e) noexcept;
  /// Whether some queue would take an event of `kind` now: lets a hot path skip building an
  /// event nobody listens to (one load per queue, no allocation).
  bool wants(event_kind kind) const noexcept;

  /// Counters of every queue, in the order they were added.
  std::vector<event_queue_stats> stats() const;
  /// Counters of one queue; nullopt if there is no queue of that name.
  std::optional<event_queue_stats> stats(std::string_view queue) const;

 private:
  struct impl;
  std::unique_ptr<impl> _impl;
};

}  // namespace ringrpc

RINGRPC_API_END

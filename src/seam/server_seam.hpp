#pragma once
// What the server module publishes for the library built beside it (libringrpc_ops): what a
// configuration file sets before start(), a way to add a part that lives and dies with the
// server (the admin HTTP server), and read access to a running server for the status pages.
//
// Declarations only, over public types and plain data; the server module defines them
// (src/server/server_seam.cpp, in the core library). So ops compiles against no private
// header of the server, and the server's internals can change without ops noticing as long as
// these few functions keep their meaning. Embedders do not use this: they have the public
// headers.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/metric_histogram.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/event_bus.hpp"
#include "ringrpc/log.hpp"
#include "ringrpc/server.hpp"

namespace ringrpc::detail {

class server_core;

/// A part that lives and dies with a server, without the server knowing what it is.
class server_part {
 public:
  virtual ~server_part() = default;
  /// Once the listener is up and before start() returns; a throw fails start().
  virtual void start() = 0;
  /// After every connection is closed and every thread of the server has been joined.
  virtual void stop() noexcept = 0;
};

/// Where a server is in its life: configured -> running -> draining (no new calls run) ->
/// stopped.
enum class server_phase { configured, running, draining, stopped };

/// Statuses there are (status::ok .. status::unknown): the index of the counts below.
inline constexpr std::size_t status_kinds = 22;

/// The calls to one method name, merged over every thread.
struct method_calls {
  std::string name;      ///< as the callers wrote it ("echo", "echo.x", or "(other)")
  std::string endpoint;  ///< the registered endpoint it reaches now; "" for none
  std::array<std::uint64_t, status_kinds> by_status{};
  metric_histogram::snapshot processing;
  std::uint64_t stalls = 0;    ///< its user code held a shard's thread over the stall threshold
  std::uint64_t stall_ns = 0;  ///< for this long in total
};

/// The per-call metrics (server_options::metrics), merged over every thread.
struct call_totals {
  std::array<std::uint64_t, status_kinds> by_status{};
  metric_histogram::snapshot queue_time;
  metric_histogram::snapshot processing_time;
  std::vector<method_calls> methods;  ///< sorted by name
};

/// One open connection as /connections shows it.
struct connection_row {
  std::uint64_t id = 0;
  std::string peer;
  std::int64_t accepted_ns = 0;  ///< steady clock
  std::uint32_t calls_in_flight = 0;
  std::size_t queued_reply_bytes = 0;
  bool paused = false;
  unsigned reader = 0;
};

/// The functions; a class so that ringrpc::server can befriend them all at once.
class server_seam {
 public:
  /// The core behind `s`, for the core library's own parts that start from a public server
  /// (src/server/coro_server.cpp). Not for ops.
  static server_core& core_of(server& s) noexcept;
  static const server_core& core_of(const server& s) noexcept;
  /// Coroutine handler frames alive (src/server/coro_server.cpp): for tests and status pages.
  static std::uint64_t coroutine_frames(const server& s) noexcept;
  /// Downstream calls taken from the shards' pools and not given back (src/server/
  /// shard_downstreams.cpp): for tests.
  static std::uint64_t downstream_calls(const server& s) noexcept;
  // --- Before start(): each throws std::logic_error after it.
  /// Options for endpoint `name` that replace what its registration gives (the operator wins).
  static void set_endpoint_override(server& s, std::string name, endpoint_options options);
  /// The structured log's event queue: its capacity and the level whose events it takes, and
  /// the bus's interval between drop warnings.
  static void set_event_log(server& s, std::size_t queue_capacity, log_level level,
                            std::chrono::milliseconds warning_interval);
  /// Adds a part; parts start in the order added, after the listener is up, and stop after
  /// everything else.
  static void attach(server& s, std::unique_ptr<server_part> part);
  /// The first part of type T attached to `s`, or null.
  template <class T>
  static T* part(const server& s) noexcept {
    for (std::size_t i = 0;; ++i) {
      server_part* p = part_at(s, i);
      if (p == nullptr) return nullptr;
      if (auto* t = dynamic_cast<T*>(p)) return t;
    }
  }

  // --- Any thread, any time.
  static server_phase phase(const server& s) noexcept;
  /// Steady-clock time of start(); 0 before.
  static std::int64_t started_ns(const server& s) noexcept;
  /// Empty when server_options::metrics is off.
  static call_totals call_metrics(const server& s);
  /// One line per registered endpoint: its name, policy, pool and state.
  static std::vector<std::string> describe_endpoints(const server& s);
  static std::vector<event_queue_stats> event_queues(const server& s);
  /// Every connection of every shard now.
  static std::vector<connection_row> connections(const server& s);
  /// What the registration hook (server::add_registration) adds to /metrics; "" without one.
  static std::string registration_metrics_text(const server& s);

 private:
  static server_part* part_at(const server& s, std::size_t i) noexcept;
};

}  // namespace ringrpc::detail

#pragma once
/// \file Thread pools that run endpoint work (Dubbo's `threadpool` kinds).
///
/// A pool is named and may be shared by several endpoints, or owned by one endpoint so that a
/// slow endpoint cannot starve the others. Every pool rejects work it cannot take at once; the
/// server then answers the call SERVER_BUSY from the I/O thread (it never waits for a timeout).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

enum class pool_kind {
  /// `threads` threads for the pool's whole life. [Dubbo: fixed]
  fixed,
  /// Starts `core_threads`; grows to `threads` when the queue is full; threads above
  /// `core_threads` exit after `keep_alive` idle. [Dubbo: cached]
  cached,
  /// Like cached, but threads never exit once created. [Dubbo: limited]
  limited,
  /// Adds threads up to `threads` before it queues anything; the queue takes work only when
  /// every thread is busy and the pool is at its maximum. [Dubbo: eager]
  eager,
};

/// Stable lower-case name ("fixed", ...), and the reverse (false for an unknown name).
std::string_view to_string(pool_kind k) noexcept;
bool parse_pool_kind(std::string_view name, pool_kind& out) noexcept;

struct pool_options {
  pool_kind kind = pool_kind::fixed;
  /// Maximum threads. 0 = one per CPU in this process's affinity mask (`taskset` is honoured).
  /// [Dubbo: threads]
  unsigned threads = 0;
  /// Threads started at once and kept (cached, limited, eager). Ignored by fixed. [corethreads]
  unsigned core_threads = 0;
  /// Work waiting for a thread: 0 = hand-off (taken only by an idle or new thread), < 0 =
  /// unbounded (a warning is printed at start: memory is the only limit), > 0 = at most this
  /// many waiting. [Dubbo: queues]
  int queue = 1024;
  /// Idle time after which a thread above core_threads exits (cached, eager). [Dubbo: alive]
  std::chrono::milliseconds keep_alive{60'000};
};

/// A pool's state, read without stopping it.
struct pool_stats {
  std::string name;
  pool_kind kind = pool_kind::fixed;
  unsigned threads = 0;       ///< threads alive now
  unsigned active = 0;        ///< threads running a task now
  unsigned max_threads = 0;
  unsigned largest = 0;       ///< most threads ever alive at once
  std::uint64_t queued = 0;   ///< tasks waiting now
  std::int64_t queue_capacity = 0;  ///< as configured: 0 hand-off, < 0 unbounded
  std::uint64_t completed = 0;
  std::uint64_t rejected = 0;  ///< submissions refused (answered SERVER_BUSY)
};

}  // namespace ringrpc

RINGRPC_API_END

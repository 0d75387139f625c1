#pragma once
// The clock the phased stop (server_stop.cpp) measures drain_timeout on, and the grace it gives
// answers after that deadline. Tests replace the clock to step a stop through its deadlines on
// counts instead of waiting them out; nothing else does.

#include <atomic>
#include <chrono>

namespace ringrpc::detail {

using stop_clock_fn = std::chrono::steady_clock::time_point (*)() noexcept;

inline std::chrono::steady_clock::time_point steady_now() noexcept { return std::chrono::steady_clock::now(); }

/// Read a handful of times per stop; tests store their own function, and put steady_now back.
inline std::atomic<stop_clock_fn> stop_clock{&steady_now};

inline std::chrono::steady_clock::time_point stop_now() noexcept {
  return stop_clock.load(std::memory_order_acquire)();
}

/// Past the drain's deadline, the answers it made (SHUTTING_DOWN for calls still queued, those
/// of handlers that saw cancelled()) get this long to be written before every connection is
/// closed: a peer that is not reading must not hold the stop up (it once held it a second).
inline constexpr std::chrono::milliseconds abandon_grace{50};

}  // namespace ringrpc::detail

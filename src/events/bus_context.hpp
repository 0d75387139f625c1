#pragma once
// What every queue of one bus shares with it: the logger, the clock, the warning interval and
// the drop signal that wakes the monitor thread. Internal to src/events.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ringrpc/event_bus.hpp"

namespace ringrpc::detail {

using steady_time = std::chrono::steady_clock::time_point;

// An event count on a futex for the one monitor thread: like parking, plus a timeout.
class wakeup {
 public:
  std::uint32_t epoch() const noexcept { return _epoch.load(std::memory_order_acquire); }
  void notify() noexcept {
    _epoch.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  // Returns at once if notify() ran since `seen` was read; may return early, callers re-check.
  void wait(std::uint32_t seen, std::optional<std::chrono::nanoseconds> timeout) noexcept {
    timespec ts{};
    timespec* tsp = nullptr;
    if (timeout) {
      ts.tv_sec = static_cast<time_t>(timeout->count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(timeout->count() % 1'000'000'000);
      tsp = &ts;
    }
    syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, seen, tsp, nullptr, 0);
  }

 private:
  std::uint32_t* word() noexcept { return reinterpret_cast<std::uint32_t*>(&_epoch); }
  std::atomic<std::uint32_t> _epoch{0};
};

// What the queues share with their bus.
struct bus_context {
  explicit bus_context(event_bus_options& o)
      : logger(std::move(o.logger)), clock(std::move(o.clock)), interval(o.warning_interval) {
    if (!logger) {
      logger = [](std::string_view line) {
        // One fwrite per line: stderr is unbuffered, so lines from two threads do not mix.
        std::string text(line);
        text += '\n';
        std::fwrite(text.data(), 1, text.size(), stderr);
      };
    }
    if (!clock) clock = [] { return std::chrono::steady_clock::now(); };
  }

  void log(std::string_view line) noexcept {
    try {
      logger(line);
    } catch (...) {
      // A broken logger must not take a dispatch or monitor thread down with it.
    }
  }
  steady_time now() noexcept {
    try {
      return clock();
    } catch (...) {
      return std::chrono::steady_clock::now();
    }
  }

  // Called after a drop was counted (seq_cst). Only the first drop after the monitor cleared the
  // flag pays for a wake-up; while drops wait for their interval the monitor keeps the flag set
  // and polls instead, so sustained drops cost posters no system calls.
  void signal_drop() noexcept {
    if (!drops_signalled.load(std::memory_order_seq_cst) &&
        !drops_signalled.exchange(true, std::memory_order_seq_cst)) {
      monitor_wakeup.notify();
    }
  }

  std::function<void(std::string_view)> logger;
  std::function<steady_time()> clock;
  std::chrono::steady_clock::duration interval;
  std::atomic<bool> drops_signalled{false};
  wakeup monitor_wakeup;
};

}  // namespace ringrpc::detail

#pragma once
// Lets handler threads sleep while the call queue is empty, without a mutex.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringrpc::detail {

/// An event count on a futex. Consumers: prepare_wait(), re-check the queue, then wait() or
/// cancel_wait(). Producers: publish work, then wake(n). wake() costs a syscall only when
/// someone is waiting, so a busy pool pays one uncontended atomic load per batch.
class parking {
 public:
  std::uint32_t prepare_wait() noexcept {
    _waiters.fetch_add(1, std::memory_order_seq_cst);
    // The caller re-checks its queue next, possibly with relaxed loads: keep them after this.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return _epoch.load(std::memory_order_seq_cst);
  }
  void cancel_wait() noexcept { _waiters.fetch_sub(1, std::memory_order_relaxed); }
  /// Sleeps until wake() moves the epoch past `epoch` (returns at once if it already has).
  void wait(std::uint32_t epoch) noexcept;
  /// Like wait(), but gives up after `timeout` (CLOCK_MONOTONIC). False when the time ran out
  /// without the epoch moving; true otherwise (also on a spurious wake-up: callers re-check
  /// their queue and their deadline either way).
  bool wait_for(std::uint32_t epoch, std::chrono::nanoseconds timeout) noexcept;
  /// Wakes up to `n` sleepers, if any sleep.
  void wake(int n) noexcept {
    if (claim_wake() != nullptr) futex_wake(n);
  }
  /// The first half of wake(), for a caller that does the futex wake itself (a reader through
  /// its ring: uring/ring_futex.hpp): null when nobody sleeps; otherwise the futex word to
  /// wake (FUTEX_WAKE_PRIVATE), its epoch already moved on.
  std::uint32_t* claim_wake() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // publication before the waiter check
    if (_waiters.load(std::memory_order_seq_cst) == 0) return nullptr;
    _epoch.fetch_add(1, std::memory_order_seq_cst);
    return reinterpret_cast<std::uint32_t*>(&_epoch);
  }
  void wake_all() noexcept {
    _epoch.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(INT32_MAX);
  }

 private:
  void futex_wake(int n) noexcept;

  alignas(64) std::atomic<std::uint32_t> _epoch{0};
  alignas(64) std::atomic<std::uint32_t> _waiters{0};
};

}  // namespace ringrpc::detail

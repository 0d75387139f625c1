#pragma once
// The server-wide budget of bytes held for peers: partial frames, admitted requests, unwritten
// replies. Each thread charges its own account and settles with the shared total in chunks.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringrpc::detail {

/// One total for the whole server, moved only in chunks of `chunk_bytes` by the accounts, so
/// the hot path touches no shared cache line per call: a thread's charges and releases net out
/// in its own account, and the total is off by at most one chunk per account.
class memory_budget {
 public:
  static constexpr std::int64_t chunk_bytes = 64 * 1024;

  /// `limit` 0 disables the budget (exhausted() is never true).
  explicit memory_budget(std::size_t limit = 0) noexcept : _limit(static_cast<std::int64_t>(limit)) {}

  std::size_t limit() const noexcept { return static_cast<std::size_t>(_limit); }
  /// Bytes held now, to within one chunk per account.
  std::int64_t used() const noexcept { return _used.load(std::memory_order_relaxed); }
  std::int64_t peak() const noexcept { return _peak.load(std::memory_order_relaxed); }
  /// At or over the limit: new calls are refused and the biggest holders stop being read.
  bool exhausted() const noexcept { return _limit != 0 && used() >= _limit; }
  /// Below the resume mark (90% of the limit): paused readers may read again. The gap keeps a
  /// budget that hovers at its limit from pausing and resuming on every chunk.
  bool relieved() const noexcept { return _limit == 0 || used() < _limit - _limit / 10; }

  /// A thread's share of the total. Owned by one thread; flushes itself in chunks.
  class account {
   public:
    explicit account(memory_budget& b) noexcept : _budget(&b) {}
    account(const account&) = delete;
    account& operator=(const account&) = delete;
    ~account() { flush(); }

    void charge(std::int64_t bytes) noexcept {
      _pending += bytes;
      if (_pending >= chunk_bytes || _pending <= -chunk_bytes) flush();
    }
    void release(std::int64_t bytes) noexcept { charge(-bytes); }
    void flush() noexcept {
      if (_pending == 0) return;
      _budget->settle(_pending);
      _pending = 0;
    }

   private:
    memory_budget* _budget;
    std::int64_t _pending = 0;
  };

 private:
  void settle(std::int64_t delta) noexcept {
    const std::int64_t now = _used.fetch_add(delta, std::memory_order_relaxed) + delta;
    std::int64_t peak = _peak.load(std::memory_order_relaxed);
    while (now > peak && !_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  const std::int64_t _limit;
  alignas(64) std::atomic<std::int64_t> _used{0};
  std::atomic<std::int64_t> _peak{0};
};

/// The default budget: a quarter of the memory this process may use — the cgroup's
/// memory.max where one is set, else MemTotal — and never more than RLIMIT_AS allows.
std::size_t default_memory_budget() noexcept;

}  // namespace ringrpc::detail

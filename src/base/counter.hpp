#pragma once
// Statistics counters written by one thread and read by any: no locked instruction on the hot
// path, merged by the reader of the stats.

#include <atomic>
#include <cstdint>

namespace ringrpc::detail {

class counter {
 public:
  /// Owning thread only: a plain load and store, which the compiler cannot tear.
  void add(std::uint64_t n = 1) noexcept {
    _v.store(_v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  /// Any thread.
  std::uint64_t get() const noexcept { return _v.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> _v{0};
};

}  // namespace ringrpc::detail

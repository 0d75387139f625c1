#pragma once
// Statistics counters written by one thread and read by any: no locked instruction on the hot
// path, merged by the reader of the stats.

#include <array>
#include <atomic>
#include <cstddef>
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

/// A counter per value of the enum `Id` (0 .. N-1), each written by one thread: the counters a
/// table declares (ringrpc/server_counters.hpp), indexed instead of named one by one. Reading
/// all of them is a loop; bumping one is the same plain load and store as a named counter.
template <class Id, std::size_t N>
class counter_array {
 public:
  counter& operator[](Id id) noexcept { return _c[static_cast<std::size_t>(id)]; }
  std::uint64_t get(Id id) const noexcept { return _c[static_cast<std::size_t>(id)].get(); }
  /// Any thread: adds every counter into out[0 .. N-1].
  template <class Out>
  void add_to(Out& out) const noexcept {
    for (std::size_t i = 0; i < N; ++i) out[i] += _c[i].get();
  }

 private:
  std::array<counter, N> _c;
};

}  // namespace ringrpc::detail

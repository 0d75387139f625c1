#pragma once
// A latency histogram one thread writes and any thread reads while it is written: the metrics'
// per-thread histograms. Coarser than latency_histogram (8 buckets per power of two, ~9%) so
// it stays small enough to keep one per thread per method, and readable without a lock: every
// bucket is a relaxed atomic only its owner writes.
//
// Not merged into latency_histogram on purpose: that one is exact to 3 digits (~144 KiB, plain
// counters, one owner, merge() at the end of a run) for reports; this one is ~2 KiB of atomics
// that the metrics page sums while the server runs. One type would cost the server 70x the
// memory per method and thread, or cost the reports their precision.

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace ringrpc::detail {

class metric_histogram {
 public:
  static constexpr int sub_bits = 3;                       // 8 buckets per power of two
  static constexpr int min_exp = 7;                        // values below 128 ns share bucket 0
  static constexpr int max_exp = 37;                       // ~137 s; larger values saturate
  static constexpr std::size_t buckets = 1 + (max_exp - min_exp) * (1u << sub_bits);

  /// Owner thread only: plain loads and stores (no locked instruction).
  void record(std::uint64_t ns) noexcept {
    bump(_counts[index_of(ns)], 1);
    bump(_sum, ns);
  }

  /// Any thread: a consistent-enough copy (each bucket is read atomically; a record racing
  /// with the copy may be in the count and not yet in the sum, or the other way round).
  struct snapshot {
    std::array<std::uint64_t, buckets> counts{};
    std::uint64_t sum = 0;
    std::uint64_t count() const noexcept {
      std::uint64_t n = 0;
      for (auto c : counts) n += c;
      return n;
    }
    void add(const snapshot& o) noexcept {
      for (std::size_t i = 0; i < buckets; ++i) counts[i] += o.counts[i];
      sum += o.sum;
    }
    /// The smallest value the q-quantile's bucket can hold, q in [0, 1]; 0 when empty.
    std::uint64_t quantile(double q) const noexcept;
  };
  void add_to(snapshot& s) const noexcept {
    for (std::size_t i = 0; i < buckets; ++i) s.counts[i] += _counts[i].load(std::memory_order_relaxed);
    s.sum += _sum.load(std::memory_order_relaxed);
  }

  static std::size_t index_of(std::uint64_t ns) noexcept {
    if (ns < (std::uint64_t{1} << min_exp)) return 0;
    const int e = std::bit_width(ns) - 1;
    if (e >= max_exp) return buckets - 1;
    const auto sub = static_cast<std::size_t>((ns >> (e - sub_bits)) & ((1u << sub_bits) - 1));
    return 1 + static_cast<std::size_t>(e - min_exp) * (1u << sub_bits) + sub;
  }
  /// Lowest and highest value of bucket i.
  static std::uint64_t lower_of(std::size_t i) noexcept {
    if (i == 0) return 0;
    const int e = min_exp + static_cast<int>((i - 1) >> sub_bits);
    const std::uint64_t sub = (i - 1) & ((1u << sub_bits) - 1);
    return (std::uint64_t{1} << e) + (sub << (e - sub_bits));
  }
  static std::uint64_t upper_of(std::size_t i) noexcept {
    return i + 1 < buckets ? lower_of(i + 1) - 1 : UINT64_MAX;
  }

 private:
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n) noexcept {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::array<std::atomic<std::uint64_t>, buckets> _counts{};
  std::atomic<std::uint64_t> _sum{0};
};

inline std::uint64_t metric_histogram::snapshot::quantile(double q) const noexcept {
  const std::uint64_t n = count();
  if (n == 0) return 0;
  auto rank = static_cast<std::uint64_t>(q * static_cast<double>(n));
  if (rank >= n) rank = n - 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets; ++i) {
    seen += counts[i];
    if (seen > rank) return lower_of(i);
  }
  return lower_of(buckets - 1);
}

}  // namespace ringrpc::detail

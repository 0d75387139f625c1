#pragma once
// The server's per-call metrics: every thread that finishes calls (pool workers, readers running
// direct endpoints, threads answering deferred replies) writes its own block; nothing shared is
// written per call. Blocks are merged when read (/metrics, server::stats()).

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/counter.hpp"
#include "base/metric_histogram.hpp"
#include "ringrpc/status.hpp"
#include "base/utf8.hpp"

namespace ringrpc::detail {

inline constexpr std::size_t status_count = 22;  // status::ok .. status::unknown

/// One thread's numbers for one method.
struct method_metrics {
  explicit method_metrics(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::array<counter, status_count> by_status;
  metric_histogram processing;
  counter stalls;    // stretches that held a shard's thread over its threshold
  counter stall_ns;  // their time in total
};

/// One thread's numbers. Written by that thread only.
class thread_metrics {
 public:
  /// Names tracked per thread; calls to further names count under "(other)". A name without a
  /// dot reached an endpoint registered under exactly that name, so these are the server's own.
  static constexpr std::size_t max_methods = 64;
  /// Of those, dotted names ("NAME.anything"), which the caller picks: the router sends any
  /// suffix to endpoint NAME. Past this many, or when longer than max_name_bytes or not UTF-8,
  /// a dotted name counts under NAME. The page then labels each by the endpoint it reaches
  /// (status_pages.cpp), so a caller inventing names can neither grow the series nor put
  /// arbitrary bytes into a label.
  static constexpr std::size_t max_dotted_methods = 16;
  static constexpr std::size_t max_name_bytes = 128;

  thread_metrics();
  thread_metrics(const thread_metrics&) = delete;
  thread_metrics& operator=(const thread_metrics&) = delete;

  /// A call finished with `code`: counted for every call.
  void completed(std::string_view method, status code) noexcept;
  /// A (sampled) call waited `queue_ns` and ran `processing_ns`.
  void timed(std::string_view method, std::int64_t queue_ns, std::int64_t processing_ns) noexcept;
  /// The method's user code held a shard's thread for `ns`, over the stall threshold.
  void stalled(std::string_view method, std::int64_t ns) noexcept;

  metric_histogram queue_time;
  metric_histogram processing_time;

  /// Readers: the first method_count() entries of methods() are published and stay.
  std::size_t method_count() const noexcept { return _published.load(std::memory_order_acquire); }
  const method_metrics& method_at(std::size_t i) const noexcept { return *_methods[i]; }
  const method_metrics& other() const noexcept { return *_other; }

 private:
  method_metrics& find(std::string_view name) noexcept;
  method_metrics& add(std::string_view name) noexcept;

  struct view_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, method_metrics*, view_hash, std::equal_to<>> _index;  // owner only
  std::array<std::unique_ptr<method_metrics>, max_methods> _methods;
  std::atomic<std::size_t> _published{0};
  std::size_t _dotted = 0;  // owner only
  std::unique_ptr<method_metrics> _other;
  method_metrics* _last = nullptr;  // owner only: consecutive calls usually name the same method
};

/// Merged view of every thread's block.
struct call_metrics_snapshot {
  std::array<std::uint64_t, status_count> by_status{};
  metric_histogram::snapshot queue_time;
  metric_histogram::snapshot processing_time;
  struct method {
    std::string name;
    std::array<std::uint64_t, status_count> by_status{};
    metric_histogram::snapshot processing;
    std::uint64_t stalls = 0;
    std::uint64_t stall_ns = 0;
  };
  std::vector<method> methods;  // sorted by name
};

class metrics_registry {
 public:
  metrics_registry();
  /// This thread's block, created on first use.
  thread_metrics& local();
  call_metrics_snapshot snapshot() const;

 private:
  thread_metrics& slow_local();
  const std::uint64_t _generation;  // tells registries apart in the thread-local cache
  mutable std::mutex _mu;
  std::vector<std::unique_ptr<thread_metrics>> _blocks;
};

}  // namespace ringrpc::detail

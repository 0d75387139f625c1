#pragma once
// Keeps an up-to-date copy of every key under an etcd prefix: list, then watch from the
// listing's revision. A compacted watch (its revision no longer kept) lists again and watches
// on from the new revision; a failed listing or stream is retried with backoff (0.2 s doubling
// to 5 s), the last copy kept meanwhile. One thread of its own.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "discovery/etcd_client.hpp"

namespace ringrpc::discovery::detail {

class prefix_watcher {
 public:
  using snapshot = std::map<std::string, std::string>;  // key -> value, decoded

  /// `on_change` runs on the watcher's thread after every change of the copy (and once after
  /// the first listing, even when it is empty).
  prefix_watcher(std::string base_url, std::string prefix, std::function<void(const snapshot&)> on_change);
  ~prefix_watcher();  ///< stop()s

  void start();
  void stop() noexcept;  ///< returns once on_change can no longer run

  std::uint64_t listings() const noexcept { return _listings.load(std::memory_order_relaxed); }
  std::uint64_t compactions() const noexcept { return _compactions.load(std::memory_order_relaxed); }
  std::uint64_t failures() const noexcept { return _failures.load(std::memory_order_relaxed); }

 private:
  void run();
  bool sleep_for(std::chrono::milliseconds d);  // false when stopped meanwhile

  etcd_client _etcd;
  std::string _prefix;
  std::function<void(const snapshot&)> _on_change;
  std::atomic<bool> _stop{false};
  std::mutex _mu;
  std::condition_variable _cv;
  std::thread _thread;
  std::atomic<std::uint64_t> _listings{0};
  std::atomic<std::uint64_t> _compactions{0};
  std::atomic<std::uint64_t> _failures{0};
};

}  // namespace ringrpc::discovery::detail

#pragma once
// Spark's Dispatcher: endpoints by name, registered and unregistered at run time, and the pools
// they run on.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exec/endpoint_slot.hpp"
#include "exec/exec_host.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

class dispatcher {
 public:
  /// An immutable routing table. Readers keep the one they last took and look at `version()`
  /// once per loop turn, so a lookup costs a hash and no lock or shared write.
  struct table {
    struct view_hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const noexcept {
        return std::hash<std::string_view>{}(s);
      }
    };
    std::unordered_map<std::string, endpoint_slot*, view_hash, std::equal_to<>> by_name;
    std::vector<endpoint_slot*> all;
    std::vector<endpoint_slot*> hearing;  // those that want connection events

    /// "name" or "name.method" -> the endpoint registered as "name" (an exact match wins, so
    /// add_method may use dotted names).
    endpoint_slot* find(std::string_view method) const noexcept {
      if (auto it = by_name.find(method); it != by_name.end()) return it->second;
      const auto dot = method.find('.');
      if (dot == std::string_view::npos) return nullptr;
      auto it = by_name.find(method.substr(0, dot));
      return it == by_name.end() ? nullptr : it->second;
    }
  };

  explicit dispatcher(exec_host& host);
  ~dispatcher();

  /// Before start().
  void add_pool(std::string name, pool_options options);
  /// Any time. Before start() the endpoint starts with the server.
  void register_endpoint(std::string name, std::shared_ptr<endpoint> ep, endpoint_options options,
                         bool allow_dots);
  bool unregister_endpoint(std::string_view name);

  /// Creates the default pool from the host's handler settings, starts every pool, runs on_start() of
  /// the endpoints registered so far and publishes them.
  void start();
  /// Stops every endpoint (on_stop runs once each is idle) and waits until all have stopped
  /// or `deadline` passes. Returns false on timeout.
  bool stop_endpoints(std::chrono::steady_clock::time_point deadline);
  /// Runs what the pools accepted, then joins their threads.
  void shut_down_pools();

  std::uint64_t version() const noexcept { return _version.load(std::memory_order_acquire); }
  std::shared_ptr<const table> current() const;

  std::vector<pool_stats> stats() const;
  /// The pool `name` ("" or "default": the default pool); null when there is none (or before
  /// start(), when pools do not exist yet). Pools live until the dispatcher is destroyed.
  thread_pool* find_pool(std::string_view name) const;
  /// Whether `p` is one of this dispatcher's pools (named, an endpoint's own, connection
  /// events). No lock: stop() asks it from wherever it is called, on_start() included (which
  /// runs under the dispatcher's mutex). `p` must be alive (thread_pool::current() is).
  bool owns(const thread_pool* p) const noexcept { return p != nullptr && p->owner() == this; }
  /// describe() of every pool with a thread running a task now (for stop()'s progress lines).
  std::vector<std::string> busy_pools() const;
  /// thread_pool::run_queued_here() on every pool; returns how many tasks ran.
  std::size_t run_queued_here();
  /// "endpoint NAME: policy P, pool Q, serial" lines, for reports and status pages.
  std::vector<std::string> describe_endpoints() const;

 private:
  struct pending {
    std::string name;
    std::shared_ptr<endpoint> ep;
    endpoint_options options;
  };
  void publish_locked();
  std::unique_ptr<endpoint_slot> make_slot_locked(const std::string& name, std::shared_ptr<endpoint> ep,
                                                  endpoint_options options);
  thread_pool* find_pool_locked(const std::string& name) const;
  std::unique_ptr<thread_pool> make_owned_pool(const std::string& name, const pool_options& options,
                                               bool quiet = false);

  exec_host& _host;
  mutable std::mutex _mu;
  bool _started = false;
  std::map<std::string, pool_options> _pool_options;   // registered before start
  std::map<std::string, std::unique_ptr<thread_pool>> _pools;
  std::unique_ptr<thread_pool> _ordered;  // connection events of `connection` endpoints
  std::vector<pending> _pending;  // registered before start()
  std::vector<std::unique_ptr<endpoint_slot>> _slots;  // every slot ever, until destruction
  // Registered and not unregistered; null while pending or starting.
  std::map<std::string, endpoint_slot*, std::less<>> _live;
  std::map<std::string, endpoint_slot*, std::less<>> _retired;  // unregistered, still refusing
  std::shared_ptr<const table> _table;
  std::atomic<std::uint64_t> _version{0};
};

}  // namespace ringrpc::detail

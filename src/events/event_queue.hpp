#pragma once
// One named queue of the event bus. Internal to src/events; its member functions live in three
// files: event_queue.cpp (posting and the dispatch thread), event_subscriptions.cpp (the
// listener registry and the kinds it makes the queue accept) and event_queue_stats.cpp (counters
// and drop warnings).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/counter.hpp"
#include "base/parking.hpp"
#include "events/bus_context.hpp"
#include "events/event_ring.hpp"
#include "ringrpc/event_bus.hpp"

namespace ringrpc::detail {

struct subscription {
  std::shared_ptr<event_listener> listener;
  event_kind_set kinds;
};
using subscription_list = std::vector<subscription>;

// One named queue: its ring, its lifecycle lane, its listeners and its dispatch thread.
//
// Lifecycle events never wait for ring capacity: they go to a separate unbounded lane (a mutex
// and a deque; they are a handful per server lifetime). Each carries a barrier, the ring's tail
// when it was posted: the dispatch thread delivers every ring position below the barrier first.
// A thread's earlier ring events have positions below the tail it reads next, and its later ones
// positions at or above it, so each thread's order holds across both lanes.
class event_queue {
 public:
  event_queue(std::string name, std::size_t capacity, bus_context& ctx);
  event_queue(const event_queue&) = delete;
  event_queue& operator=(const event_queue&) = delete;
  ~event_queue() { join(); }

  const std::string& name() const noexcept { return _name; }

  // Posting side: any thread.
  bool accepts(event_kind k) const noexcept {
    return (_accepted_kinds.load(std::memory_order_relaxed) & event_kind_set{k}.bits()) != 0;
  }
  void post(const event_ptr& e) noexcept;
  void count_drop(event_kind k) noexcept;

  // Control side, serialised by the bus's control mutex.
  void subscribe(std::shared_ptr<event_listener> listener, event_kind_set kinds);
  bool unsubscribe(const event_listener* listener);
  bool running() const noexcept { return _thread.joinable(); }
  void start();
  // No more events: the dispatch thread delivers what was accepted, then ends.
  void close() noexcept;
  void join() noexcept {
    if (_thread.joinable()) _thread.join();
  }

  // Monitor thread only. Writes at most one line per interval; returns true while drops wait
  // for their interval to pass.
  bool report_drops(steady_time now);

  event_queue_stats stats() const;

 private:
  struct lifecycle_item {
    std::size_t barrier = 0;  // ring positions below this one are delivered first
    event_ptr ev;             // null: the poison pill
  };

  std::uint32_t wanted_kinds_locked() const noexcept;
  void post_lifecycle(const event_ptr& e) noexcept;
  void run() noexcept;
  void deliver(const event& e, const subscription_list& subs) noexcept;
  void on_listener_error(event_kind k, const char* what) noexcept;

  const std::string _name;
  bus_context& _ctx;
  event_ring _ring;
  parking _parking;

  std::mutex _lifecycle_mutex;
  std::deque<lifecycle_item> _lifecycle;  // guarded by _lifecycle_mutex
  bool _lifecycle_closed = false;         // guarded by _lifecycle_mutex
  std::atomic<std::size_t> _lifecycle_queued{0};
  std::atomic<std::uint64_t> _lifecycle_accepted{0};

  mutable std::mutex _subs_mutex;
  std::shared_ptr<const subscription_list> _subs;  // guarded; replaced, never modified
  bool _started = false;                           // guarded by _subs_mutex
  std::atomic<std::uint64_t> _subs_version{0};
  std::atomic<std::uint32_t> _accepted_kinds{event_kind_set::all().bits()};

  // Written by posting threads.
  std::atomic<std::uint64_t> _dropped{0};
  std::array<std::atomic<std::uint64_t>, event_kind_count> _dropped_by_kind{};
  std::atomic<std::uint64_t> _rejected{0};

  // Written by the dispatch thread only.
  counter _delivered;
  counter _listener_errors;
  counter _processing_ns;
  std::atomic<std::uint64_t> _processing_max{0};
  std::optional<steady_time> _last_error_log;

  // The monitor thread's.
  std::optional<steady_time> _last_drop_warning;
  std::uint64_t _reported_total = 0;
  std::array<std::uint64_t, event_kind_count> _reported_by_kind{};

  std::thread _thread;
};

using queue_list = std::vector<event_queue*>;

}  // namespace ringrpc::detail

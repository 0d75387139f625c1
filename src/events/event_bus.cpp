// The bus itself: its queues, the list post() reads without a lock, start and stop, and the
// monitor thread that writes drop warnings so that no posting thread ever runs the logger.

#include "ringrpc/event_bus.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/thread_name.hpp"
#include "events/bus_context.hpp"
#include "events/event_queue.hpp"

namespace ringrpc {

namespace {

constexpr std::array<std::string_view, event_kind_count> kind_names = {
    "server_started",    "server_stopping",   "server_stopped", "endpoint_started",
    "endpoint_stopped",  "connection_opened", "connection_closed", "call_rejected",
    "slow_call",         "pool_exhausted",    "limit_hit",      "call_completed",
};

constexpr std::size_t max_queue_capacity = std::size_t{1} << 30;

bool valid_kind(event_kind k) noexcept { return static_cast<std::size_t>(k) < event_kind_count; }

}  // namespace

std::string_view to_string(event_kind k) noexcept {
  return valid_kind(k) ? kind_names[static_cast<std::size_t>(k)] : "unknown_event";
}

struct event_bus::impl {
  explicit impl(event_bus_options& o) : ctx(o) {}

  // Caller holds `control`.
  detail::event_queue* find(std::string_view name) const noexcept {
    for (const auto& q : queues) {
      if (q->name() == name) return q.get();
    }
    return nullptr;
  }

  // Caller holds `control`. Safe to call again after a partial failure.
  void start_locked() {
    for (const auto& q : queues) {
      if (!q->running()) q->start();
    }
    if (!monitor.joinable()) monitor = std::thread([this] { monitor_loop(); });
    started = true;
  }

  void monitor_loop() noexcept {
    detail::name_this_thread("rr-evt-monitor");
    // Polling only while drops wait for their interval; capped so that an injected clock that
    // jumps is noticed soon.
    const std::chrono::nanoseconds poll = std::clamp<std::chrono::nanoseconds>(
        ctx.interval, std::chrono::milliseconds(1), std::chrono::milliseconds(250));
    for (;;) {
      const std::uint32_t seen = ctx.monitor_wakeup.epoch();
      const bool stopping = monitor_stop.load(std::memory_order_acquire);
      // Cleared before the counters are read (both seq_cst, as in count_drop): a drop counted
      // too late for this pass finds the flag clear and wakes us again.
      ctx.drops_signalled.store(false, std::memory_order_seq_cst);
      bool pending = false;
      const detail::steady_time now = ctx.now();
      if (const detail::queue_list* qs = list.load(std::memory_order_acquire)) {
        for (detail::event_queue* q : *qs) {
          try {
            pending = q->report_drops(now) || pending;
          } catch (...) {
            // Out of memory while formatting; the next pass tries again.
            pending = true;
          }
        }
      }
      if (pending) ctx.drops_signalled.store(true, std::memory_order_relaxed);
      if (stopping) return;
      ctx.monitor_wakeup.wait(seen, pending ? std::optional(poll) : std::nullopt);
    }
  }

  detail::bus_context ctx;
  std::mutex control;    // guards what follows; never held while waiting for a thread
  std::mutex stop_mutex;  // makes a second stop() wait for the first to finish
  std::vector<std::unique_ptr<detail::event_queue>> queues;
  // Every version of the queue list stays alive until the bus dies, so post() can read the
  // current one with a single load and no reference count. Queues are few and never removed.
  std::vector<std::unique_ptr<const detail::queue_list>> list_versions;
  std::atomic<const detail::queue_list*> list{nullptr};
  bool started = false;
  bool stopped = false;
  std::thread monitor;
  std::atomic<bool> monitor_stop{false};
};

event_bus::event_bus(event_bus_options options) : _impl(std::make_unique<impl>(options)) {}

event_bus::~event_bus() {
  try {
    stop();
  } catch (...) {
    // Only a mutex failure can get here; nothing sensible is left to do in a destructor.
  }
}

void event_bus::add_queue(std::string name, std::size_t capacity) {
  if (name.empty()) throw std::invalid_argument("event_bus: a queue needs a name");
  if (capacity == 0 || capacity > max_queue_capacity) {
    throw std::invalid_argument("event_bus: queue '" + name +
                                "': capacity must be in 1..1073741824");
  }
  std::lock_guard lock(_impl->control);
  if (_impl->stopped) throw std::logic_error("event_bus: add_queue after stop");
  if (_impl->find(name) != nullptr) {
    throw std::invalid_argument("event_bus: queue '" + name + "' already exists");
  }
  auto q = std::make_unique<detail::event_queue>(std::move(name), capacity, _impl->ctx);
  const detail::queue_list* current = _impl->list.load(std::memory_order_relaxed);
  auto next = current ? std::make_unique<detail::queue_list>(*current)
                      : std::make_unique<detail::queue_list>();
  next->push_back(q.get());
  _impl->list_versions.reserve(_impl->list_versions.size() + 1);
  _impl->queues.reserve(_impl->queues.size() + 1);
  if (_impl->started) q->start();  // may throw; nothing is published yet
  _impl->queues.push_back(std::move(q));
  _impl->list.store(next.get(), std::memory_order_release);
  _impl->list_versions.push_back(std::move(next));
}

void event_bus::subscribe(std::string_view queue, std::shared_ptr<event_listener> listener,
                          event_kind_set kinds) {
  if (!listener) throw std::invalid_argument("event_bus: null listener");
  std::lock_guard lock(_impl->control);
  detail::event_queue* q = _impl->find(queue);
  if (q == nullptr) {
    throw std::invalid_argument("event_bus: no queue named '" + std::string(queue) + "'");
  }
  q->subscribe(std::move(listener), kinds);
}

bool event_bus::unsubscribe(std::string_view queue, const event_listener* listener) {
  std::lock_guard lock(_impl->control);
  detail::event_queue* q = _impl->find(queue);
  return q != nullptr && q->unsubscribe(listener);
}

void event_bus::start() {
  std::lock_guard lock(_impl->control);
  if (_impl->stopped) return;
  _impl->start_locked();
}

void event_bus::stop() {
  std::lock_guard stop_lock(_impl->stop_mutex);
  std::vector<detail::event_queue*> qs;
  {
    std::lock_guard lock(_impl->control);
    if (_impl->stopped) return;
    if (!_impl->started) {
      try {
        _impl->start_locked();
      } catch (const std::exception& ex) {
        // Queues without a thread keep their events undelivered; say so rather than throw
        // from what is usually a destructor path.
        _impl->ctx.log(std::string("event bus: could not start for the final delivery: ") +
                       ex.what());
      }
    }
    _impl->stopped = true;
    for (const auto& q : _impl->queues) qs.push_back(q.get());
  }
  // Close every queue before joining any, so that they drain in parallel.
  for (detail::event_queue* q : qs) q->close();
  for (detail::event_queue* q : qs) q->join();
  // After the queues: its last pass sees the final drop counts.
  _impl->monitor_stop.store(true, std::memory_order_release);
  _impl->ctx.monitor_wakeup.notify();
  if (_impl->monitor.joinable()) _impl->monitor.join();
}

bool event_bus::wants(event_kind kind) const noexcept {
  const detail::queue_list* qs = _impl->list.load(std::memory_order_acquire);
  if (qs == nullptr || !valid_kind(kind)) return false;
  for (const detail::event_queue* q : *qs) {
    if (q->accepts(kind)) return true;
  }
  return false;
}

void event_bus::post(event e) noexcept {
  const detail::queue_list* qs = _impl->list.load(std::memory_order_acquire);
  if (qs == nullptr || !valid_kind(e.kind)) return;
  const event_kind kind = e.kind;
  bool wanted = false;
  for (const detail::event_queue* q : *qs) wanted = wanted || q->accepts(kind);
  if (!wanted) return;
  if (e.timestamp == std::chrono::system_clock::time_point{}) {
    e.timestamp = std::chrono::system_clock::now();
  }
  detail::event_ptr shared;
  try {
    shared = std::make_shared<const event>(std::move(e));
  } catch (...) {
    for (detail::event_queue* q : *qs) {
      if (q->accepts(kind)) q->count_drop(kind);
    }
    return;
  }
  for (detail::event_queue* q : *qs) {
    if (q->accepts(kind)) q->post(shared);
  }
}

std::vector<event_queue_stats> event_bus::stats() const {
  std::vector<event_queue_stats> out;
  if (const detail::queue_list* qs = _impl->list.load(std::memory_order_acquire)) {
    out.reserve(qs->size());
    for (const detail::event_queue* q : *qs) out.push_back(q->stats());
  }
  return out;
}

std::optional<event_queue_stats> event_bus::stats(std::string_view queue) const {
  if (const detail::queue_list* qs = _impl->list.load(std::memory_order_acquire)) {
    for (const detail::event_queue* q : *qs) {
      if (q->name() == queue) return q->stats();
    }
  }
  return std::nullopt;
}

}  // namespace ringrpc

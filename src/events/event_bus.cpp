#include "ringrpc/event_bus.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/counter.hpp"
#include "base/parking.hpp"

namespace ringrpc {

namespace {

constexpr std::array<std::string_view, event_kind_count> kind_names = {
    "server_started",    "server_stopping",   "server_stopped", "endpoint_started",
    "endpoint_stopped",  "connection_opened", "connection_closed", "call_rejected",
    "slow_call",         "pool_exhausted",    "limit_hit",      "call_completed",
};

constexpr std::uint32_t lifecycle_bits =
    event_kind_set{event_kind::server_started, event_kind::server_stopping,
                   event_kind::server_stopped, event_kind::endpoint_started,
                   event_kind::endpoint_stopped}
        .bits();

constexpr std::size_t max_queue_capacity = std::size_t{1} << 30;

bool valid_kind(event_kind k) noexcept { return static_cast<std::size_t>(k) < event_kind_count; }

}  // namespace

std::string_view to_string(event_kind k) noexcept {
  return valid_kind(k) ? kind_names[static_cast<std::size_t>(k)] : "unknown_event";
}

namespace detail {

using event_ptr = std::shared_ptr<const event>;
using steady_time = std::chrono::steady_clock::time_point;

// One queue's bounded buffer: any number of posting threads, one dispatch thread. Each cell's
// sequence number says whose turn it is (Vyukov's bounded queue). The tail counter doubles as
// each event's position, which lifecycle events use to keep their place (see event_queue);
// mpmc_queue.hpp hides positions, hence this variant. The top bit of the tail closes the ring:
// once set, no position can be claimed, so the set of events to deliver before ending is fixed.
class event_ring {
 public:
  enum class push_result { ok, full, closed };

  explicit event_ring(std::size_t capacity)
      : _mask(std::bit_ceil(std::max<std::size_t>(capacity, 2)) - 1),
        _cells(std::make_unique<cell[]>(_mask + 1)) {
    for (std::size_t i = 0; i <= _mask; ++i) _cells[i].sequence.store(i, std::memory_order_relaxed);
  }

  std::size_t capacity() const noexcept { return _mask + 1; }

  // Any thread.
  push_result try_push(const event_ptr& e) noexcept {
    std::size_t pos = _tail.load(std::memory_order_relaxed);
    cell* c = nullptr;
    for (;;) {
      if ((pos & closed_bit) != 0) return push_result::closed;
      c = &_cells[pos & _mask];
      const auto diff = static_cast<std::ptrdiff_t>(c->sequence.load(std::memory_order_acquire) - pos);
      if (diff == 0) {
        // Relaxed: the tail only arbitrates ownership of `pos`; the event is published through
        // the cell's sequence. A failed CAS reloads `pos`, closed bit included.
        if (_tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
          break;
        }
      } else if (diff < 0) {
        return push_result::full;  // the cell still holds the event of one lap ago
      } else {
        pos = _tail.load(std::memory_order_relaxed);
      }
    }
    c->value = e;
    c->sequence.store(pos + 1, std::memory_order_release);
    return push_result::ok;
  }

  // Dispatch thread only.
  bool try_pop(event_ptr& out) noexcept {
    cell& c = _cells[_head & _mask];
    if (c.sequence.load(std::memory_order_acquire) != _head + 1) return false;
    out = std::move(c.value);
    c.sequence.store(_head + _mask + 1, std::memory_order_release);
    ++_head;
    return true;
  }
  bool ready() const noexcept {
    return _cells[_head & _mask].sequence.load(std::memory_order_acquire) == _head + 1;
  }
  std::size_t consumed() const noexcept { return _head; }

  // Any thread. Positions claimed so far, i.e. events accepted (some maybe still being written).
  std::size_t claimed() const noexcept {
    return _tail.load(std::memory_order_relaxed) & ~closed_bit;
  }
  // Returns the final number of positions; every one of them will be published.
  std::size_t close() noexcept {
    return _tail.fetch_or(closed_bit, std::memory_order_acq_rel) & ~closed_bit;
  }

 private:
  static constexpr std::size_t closed_bit = ~(~std::size_t{0} >> 1);

  struct cell {
    std::atomic<std::size_t> sequence{0};
    event_ptr value;
  };

  const std::size_t _mask;
  const std::unique_ptr<cell[]> _cells;
  alignas(64) std::atomic<std::size_t> _tail{0};
  alignas(64) std::size_t _head = 0;
};

// An event count on a futex for the one monitor thread: like parking, plus a timeout.
class wakeup {
 public:
  std::uint32_t epoch() const noexcept { return _epoch.load(std::memory_order_acquire); }
  void notify() noexcept {
    _epoch.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  // Returns at once if notify() ran since `seen` was read; may return early, callers re-check.
  void wait(std::uint32_t seen, std::optional<std::chrono::nanoseconds> timeout) noexcept {
    timespec ts{};
    timespec* tsp = nullptr;
    if (timeout) {
      ts.tv_sec = static_cast<time_t>(timeout->count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(timeout->count() % 1'000'000'000);
      tsp = &ts;
    }
    syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, seen, tsp, nullptr, 0);
  }

 private:
  std::uint32_t* word() noexcept { return reinterpret_cast<std::uint32_t*>(&_epoch); }
  std::atomic<std::uint32_t> _epoch{0};
};

// What the queues share with their bus.
struct bus_context {
  explicit bus_context(event_bus_options& o)
      : logger(std::move(o.logger)), clock(std::move(o.clock)), interval(o.warning_interval) {
    if (!logger) {
      logger = [](std::string_view line) {
        // One fwrite per line: stderr is unbuffered, so lines from two threads do not mix.
        std::string text(line);
        text += '\n';
        std::fwrite(text.data(), 1, text.size(), stderr);
      };
    }
    if (!clock) clock = [] { return std::chrono::steady_clock::now(); };
  }

  void log(std::string_view line) noexcept {
    try {
      logger(line);
    } catch (...) {
      // A broken logger must not take a dispatch or monitor thread down with it.
    }
  }
  steady_time now() noexcept {
    try {
      return clock();
    } catch (...) {
      return std::chrono::steady_clock::now();
    }
  }

  // Called after a drop was counted (seq_cst). Only the first drop after the monitor cleared the
  // flag pays for a wake-up; while drops wait for their interval the monitor keeps the flag set
  // and polls instead, so sustained drops cost posters no system calls.
  void signal_drop() noexcept {
    if (!drops_signalled.load(std::memory_order_seq_cst) &&
        !drops_signalled.exchange(true, std::memory_order_seq_cst)) {
      monitor_wakeup.notify();
    }
  }

  std::function<void(std::string_view)> logger;
  std::function<steady_time()> clock;
  std::chrono::steady_clock::duration interval;
  std::atomic<bool> drops_signalled{false};
  wakeup monitor_wakeup;
};

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
  event_queue(std::string name, std::size_t capacity, bus_context& ctx)
      : _name(std::move(name)),
        _ctx(ctx),
        _ring(capacity),
        _subs(std::make_shared<const subscription_list>()) {}
  event_queue(const event_queue&) = delete;
  event_queue& operator=(const event_queue&) = delete;
  ~event_queue() { join(); }

  const std::string& name() const noexcept { return _name; }

  // Posting side: any thread.
  bool accepts(event_kind k) const noexcept {
    return (_accepted_kinds.load(std::memory_order_relaxed) & event_kind_set{k}.bits()) != 0;
  }

  void post(const event_ptr& e) noexcept {
    if (is_lifecycle(e->kind)) {
      post_lifecycle(e);
      return;
    }
    switch (_ring.try_push(e)) {
      case event_ring::push_result::ok:
        _parking.wake(1);
        return;
      case event_ring::push_result::full:
        count_drop(e->kind);
        return;
      case event_ring::push_result::closed:
        _rejected.fetch_add(1, std::memory_order_relaxed);
        return;
    }
  }

  void count_drop(event_kind k) noexcept {
    // Kind first, total second: the monitor reads the total first, so the kinds never lag it.
    _dropped_by_kind[static_cast<std::size_t>(k)].fetch_add(1, std::memory_order_relaxed);
    _dropped.fetch_add(1, std::memory_order_seq_cst);  // pairs with the monitor's flag reset
    _ctx.signal_drop();
  }

  // Control side, serialised by the bus's control mutex.
  void subscribe(std::shared_ptr<event_listener> listener, event_kind_set kinds) {
    std::lock_guard lock(_subs_mutex);
    auto next = std::make_shared<subscription_list>(*_subs);
    next->push_back({std::move(listener), kinds});
    _subs = std::move(next);
    _subs_version.fetch_add(1, std::memory_order_release);
    if (_started) _accepted_kinds.fetch_or(kinds.bits(), std::memory_order_relaxed);
  }

  bool unsubscribe(const event_listener* listener) {
    std::lock_guard lock(_subs_mutex);
    auto next = std::make_shared<subscription_list>();
    for (const subscription& s : *_subs) {
      if (s.listener.get() != listener) next->push_back(s);
    }
    if (next->size() == _subs->size()) return false;
    _subs = std::move(next);
    _subs_version.fetch_add(1, std::memory_order_release);
    if (_started) _accepted_kinds.store(wanted_kinds_locked(), std::memory_order_relaxed);
    return true;
  }

  bool running() const noexcept { return _thread.joinable(); }

  void start() {
    _thread = std::thread([this] { run(); });
    std::lock_guard lock(_subs_mutex);
    // Until now everything was buffered for listeners still to come; from now on a kind nobody
    // here wants costs this queue neither capacity nor a wake-up.
    _started = true;
    _accepted_kinds.store(wanted_kinds_locked(), std::memory_order_relaxed);
  }

  // No more events: the dispatch thread delivers what was accepted, then ends.
  void close() noexcept {
    const std::size_t end = _ring.close();
    {
      std::lock_guard lock(_lifecycle_mutex);
      _lifecycle_closed = true;
      _lifecycle.push_back({end, nullptr});  // the poison pill, after everything else
      _lifecycle_queued.fetch_add(1, std::memory_order_release);
    }
    _parking.wake(1);
  }

  void join() noexcept {
    if (_thread.joinable()) _thread.join();
  }

  // Monitor thread only. Writes at most one line per interval; returns true while drops wait
  // for their interval to pass.
  bool report_drops(steady_time now) {
    if (_dropped.load(std::memory_order_seq_cst) <= _reported_total) return false;
    if (_last_drop_warning && now - *_last_drop_warning < _ctx.interval) return true;

    std::string kinds;
    std::uint64_t count = 0;
    for (std::size_t k = 0; k < event_kind_count; ++k) {
      const std::uint64_t total = _dropped_by_kind[k].load(std::memory_order_relaxed);
      const std::uint64_t delta = total - _reported_by_kind[k];
      _reported_by_kind[k] = total;
      if (delta == 0) continue;
      count += delta;
      if (!kinds.empty()) kinds += ", ";
      kinds += kind_names[k];
      kinds += ' ';
      kinds += std::to_string(delta);
    }
    if (count == 0) return false;
    _reported_total += count;

    std::string line = "event bus: queue '" + _name + "' dropped " + std::to_string(count) +
                       " events (" + kinds + ") ";
    if (_last_drop_warning) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - *_last_drop_warning).count();
      line += "in the last " + std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) +
              " s";
    } else {
      line += "since it started";
    }
    line += ", " + std::to_string(_reported_total) + " in all; capacity " +
            std::to_string(_ring.capacity()) + ": a listener is too slow or the queue too small";
    _last_drop_warning = now;
    _ctx.log(line);
    return false;
  }

  event_queue_stats stats() const {
    event_queue_stats s;
    s.name = _name;
    s.capacity = _ring.capacity();
    s.delivered = _delivered.get();  // first: what was accepted can only have grown since
    const std::uint64_t accepted =
        _ring.claimed() + _lifecycle_accepted.load(std::memory_order_relaxed);
    s.dropped = _dropped.load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < event_kind_count; ++k) {
      s.dropped_by_kind[k] = _dropped_by_kind[k].load(std::memory_order_relaxed);
    }
    s.posted = accepted + s.dropped;
    s.rejected_after_stop = _rejected.load(std::memory_order_relaxed);
    s.listener_errors = _listener_errors.get();
    s.depth = accepted > s.delivered ? accepted - s.delivered : 0;
    s.processing_ns_total = _processing_ns.get();
    s.processing_ns_max = _processing_max.load(std::memory_order_relaxed);
    return s;
  }

 private:
  struct lifecycle_item {
    std::size_t barrier = 0;  // ring positions below this one are delivered first
    event_ptr ev;             // null: the poison pill
  };

  std::uint32_t wanted_kinds_locked() const noexcept {
    std::uint32_t bits = lifecycle_bits;
    for (const subscription& s : *_subs) bits |= s.kinds.bits();
    return bits;
  }

  void post_lifecycle(const event_ptr& e) noexcept {
    bool out_of_memory = false;
    {
      std::lock_guard lock(_lifecycle_mutex);
      if (_lifecycle_closed) {
        _rejected.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      try {
        // Read under the lock, so that barriers never decrease along the lane.
        _lifecycle.push_back({_ring.claimed(), e});
        _lifecycle_accepted.fetch_add(1, std::memory_order_relaxed);
        _lifecycle_queued.fetch_add(1, std::memory_order_release);
      } catch (...) {
        out_of_memory = true;
      }
    }
    if (out_of_memory) {
      count_drop(e->kind);
    } else {
      _parking.wake(1);
    }
  }

  void run() noexcept {
    const std::string thread_name = ("evt-" + _name).substr(0, 15);
    pthread_setname_np(pthread_self(), thread_name.c_str());

    std::shared_ptr<const subscription_list> subs;
    std::uint64_t subs_version = 0;
    // The barrier of the lifecycle lane's head, once looked at: only this thread pops the lane,
    // so it stays valid until popped, and the lock is taken once per lifecycle event.
    std::optional<std::size_t> barrier;
    event_ptr e;
    for (;;) {
      if (!subs || _subs_version.load(std::memory_order_acquire) != subs_version) {
        std::lock_guard lock(_subs_mutex);
        subs = _subs;
        subs_version = _subs_version.load(std::memory_order_relaxed);
      }
      if (!barrier && _lifecycle_queued.load(std::memory_order_acquire) != 0) {
        std::lock_guard lock(_lifecycle_mutex);
        barrier = _lifecycle.front().barrier;
      }
      if (barrier && *barrier <= _ring.consumed()) {
        lifecycle_item item;
        {
          std::lock_guard lock(_lifecycle_mutex);
          item = std::move(_lifecycle.front());
          _lifecycle.pop_front();
        }
        _lifecycle_queued.fetch_sub(1, std::memory_order_relaxed);
        barrier.reset();
        if (!item.ev) return;
        deliver(*item.ev, *subs);
        continue;
      }
      if (_ring.try_pop(e)) {
        deliver(*e, *subs);
        e.reset();  // the last queue to let go frees the event, off the posting thread
        continue;
      }
      if (barrier) {
        // A position below the barrier is claimed but its poster has not written it yet; that
        // takes nanoseconds unless the poster was preempted. Not worth a sleep.
        std::this_thread::yield();
        continue;
      }
      const std::uint32_t epoch = _parking.prepare_wait();
      if (_ring.ready() || _lifecycle_queued.load(std::memory_order_relaxed) != 0) {
        _parking.cancel_wait();
        continue;
      }
      _parking.wait(epoch);
    }
  }

  void deliver(const event& e, const subscription_list& subs) noexcept {
    const auto start = std::chrono::steady_clock::now();
    for (const subscription& s : subs) {
      if (!s.kinds.contains(e.kind)) continue;
      try {
        s.listener->on_event(e);
      } catch (const std::exception& ex) {
        on_listener_error(e.kind, ex.what());
      } catch (...) {
        on_listener_error(e.kind, "an exception not derived from std::exception");
      }
    }
    const auto ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
    _processing_ns.add(ns);
    if (ns > _processing_max.load(std::memory_order_relaxed)) {
      _processing_max.store(ns, std::memory_order_relaxed);
    }
    _delivered.add();
  }

  void on_listener_error(event_kind k, const char* what) noexcept {
    _listener_errors.add();
    const steady_time now = _ctx.now();
    if (_last_error_log && now - *_last_error_log < _ctx.interval) return;
    _last_error_log = now;
    try {
      _ctx.log("event bus: queue '" + _name + "': a listener threw on " +
               std::string(to_string(k)) + ": " + what + " (" +
               std::to_string(_listener_errors.get()) + " listener errors so far)");
    } catch (...) {
      // Out of memory while formatting: the counter still has it.
    }
  }

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

}  // namespace detail

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
    pthread_setname_np(pthread_self(), "evt-monitor");
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

#pragma once
// One registered endpoint: its options, its pool and its inbox (Spark's Inbox, fixed).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "exec/work_item.hpp"
#include "exec/exec_host.hpp"
#include "base/counter.hpp"
#include "exec/serial_lane.hpp"
#include "base/sharded_inflight.hpp"
#include "ringrpc/endpoint.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

/// Where one kind of work for an endpoint runs, by its dispatch policy (docs/execution.md).
enum class run_place : std::uint8_t { caller, pool, ordered };
run_place place_for(dispatch_policy policy, call_purpose purpose) noexcept;

/// Spark's guarantees, kept without a lock per message:
/// - on_start() runs before the slot is published, so nothing can reach the endpoint earlier;
/// - every admitted message holds `_inflight` until it has run; on_stop() runs once the slot
///   is stopping and `_inflight` is zero, exactly once, so nothing of the endpoint runs during
///   or after it;
/// - a serial endpoint's messages go through an MPSC inbox drained by one thread at a time
///   (whoever's push finds it idle: exec/serial_lane.hpp), in arrival order; an exception in a handler is caught per
///   message, so the drain always ends by releasing the inbox (SPARK-32738 cannot happen);
/// - connection events that run on a pool (policies `all` and `connection`) go through an
///   event lane, the same kind of inbox but for events only, drained one at a time on the
///   pool (the ordered thread for `connection`), so one connection's events run in the order
///   its reader posted them. The lane's drain is a pool singleton (submit_singleton): it never
///   takes the pool's queue capacity and is never refused, so an event is neither lost nor run
///   on the reader when the pool is full. A serial endpoint's events stay in its inbox, whose
///   drain becomes a singleton as soon as the inbox holds an event.
class endpoint_slot {
 public:
  enum class admit_result : std::uint8_t {
    submitted,  // handed to `pool()`: the caller wakes it once per batch
    ran,        // ran on the calling thread (its policy runs it there, or its inbox was drained here)
    taken,      // joined an inbox someone else drains
    answered,   // refused, and every refused call has been answered already
    busy,       // refused: the caller answers SERVER_BUSY
    stopped,    // the endpoint is stopping or stopped: the caller answers SHUTTING_DOWN
  };

  /// `ordered` runs the connection events of the `connection` policy (null before the
  /// dispatcher started its pools, when no such endpoint can be made).
  endpoint_slot(exec_host& host, std::string name, std::shared_ptr<endpoint> ep,
                endpoint_options options, thread_pool* pool, std::unique_ptr<thread_pool> own_pool,
                thread_pool* ordered);
  ~endpoint_slot();
  endpoint_slot(const endpoint_slot&) = delete;
  endpoint_slot& operator=(const endpoint_slot&) = delete;

  const std::string& name() const noexcept { return _name; }
  endpoint& target() noexcept { return *_endpoint; }
  const endpoint_options& options() const noexcept { return _options; }
  thread_pool* pool() const noexcept { return _pool; }
  thread_pool* own_pool() const noexcept { return _own_pool.get(); }
  bool serial() const noexcept { return _options.concurrency == endpoint_concurrency::serial; }
  /// "policy P, pool Q, serial", for events, reports and status pages.
  std::string describe() const;

  /// Runs on_start(); an exception propagates (the endpoint is not registered).
  void start();
  /// Refuses new messages; on_stop() runs now if nothing is in flight, else on the thread that
  /// finishes the last one. Idempotent.
  void begin_stop() noexcept;
  bool stopping() const noexcept { return _state.load(std::memory_order_acquire) != state::running; }
  bool stopped() const noexcept { return _state.load(std::memory_order_acquire) == state::stopped; }

  /// Takes `item` (whose purpose and target are set) for this endpoint, per its policy. On busy or
  /// stopped the call is still the caller's.
  admit_result admit(work_item* item) noexcept;

  /// Runs one admitted call on the current thread (pool worker, reader or inbox drain) and
  /// lets go of it.
  void run(work_item* item) noexcept;

  /// A stream of this endpoint opens (server/stream_state.hpp): it counts as a message in
  /// flight until its last callback has run, so on_stop() waits for it. False, and nothing
  /// counted, when the endpoint is stopping or stopped.
  bool enter_stream() noexcept { return enter(); }
  /// The stream's last callback has run (it may be the last thing of the endpoint in flight).
  void leave_stream() noexcept { leave(); }

  std::uint64_t rejected_busy() const noexcept { return _busy.load(std::memory_order_relaxed); }

 private:
  enum class state : std::uint8_t { running, stopping, stopped };

  bool enter() noexcept;
  void leave() noexcept;
  void maybe_run_on_stop() noexcept;
  admit_result admit_serial(work_item* item) noexcept;
  admit_result admit_event(work_item* item) noexcept;
  admit_result schedule_drain(bool event) noexcept;
  void drain(unsigned limit) noexcept;
  void drain_lane(unsigned limit) noexcept;
  void refuse_queued() noexcept;
  static void run_task(pool_task* t) noexcept;
  static void drain_task(pool_task* t) noexcept;
  static void lane_task(pool_task* t) noexcept;

  exec_host& _host;
  const std::string _name;
  const std::shared_ptr<endpoint> _endpoint;
  const endpoint_options _options;
  thread_pool* const _pool;  // null when everything runs on the caller (direct)
  const std::unique_ptr<thread_pool> _own_pool;
  // Where connection events that do not run on the caller run: `_pool` for `all` (and serial
  // endpoints, through their inbox), the dispatcher's ordered pool for `connection`.
  thread_pool* const _event_pool;

  std::atomic<state> _state{state::running};
  std::atomic<bool> _stop_claimed{false};
  sharded_inflight _inflight;

  // Serial endpoints only.
  struct drain_work : pool_task {
    endpoint_slot* slot = nullptr;
  };
  drain_work _drain;
  // An event popped from the inbox by refuse_queued(), handed to the drain it scheduled to
  // run it (and the rest of the inbox) on the pool. Touched only by the inbox's owner.
  work_item* _carried = nullptr;
  serial_lane _inbox;
  std::atomic<std::uint64_t> _busy{0};

  // Concurrent endpoints: the connection-event lane (see above).
  drain_work _lane_drain;
  serial_lane _lane;
};

}  // namespace ringrpc::detail

#pragma once
// The responder ring: writes every reply of the server.

#include <atomic>
#include <thread>
#include <vector>

#include "exec/call.hpp"
#include "server/connection.hpp"
#include "base/counter.hpp"
#include "server/memory_budget.hpp"
#include "uring/ring.hpp"
#include "uring/ring_waker.hpp"

namespace ringrpc::detail {

class server_core;

/// One thread, one ring. Handlers and readers post() finished calls from any thread and
/// notify() once per batch. The responder appends each reply to its connection's write queue
/// (so per-connection order = completion order), keeps at most one gathered sendmsg in flight
/// per connection, requeues the unwritten tail of a partial write at the head, and releases
/// each call once its bytes are written or its peer is gone.
class responder {
 public:
  explicit responder(server_core& core);
  ~responder();

  void start(const uring_features& features);
  /// Asks the thread to exit once its inbox is empty and no write is in flight.
  void stop_and_join();
  /// Stopping: shut down every socket that still has replies queued. A peer that half-closed
  /// and never reads would otherwise keep a write, and so its connection, alive forever.
  void shut_down_writers() noexcept {
    _shut_down_writers.store(true, std::memory_order_release);
    _waker.notify();
  }

  void post(call* c) noexcept { _inbox.push(c); }
  void notify() noexcept { _waker.notify(); }

  std::uint64_t released() const noexcept { return _released.get(); }
  std::uint64_t partial_writes() const noexcept { return _partial_writes.get(); }
  std::uint64_t bytes_out() const noexcept { return _bytes_out.get(); }

 private:
  void run();
  void take_inbox();
  void start_write(connection* c);
  void on_write(connection* c, int res);
  void fail_writes(connection* c);
  void release_call(call* c);
  void maybe_resume(connection* c);
  void handle(const io_uring_cqe& cqe);
  void link_writing(connection* c) noexcept;
  void unlink_writing(connection* c) noexcept;

  server_core& _core;
  ring* _ring = nullptr;
  std::thread _thread;
  ring_waker _waker;
  mpsc_queue _inbox;
  std::atomic<bool> _stop{false};
  std::atomic<bool> _shut_down_writers{false};
  connection* _writing = nullptr;
  std::vector<connection*> _dirty;
  std::size_t _writes_in_flight = 0;
  std::size_t _resumes_in_flight = 0;
  std::int64_t _turn_ns = 0;
  counter _released;
  std::unique_ptr<memory_budget::account> _account;  // replies queued and calls released
  write_slots _slots;
  counter _partial_writes;
  counter _bytes_out;
};

}  // namespace ringrpc::detail

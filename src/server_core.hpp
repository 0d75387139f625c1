#pragma once
// The server's parts and how they are wired; the public ringrpc::server is a facade over this.

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "acceptor.hpp"
#include "call.hpp"
#include "counter.hpp"
#include "method_table.hpp"
#include "mpmc_queue.hpp"
#include "parking.hpp"
#include "reader.hpp"
#include "responder.hpp"
#include "ringrpc/server.hpp"
#include "uring_probe.hpp"

namespace ringrpc::detail {

/// Steady-clock nanoseconds; the one clock of the pipeline (queue time, deadlines).
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Lifecycle: configured -> running -> draining (no new calls run; new ones get SHUTTING_DOWN)
/// -> stopped.
enum class server_state { configured, running, draining, stopped };

class server_core {
 public:
  explicit server_core(server_options options);
  ~server_core();

  void start();
  void stop();

  // --- used by the stages
  const server_options& options() const noexcept { return _options; }
  const method_table& methods() const noexcept { return _methods; }
  method_table& methods_for_setup() noexcept { return _methods; }
  mpmc_queue<call*>& call_queue() noexcept { return *_call_queue; }
  parking& handler_parking() noexcept { return _parking; }
  call_pool& pool() noexcept { return *_pool; }
  responder& replies() noexcept { return *_responder; }
  reader& reader_at(std::size_t i) noexcept { return *_readers[i]; }
  std::size_t reader_count() const noexcept { return _readers.size(); }
  server_state state() const noexcept { return _state.load(std::memory_order_acquire); }
  bool draining() const noexcept { return state() >= server_state::draining; }
  /// Set once the drain deadline passed: queued calls are answered SHUTTING_DOWN unrun.
  bool abandoning() const noexcept { return _abandon.load(std::memory_order_acquire); }

  /// Runs one call on the calling handler thread and hands it to the responder.
  void execute(call* c, frame_encoder& encoder) noexcept;

  std::uint16_t port() const noexcept { return _acceptor ? _acceptor->port() : 0; }
  server_stats stats() const;

 private:
  void handler_loop(unsigned index);
  std::uint64_t calls_created() const noexcept;
  std::uint64_t calls_enqueued() const noexcept;
  std::uint64_t calls_executed() const noexcept;
  template <class Pred>
  bool wait_until(Pred pred, std::chrono::steady_clock::time_point deadline);

  server_options _options;
  method_table _methods;
  uring_features _features;
  std::unique_ptr<mpmc_queue<call*>> _call_queue;
  std::unique_ptr<call_pool> _pool;
  parking _parking;
  std::unique_ptr<responder> _responder;
  std::vector<std::unique_ptr<reader>> _readers;
  std::unique_ptr<acceptor> _acceptor;
  std::vector<std::thread> _handlers;
  std::vector<std::unique_ptr<counter>> _executed;  // one per handler thread
  std::atomic<server_state> _state{server_state::configured};
  std::atomic<bool> _abandon{false};
  std::atomic<bool> _handlers_stop{false};
};

}  // namespace ringrpc::detail

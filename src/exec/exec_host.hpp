#pragma once
// What the execution layer (dispatcher, endpoint slots, pools) needs from the server that hosts
// it. The server implements this (server_core, a final class, so its own calls devirtualize);
// nothing in src/exec/ knows the server beyond it.

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "exec/worker_pool.hpp"
#include "ringrpc/status.hpp"

namespace ringrpc::detail {

struct work_item;
class endpoint_slot;

class exec_host {
 public:
  /// Threads of the `default` pool (0: one per usable CPU) and its queue per thread, as
  /// configured when the dispatcher starts.
  virtual unsigned handler_threads() const noexcept = 0;
  virtual unsigned handler_queue_size() const noexcept = 0;

  /// A pool wired to the host (its workers flush replies after each burst, its refusals are
  /// reported unless `quiet`). Not started.
  virtual std::unique_ptr<thread_pool> make_pool(const std::string& name, const pool_options& options,
                                                 bool quiet = false) = 0;
  /// "3/4 threads busy, 1024/1024 queued", for refusal messages.
  virtual std::string pool_state(const thread_pool& p) const = 0;

  /// Runs one admitted call (or connection event) for `slot` on this thread and lets go of the
  /// call. Once per call: the one virtual call on the per-call path.
  virtual void run_item(endpoint_slot& slot, work_item* item) noexcept = 0;
  /// Answers an admitted call without running it (and settles it for the host's stop()).
  virtual void refuse(work_item* item, status code, const std::string& message) noexcept = 0;
  /// An exception escaped a hook of `slot` during `what`: passed to its on_error().
  virtual void report_error(endpoint_slot& slot, const char* what, std::string_view message) noexcept = 0;
  /// The slot's on_start() ran / its on_stop() ran (the host posts the events).
  virtual void endpoint_started(endpoint_slot& slot) noexcept = 0;
  virtual void endpoint_stopped(endpoint_slot& slot) noexcept = 0;

  /// Runs `fn`; an exception goes to the endpoint's on_error (whose own exception is dropped).
  template <class Fn>
  void guarded(endpoint_slot& slot, const char* what, Fn&& fn) noexcept {
    try {
      fn();
    } catch (const std::exception& e) {
      report_error(slot, what, e.what());
    } catch (...) {
      report_error(slot, what, "a non-standard exception");
    }
  }

 protected:
  exec_host() = default;
  virtual ~exec_host() = default;  // not deleted through this interface
  exec_host(const exec_host&) = delete;
  exec_host& operator=(const exec_host&) = delete;
};

}  // namespace ringrpc::detail

// What coroutines (ringrpc/coro.hpp, ringrpc/coro_handler.hpp) need from a server: its pools
// as homes, and the count of coroutine handler frames alive that stop() waits for.

#include "ringrpc/coro_handler.hpp"

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "exec/worker_pool.hpp"
#include "seam/server_seam.hpp"
#include "server/server_core.hpp"

namespace ringrpc {
namespace detail {

coro_home* coro_home_of(server& s, std::string_view name) noexcept {
  // TODO(perf): a lookup under the dispatcher's mutex per to_pool; a handler moving on every
  // call would rather resolve its pool once.
  return reinterpret_cast<coro_home*>(server_seam::core_of(s).endpoints().find_pool(name));
}

namespace {

// Answers `internal` for a handler that ended without answering: its exception's what(), or
// that it said nothing.
void answer_if_unanswered(deferred_reply& reply, const std::exception_ptr& error) noexcept {
  if (!reply) return;
  try {
    if (error) std::rethrow_exception(error);
    reply.fail(status::internal, "coroutine handler finished without answering");
  } catch (const std::exception& e) {
    reply.fail(status::internal, e.what());
  } catch (...) {
    reply.fail(status::internal, "coroutine handler threw a non-standard exception");
  }
}

// The frame that owns one handler invocation: the reply, the parent its calls follow, the
// handler object (shared, so that it outlives an unregistered endpoint while frames run).
// It sets itself as the running step; start_coro_handler restores the thread's step when it
// first suspends, the resumptions set it again.
detached_run run_coro_handler(server_core* core, coro_handler_fn fn, deferred_reply reply) {
  std::optional<call_parent> parent;
  std::exception_ptr error;
  try {
    parent.emplace(reply);  // may allocate the call's cancellation hub
    current_coro_step() = coro_step{coro_home_here(), &*parent};
    co_await fn.invoke(fn.object.get(), reply);
  } catch (...) {
    error = std::current_exception();
  }
  answer_if_unanswered(reply, error);
  // Last: stop() may go on to shut the pools down once this reaches zero.
  core->coro_handlers().fetch_sub(1, std::memory_order_acq_rel);
}

class coroutine_endpoint final : public endpoint {
 public:
  coroutine_endpoint(server& s, coro_handler_fn fn) : _server(s), _fn(std::move(fn)) {}
  void receive_and_reply(call_context& call) override { start_coro_handler(_server, _fn, call); }
  void receive(call_context& message) override { start_coro_handler(_server, _fn, message); }
  bool hears_connection_events() const override { return false; }

 private:
  server& _server;
  coro_handler_fn _fn;
};

}  // namespace

void start_coro_handler(server& s, const coro_handler_fn& fn, call_context& call) {
  server_core& core = server_seam::core_of(s);
  deferred_reply reply = call.defer();
  core.coro_handlers().fetch_add(1, std::memory_order_relaxed);
  const coro_step saved = current_coro_step();
  try {
    run_coro_handler(&core, fn, std::move(reply));
  } catch (...) {
    // Only the runner's frame allocation throws here (its body catches the rest); the reply it
    // did not take answers `internal` as it is destroyed.
    current_coro_step() = saved;
    core.coro_handlers().fetch_sub(1, std::memory_order_acq_rel);
    throw;
  }
  current_coro_step() = saved;
}

std::shared_ptr<endpoint> make_coroutine_endpoint(server& s, coro_handler_fn fn) {
  return std::make_shared<coroutine_endpoint>(s, std::move(fn));
}

std::uint64_t coro_handlers_alive(const server& s) noexcept {
  return server_seam::core_of(s).coro_handlers_alive();
}

}  // namespace detail

bool to_pool::await_suspend(std::coroutine_handle<> h) {
  detail::coro_home* home = detail::coro_home_of(_server, _pool);
  if (home == nullptr) {
    throw std::invalid_argument("ringrpc::to_pool: the server has no pool named '" + std::string(_pool) +
                                "' (or is not started)");
  }
  _slot.handle = h;
  _slot.step = detail::coro_step{home, detail::current_coro_step().parent};
  // Set before posting: once posted, a worker may resume (and end) the coroutine at once.
  _moved = true;
  if (detail::coro_post(home, _slot)) return true;
  _moved = false;
  return false;
}

}  // namespace ringrpc

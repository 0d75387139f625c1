// What coroutines (ringrpc/coro.hpp, ringrpc/coro_handler.hpp) need from a server: its pools
// as homes, and the frames of its coroutine handlers, which stop() cancels and waits for
// (server/coro_frames.hpp).

#include "ringrpc/coro_handler.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "exec/worker_pool.hpp"
#include "seam/server_seam.hpp"
#include "server/coro_frames.hpp"
#include "server/coro_runner.hpp"
#include "server/server_core.hpp"
#include "server/shard.hpp"

namespace ringrpc {
namespace {

using coro_abi::coro_handler_fn;
using coro_abi::start_coro_handler;

coro_abi::coro_home* home_of(server& s, std::string_view name) noexcept {
  // TODO(perf): a lookup under the dispatcher's mutex per to_pool; a handler moving on every
  // call would rather resolve its pool once.
  detail::thread_pool* pool = detail::server_seam::core_of(s).endpoints().find_pool(name);
  return pool != nullptr ? pool->home() : nullptr;
}

// The home of a frame on a shard: `self.owner` is the frame's context.
bool resume_on_shard(coro_abi::coro_home& self, coro_abi::resume_slot& slot) noexcept {
  auto& ctx = *static_cast<coro_abi::frame_context*>(self.owner);
  return ctx.shard->post_resumption(slot, ctx.method);
}

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

// One handler invocation. The registry entry (registry.enter()) was taken by the caller; the
// frame leaves it last, once everything it owns is gone: the reply (whose state names the
// server), the handler object, the call's hub. Nothing after leave() touches the server or
// its pools, which stop() may destroy from then on.
detail::handler_run run_coro_handler(detail::server_core* core, coro_abi::coro_home* home, detail::shard* on_shard,
                             std::string_view method, const coro_handler_fn* fn_in, deferred_reply* reply_in) {
  coro_abi::frame_context& ctx = co_await detail::own_context{};
  ctx.core = core;
  ctx.home = home;
  if (on_shard != nullptr) {
    ctx.shard = on_shard;
    ctx.on_shard = {&resume_on_shard, &ctx};
    ctx.home = &ctx.on_shard;
  }
  std::memcpy(ctx.method, method.data(), std::min(method.size(), sizeof ctx.method - 1));
  core->coro_frames().link(ctx);
  {
    // Taken while the caller's objects are still there (before the first suspension).
    coro_handler_fn fn = *fn_in;
    deferred_reply reply = std::move(*reply_in);
    ctx.reply = &reply;
    std::exception_ptr error;
    try {
      co_await fn.invoke(fn.object.get(), reply);
    } catch (...) {
      error = std::current_exception();
    }
    answer_if_unanswered(reply, error);
    ctx.release();
  }
  core->coro_frames().leave(ctx);
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

namespace coro_abi {

void start_coro_handler(server& s, const coro_handler_fn& fn, call_context& call) {
  detail::server_core& core = detail::server_seam::core_of(s);
  deferred_reply reply = call.defer();
  // Empty: a stopping server claimed the call before defer() and answered it; nothing to run.
  if (!reply) return;
  if (!core.coro_frames().enter()) {
    // stop() no longer waits for frames: a frame started now could outlive the pools.
    reply.fail(status::shutting_down, "server stopped before the coroutine handler started");
    return;
  }
  try {
    // A handler started on a pool worker resumes on that pool, one started on a shard of this
    // server (a direct endpoint) on that shard; elsewhere it has no home and resumes where its
    // calls complete.
    detail::thread_pool* pool = detail::thread_pool::current();
    detail::shard* here = detail::shard::here();
    if (here != nullptr && &here->core() != &core) here = nullptr;
    run_coro_handler(&core, pool != nullptr ? pool->home() : nullptr, pool == nullptr ? here : nullptr,
                     call.method(), &fn, &reply);
  } catch (...) {
    // Only the runner's frame allocation throws here (its body catches the rest); the reply it
    // did not take answers `internal` as it is destroyed.
    core.coro_frames().cancel_enter();
    throw;
  }
}

std::shared_ptr<endpoint> make_coroutine_endpoint(server& s, coro_handler_fn fn) {
  return std::make_shared<coroutine_endpoint>(s, std::move(fn));
}

bool move_to_pool(server& s, std::string_view name, resume_slot& slot, frame_context* ctx, bool& moved) {
  coro_home* home = home_of(s, name);
  if (home == nullptr) {
    throw std::invalid_argument("ringrpc::to_pool: the server has no pool named '" + std::string(name) +
                                "' (or is not started)");
  }
  // A handler frame of this server keeps the pool as its home (the server waits for the frame
  // before its pools go); any other coroutine moves once and keeps no home. All of it is
  // written before posting: once posted, a worker may resume (and end) the coroutine at once.
  const bool keeps_home = ctx != nullptr && ctx->core == &detail::server_seam::core_of(s);
  coro_home* const old_home = keeps_home ? ctx->home : nullptr;
  if (keeps_home) ctx->home = home;
  slot.home = home;
  moved = true;
  if (post(home, slot)) return true;
  // The pool has shut down: the coroutine goes on here, as it was.
  moved = false;
  if (keeps_home) ctx->home = old_home;
  return false;
}

}  // namespace coro_abi

namespace detail {

std::uint64_t server_seam::coroutine_frames(const server& s) noexcept { return core_of(s).coro_frames().alive(); }

}  // namespace detail

}  // namespace ringrpc

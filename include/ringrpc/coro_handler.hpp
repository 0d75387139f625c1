#pragma once
/// \file Coroutine handlers: methods written as ringrpc::task<void> coroutines that answer
/// through a deferred_reply (docs/execution.md, "Coroutines").
///
///     ringrpc::add_coroutine_method(server, "proxy", [&backend](ringrpc::deferred_reply& call)
///                                                        -> ringrpc::task<void> {
///       ringrpc::call_result r = co_await ringrpc::co_call(backend, "echo", call.payload());
///       if (r.ok()) call.reply(r.payload);
///       else call.fail(r.code, r.message);
///     });
///
/// - The handler starts where its endpoint's policy runs the call (docs/execution.md, "Dispatch
///   policies"): its pool for the default policy, so the pool thread is free as soon as the
///   coroutine first suspends, and it resumes on that pool (ringrpc/coro.hpp's resume rule) or
///   where `to_pool` moved it. On a shard (a `direct` endpoint, as `on_shard` registers it; a
///   one-way message of an `execution` endpoint) it stays on that shard: it starts on the
///   shard's thread that decoded the call and every resumption runs there too, queued by the
///   thread that completed what it awaited, until `to_pool` moves it. Such a handler must not
///   block: a step that holds the shard's thread over 10 ms is reported as a shard stall
///   (docs/execution.md, "Coroutines on a shard"). The call is deferred first
///   (call_context::defer).
/// - It answers through the deferred_reply (payload(), reply(), fail(), add_header(), ...;
///   valid until answered). A handler that finishes without answering answers `internal`
///   "coroutine handler finished without answering"; an exception leaving it answers `internal`
///   with its what() (if it had not answered yet).
/// - The client calls it awaits (ringrpc::co_call, in the handler or in tasks it awaits) have
///   its call as their parent while it is unanswered: they end by its deadline and are
///   cancelled when its caller cancels or disconnects, so a suspended handler resumes with
///   call_error::cancelled or timeout and finishes. A task it hands to start_detached is not
///   part of the frame (no home, no parent past the handler's own step, not waited for).
/// - Lifetimes: the handler object (the callable) lives as long as the server holds the method
///   or a frame of it is alive; a lambda's captures are reached through it, so they may be used
///   after suspensions. stop() waits for suspended handlers within drain_timeout as for running
///   ones (their calls are unanswered); past it, it cancels every call each frame awaits,
///   answered or not, and waits for every frame to end before the pools shut down, with no
///   time limit: a frame awaiting something that is not a ringrpc call keeps stop() waiting,
///   logged each second (`stop_waiting_for_coroutine`, naming the method). A handler that
///   starts after that wait is over answers shutting_down without running.

#include "ringrpc/cxx20.hpp"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "ringrpc/call_context.hpp"
#include "ringrpc/call_parent.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/endpoint.hpp"
#include "ringrpc/export.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/task.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace coro_abi {

/// A handler object with its type erased: the coroutine frame that runs it is then one type,
/// compiled once in the library (a frame type naming the user's lambda would be a header's type
/// with the user's internal linkage, which GCC's -Wsubobject-linkage rejects).
struct coro_handler_fn {
  std::shared_ptr<void> object;
  task<void> (*invoke)(void* object, deferred_reply& call) = nullptr;
};

template <class F>
coro_handler_fn erase_coro_handler(F handler) {
  return {std::make_shared<F>(std::move(handler)),
          [](void* object, deferred_reply& call) -> task<void> { return (*static_cast<F*>(object))(call); }};
}

/// Defers `call`, then runs `fn` for it on this thread until it first suspends; answers
/// shutting_down without running it once the server has stopped waiting for handler frames.
void start_coro_handler(server& s, const coro_handler_fn& fn, call_context& call);
/// An endpoint whose calls and one-way messages run `fn` (start_coro_handler).
std::shared_ptr<endpoint> make_coroutine_endpoint(server& s, coro_handler_fn fn);

}  // namespace coro_abi

/// A coroutine handler as a method of its own, as server::add_method (the server's
/// `default_policy`, the default pool, concurrent; dots allowed). `handler` is called as
/// `handler(deferred_reply&)` and returns task<void>. Same errors as add_method.
template <class F>
void add_coroutine_method(server& s, std::string name, F handler) {
  s.add_method(std::move(name), [&s, fn = coro_abi::erase_coro_handler(std::move(handler))](call_context& call) {
    coro_abi::start_coro_handler(s, fn, call);
  });
}

/// A coroutine handler as an endpoint with `options` (a named pool, `own_pool`, a policy), as
/// server::register_endpoint. Same errors as register_endpoint, and std::invalid_argument for
/// `concurrency = serial`: a serial lane moves on to the next message when the handler first
/// suspends, so its handlers would overlap; serialise inside the handler instead. (An
/// operator's endpoint override to serial is not checked.)
template <class F>
void register_coroutine_endpoint(server& s, std::string name, F handler, endpoint_options options = {}) {
  if (options.concurrency == endpoint_concurrency::serial) {
    throw std::invalid_argument("register_coroutine_endpoint: '" + name +
                                "': a coroutine endpoint cannot be serial (its handlers would overlap once they suspend)");
  }
  s.register_endpoint(std::move(name), coro_abi::make_coroutine_endpoint(s, coro_abi::erase_coro_handler(std::move(handler))),
                      std::move(options));
}

/// Tag for add_coroutine_method: the handler runs on the shard that decoded its call and
/// resumes there (a `direct` endpoint; see the file's comment).
struct on_shard_t {
  explicit on_shard_t() = default;
};
inline constexpr on_shard_t on_shard{};

/// A coroutine handler that stays on its shard: add_coroutine_method's handler, registered as
/// register_coroutine_endpoint(s, name, handler, {.policy = dispatch_policy::direct}).
template <class F>
void add_coroutine_method(server& s, std::string name, F handler, on_shard_t) {
  endpoint_options options;
  options.policy = dispatch_policy::direct;
  register_coroutine_endpoint(s, std::move(name), std::move(handler), std::move(options));
}

}  // namespace ringrpc

RINGRPC_API_END

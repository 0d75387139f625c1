#pragma once
/// \file Coroutine forms of typed calls and typed methods (ringrpc/service.hpp's result<T>,
/// ringrpc/coro.hpp's resume rule; docs/execution.md, "Coroutines").
///
/// Calls: a generated stub's `Method_co(fbb, root, options)` (beside the blocking, `_async` and
/// `_future` forms) returns an awaitable yielding result<Reply>:
///
///     ringrpc::result<HelloReply> r = co_await stub.SayHello_co(fbb, CreateHelloRequestDirect(fbb, "x"));
///
/// `fbb` is finished at once and cleared when the call has been handed to the client (when the
/// co_await starts); it must live until then.
///
/// Methods: a typed coroutine handler, registered under its full name:
///
///     ringrpc::add_typed_coroutine_method<HelloRequest, HelloReply>(server, "Greeter.SayHello",
///         [&](ringrpc::deferred_reply& call, const HelloRequest& req) -> ringrpc::task<ringrpc::result<HelloReply>> {
///           auto r = co_await backend.Lookup_co(fbb, ...);   // req stays valid across awaits
///           ...
///           co_return ringrpc::result<HelloReply>(fbb, CreateHelloReplyDirect(fbb, "hi"));
///         });
///
/// The request is verified first (bad_request if it is not a valid Request); it stays valid until
/// the answer. The handler's result is the answer (an error result: its status, ok becoming
/// internal); an rpc_exception leaving it answers its status; another exception `internal` with
/// its what(). Everything else is as for raw coroutine handlers (ringrpc/coro_handler.hpp).

#include "ringrpc/cxx20.hpp"

#include <coroutine>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "ringrpc/coro.hpp"
#include "ringrpc/coro_handler.hpp"
#include "ringrpc/export.hpp"
#include "ringrpc/service.hpp"
#include "ringrpc/task.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// `co_await` on a typed call through a stub_target (a client or a channel): yields result<Reply>.
template <class Reply>
class typed_call_awaitable : public coro_abi::call_awaiter_base {
 public:
  typed_call_awaitable(const detail::stub_target& target, const detail::typed_method& m,
                       flatbuffers::FlatBufferBuilder& fbb, std::span<const std::byte> payload, call_options options)
      : _target(target), _method(m), _fbb(fbb), _payload(payload), _options(std::move(options)) {}
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    return suspend_with(h, [this](coro_abi::frame_context* ctx) {
      coro_abi::prepare_call(ctx, _options);
      _target.call_async(_method.full_name, _payload, callback(), _options);
      // The client encoded the request into its own frame before returning.
      _fbb.Clear();
    });
  }
  result<Reply> await_resume() { return detail::to_result<Reply>(call_awaiter_base::await_resume(), _method); }

 private:
  detail::stub_target _target;
  const detail::typed_method& _method;
  flatbuffers::FlatBufferBuilder& _fbb;
  std::span<const std::byte> _payload;
  call_options _options;
};

namespace detail {

/// What generated stubs' `_co` forms call.
template <class Reply, class Request>
typed_call_awaitable<Reply> typed_co_call(const stub_target& t, const typed_method& m,
                                          flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Request> request,
                                          call_options options) {
  return typed_call_awaitable<Reply>(t, m, fbb, finish(fbb, request), std::move(options));
}

/// A typed coroutine handler, type-erased (see coro_handler_fn), with its method's names.
template <class Request, class Reply>
struct typed_coro_fn {
  std::shared_ptr<void> object;
  task<result<Reply>> (*invoke)(void* object, deferred_reply& call, const Request& request) = nullptr;
  std::string full_name;
};

/// Answers `call` with `r`, as serve() answers a typed method's result.
template <class Reply>
void answer_typed(deferred_reply& call, const result<Reply>& r) {
  if (r.ok()) {
    call.reply(r.bytes());
  } else {
    const rpc_error& e = r.error();
    call.fail(e.code == status::ok ? status::internal : e.code, e.message, e.details);
  }
}

/// One typed coroutine call: verifies the request, awaits the handler, answers its result.
/// Other exceptions than rpc_exception go on to the raw runner, which answers `internal`.
template <class Request, class Reply>
task<void> serve_typed_coro(const typed_coro_fn<Request, Reply>* fn, deferred_reply& call) {
  // FlatBuffers reads scalars in place: 8 bytes covers every scalar a table holds.
  const aligned_payload payload(call.payload(), 8);
  flatbuffers::Verifier verifier(payload.data(), payload.size());
  if (!verifier.VerifyBuffer<Request>(nullptr)) {
    call.fail(status::bad_request, fn->full_name + ": request is not a valid request (FlatBuffers verification failed)");
    co_return;
  }
  std::optional<result<Reply>> r;
  try {
    r.emplace(co_await fn->invoke(fn->object.get(), call, *flatbuffers::GetRoot<Request>(payload.data())));
  } catch (const rpc_exception& e) {
    r.emplace(e.error());
  }
  answer_typed(call, *r);
}

}  // namespace detail

/// Registers a typed coroutine handler under `full_name` ("Service.Method"), as
/// add_coroutine_method does (server::add_method: the default pool). `handler` is called as
/// `handler(deferred_reply&, const Request&)` and returns task<result<Reply>>.
template <class Request, class Reply, class F>
void add_typed_coroutine_method(server& s, std::string full_name, F handler) {
  using typed = detail::typed_coro_fn<Request, Reply>;
  auto fn = std::make_shared<typed>();
  fn->object = std::make_shared<F>(std::move(handler));
  fn->invoke = [](void* object, deferred_reply& call, const Request& request) -> task<result<Reply>> {
    return (*static_cast<F*>(object))(call, request);
  };
  fn->full_name = full_name;
  coro_abi::coro_handler_fn erased{fn, [](void* object, deferred_reply& call) -> task<void> {
                                   return detail::serve_typed_coro<Request, Reply>(static_cast<const typed*>(object), call);
                                 }};
  s.add_method(std::move(full_name),
               [&s, erased = std::move(erased)](call_context& call) { coro_abi::start_coro_handler(s, erased, call); });
}

}  // namespace ringrpc

RINGRPC_API_END

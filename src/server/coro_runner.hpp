#pragma once
// The coroutine that owns one coroutine handler's run, unary (coro_server.cpp) or stream
// (coro_streams.cpp): its promise holds the frame's context (server/coro_frames.hpp), which the
// tasks it awaits inherit (coro_abi::context_carrier); it starts at once and frees itself.

#include <coroutine>
#include <exception>

#include "ringrpc/task.hpp"
#include "server/coro_frames.hpp"

namespace ringrpc::detail {

struct handler_run {
  struct promise_type : coro_abi::pooled_frame, coro_abi::context_carrier {
    coro_abi::frame_context context;
    promise_type() noexcept { coro_context = &context; }
    handler_run get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all
  };
};

// Yields the running handler_run's context (never suspends).
struct own_context {
  coro_abi::frame_context* context = nullptr;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<handler_run::promise_type> h) noexcept {
    context = &h.promise().context;
    return false;
  }
  coro_abi::frame_context& await_resume() const noexcept { return *context; }
};

}  // namespace ringrpc::detail

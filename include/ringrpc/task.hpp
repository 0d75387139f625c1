#pragma once
/// \file ringrpc::task<T>: the coroutine type of ringrpc's coroutine calls and handlers
/// (docs/execution.md, "Coroutines"). C++20 only; no dependency beyond the standard library.
///
///     ringrpc::task<int> answer() { co_return 42; }
///     ringrpc::task<void> caller() { int v = co_await answer(); ... }
///
/// - Lazy: a task runs only when awaited (or handed to start_detached). Move-only; destroying
///   a task that never ran, or has finished, destroys its frame. Destroying one that was
///   started and is suspended (its awaiting coroutine destroyed while it waits) calls
///   std::terminate: whatever it awaits would resume it into freed memory later.
/// - When a task finishes, its awaiter resumes by symmetric transfer: a chain of tasks that
///   complete synchronously uses no stack per level.
/// - An exception that leaves a task's body is rethrown from the `co_await` that awaited it.
/// - Frames come from a per-thread free list with size classes (below), so a program that
///   awaits the same kinds of tasks over and over allocates nothing on the heap once warm.
///
/// Threads: a task has no thread of its own; it runs on whichever thread resumes it. What
/// resumes where for ringrpc's own awaitables (calls, to_pool) is ringrpc/coro.hpp's rule.

#include "ringrpc/cxx20.hpp"

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace coro_abi {

/// The context of a coroutine handler's frame (src/server/coro_frames.hpp): its home pool, the
/// incoming call its calls follow, its cancellation. Opaque here.
struct frame_context;

/// What a promise carries for ringrpc's awaitables: the handler frame it runs for, or null. A
/// task awaited by a coroutine that carries one inherits it (the awaiter copies it into the
/// awaited promise), so the context follows the chain of awaits and nothing else: a task
/// handed to start_detached starts with none.
struct context_carrier {
  frame_context* coro_context = nullptr;
};

/// The context of the coroutine `h` (null when its promise carries none).
template <class P>
frame_context* context_of(std::coroutine_handle<P> h) noexcept {
  if constexpr (std::is_base_of_v<context_carrier, P>) {
    return h.promise().coro_context;
  } else {
    return nullptr;
  }
}

}  // namespace coro_abi

namespace coro_abi {

// --- Coroutine frames (src/base/frame_pool.cpp)
//
// Size classes of 64 B to 4 KiB (powers of two); larger frames go to the heap directly. Each
// thread keeps a free list per class. A frame freed on the thread that allocated it goes back
// to that thread's list; one freed on another thread (a handler frame started on a pool worker
// and finished on a client's I/O thread) is pushed on its allocating thread's lock-free return
// stack, which that thread takes back whole (one exchange) when its list is empty. So frames
// flow back to where they are allocated again, and a steady pattern of cross-thread hand-offs
// allocates nothing, where a list per freeing thread would grow on one side and miss on the
// other. A thread's lists are freed when it exits; frames it allocated that are alive then go
// back to the heap when freed (the last one frees the thread's record). Each list keeps at most 256 frames per class; beyond that a
// freed frame goes back to the heap.

/// A frame of `size` bytes, aligned for any scalar (16 bytes). Throws std::bad_alloc.
void* frame_alloc(std::size_t size);
/// Frees a frame from frame_alloc(), on any thread.
void frame_free(void* frame) noexcept;

/// Gives a promise type the frame pool's operator new and delete.
struct pooled_frame {
  static void* operator new(std::size_t size) { return frame_alloc(size); }
  static void operator delete(void* frame) noexcept { frame_free(frame); }
};

}  // namespace coro_abi

template <class T>
class task;

/// How a task ended: its value (none for task<void>) or the exception that left it. What
/// start_detached's completion callback receives.
template <class T>
class task_outcome {
 public:
  /// True when the task returned normally.
  bool ok() const noexcept { return _v.index() == 1; }
  /// The value (task<void>: nothing); rethrows the task's exception.
  T value() {
    if (_v.index() == 2) std::rethrow_exception(std::get<2>(_v));
    if constexpr (!std::is_void_v<T>) return std::move(std::get<1>(_v));
  }
  /// The exception that left the task; null when it returned.
  std::exception_ptr exception() const noexcept { return _v.index() == 2 ? std::get<2>(_v) : nullptr; }

 private:
  template <class>
  friend struct task_promise;
  template <class>
  friend class task;
  // What an awaiter takes: the value or the exception, once; a second take throws.
  T take() {
    if (_v.index() == 0) throw std::logic_error("ringrpc::task: its result was taken already (await a task once)");
    if (_v.index() == 2) {
      std::exception_ptr e = std::get<2>(_v);
      _v.template emplace<0>();
      std::rethrow_exception(e);
    }
    if constexpr (std::is_void_v<T>) {
      _v.template emplace<0>();
    } else {
      T v = std::move(std::get<1>(_v));
      _v.template emplace<0>();
      return v;
    }
  }
  struct none {};
  using stored = std::conditional_t<std::is_void_v<T>, none, T>;
  std::variant<std::monostate, stored, std::exception_ptr> _v;
};

namespace detail {

/// Resumes whoever awaited the finished task (symmetric transfer), or nothing.
struct task_final_awaiter {
  std::coroutine_handle<> continuation;
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<>) const noexcept {
    return continuation ? continuation : std::noop_coroutine();
  }
  void await_resume() const noexcept {}
};

template <class T>
struct task_promise_base : coro_abi::pooled_frame, coro_abi::context_carrier {
  task_outcome<T> outcome;
  std::coroutine_handle<> continuation;
  std::suspend_always initial_suspend() const noexcept { return {}; }
  task_final_awaiter final_suspend() const noexcept { return {continuation}; }
};

}  // namespace detail

template <class T>
struct task_promise : detail::task_promise_base<T> {
  task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    this->outcome._v.template emplace<1>(std::forward<U>(v));
  }
  /// For `co_return {a, b};` (a braced list deduces no U above).
  void return_value(T&& v) noexcept(std::is_nothrow_move_constructible_v<T>) {
    this->outcome._v.template emplace<1>(std::move(v));
  }
  void unhandled_exception() noexcept { this->outcome._v.template emplace<2>(std::current_exception()); }
};

template <>
struct task_promise<void> : detail::task_promise_base<void> {
  task<void> get_return_object() noexcept;
  void return_void() noexcept { outcome._v.emplace<1>(); }
  void unhandled_exception() noexcept { outcome._v.emplace<2>(std::current_exception()); }
};

/// A lazily started coroutine producing a T (or nothing). Owns its frame.
template <class T = void>
class [[nodiscard]] task {
 public:
  using promise_type = task_promise<T>;

  task() noexcept = default;
  task(task&& other) noexcept : _h(std::exchange(other._h, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (_h) destroy(_h);
      _h = std::exchange(other._h, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() {
    if (_h) destroy(_h);
  }

  /// False for a default-constructed or moved-from task.
  explicit operator bool() const noexcept { return static_cast<bool>(_h); }
  /// True once the task has been awaited (running, suspended or finished).
  bool started() const noexcept { return _h && (_h.done() || _h.promise().continuation); }

  /// Awaiting starts the task (await it once) and yields its value or rethrows its exception.
  /// The task keeps its frame either way: `co_await f()` and `co_await t` alike.
  auto operator co_await() & noexcept { return awaiter{_h}; }
  auto operator co_await() && noexcept { return awaiter{_h}; }

  /// For start_detached: gives up the frame.
  std::coroutine_handle<promise_type> release() noexcept { return std::exchange(_h, {}); }

 private:
  struct awaiter {
    std::coroutine_handle<promise_type> h;
    bool await_ready() const noexcept { return !h || h.done(); }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiting) noexcept {
      h.promise().continuation = awaiting;
      h.promise().coro_context = coro_abi::context_of(awaiting);
      return h;
    }
    T await_resume() {
      if (!h) throw std::invalid_argument("ringrpc::task: awaiting an empty task");
      return h.promise().outcome.take();
    }
  };
  friend struct task_promise<T>;
  explicit task(std::coroutine_handle<promise_type> h) noexcept : _h(h) {}
  // A task that was awaited and has not finished is suspended in something (a call, to_pool)
  // that will resume it and write into its frame: freeing the frame now would let that write
  // land in freed memory later, so this ends the program at once instead.
  static void destroy(std::coroutine_handle<promise_type> h) noexcept {
    if (h.promise().continuation && !h.done()) std::terminate();
    h.destroy();
  }
  std::coroutine_handle<promise_type> _h;
};

template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}

namespace detail {

/// The frame that runs a detached task: starts at once, frees itself when done.
struct detached_run {
  struct promise_type : coro_abi::pooled_frame {
    detached_run get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    // The body catches everything but what the completion callback throws.
    void unhandled_exception() const noexcept { std::terminate(); }
  };
};

/// Starts the awaited task and waits for it without rethrowing: the outcome as a value.
template <class T>
struct outcome_awaiter {
  std::coroutine_handle<task_promise<T>> h;
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    h.promise().continuation = awaiting;
    return h;
  }
  task_outcome<T> await_resume() noexcept { return std::move(h.promise().outcome); }
};

template <class T, class F>
detached_run run_detached(task<T> t, F on_done) {
  // The task's frame is destroyed with this one (the guard, then `t` being empty).
  struct frame_guard {
    std::coroutine_handle<task_promise<T>> h;
    ~frame_guard() { h.destroy(); }
  } guard{t.release()};
  task_outcome<T> outcome = co_await outcome_awaiter<T>{guard.h};
  on_done(outcome);
}

}  // namespace detail

/// Starts `t` now, on this thread, and returns when it first suspends (or finishes). When it
/// finishes, `on_done(task_outcome<T>&)` runs on the thread that finished it, and both frames
/// are freed. `on_done` must not throw (an exception from it terminates); it is moved into the
/// runner's frame, so a small callable costs no allocation beyond the frame pool's. Throws
/// std::invalid_argument for an empty task or one that was started already, std::bad_alloc.
template <class T, class F>
void start_detached(task<T> t, F on_done) {
  if (!t) throw std::invalid_argument("ringrpc::start_detached: an empty task");
  if (t.started()) throw std::invalid_argument("ringrpc::start_detached: a task that was started already");
  detail::run_detached<T>(std::move(t), std::move(on_done));
}

}  // namespace ringrpc

RINGRPC_API_END

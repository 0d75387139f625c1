#include "server/coro_frames.hpp"

#include <algorithm>
#include <utility>

namespace ringrpc::coro_abi {

void frame_context::release() noexcept {
  reply = nullptr;
  from_frame.reset();
  from_user.reset();
  merged.reset();
  parent.reset();
  // `stop` goes in coro_frame_registry::leave(), under the mutex cancel_all() reads it under.
}

coro_home* frame_home(frame_context* ctx) noexcept { return ctx != nullptr ? ctx->home : nullptr; }

const call_parent* frame_parent(frame_context* ctx) {
  if (ctx == nullptr || ctx->reply == nullptr) return nullptr;
  if (!ctx->parent) ctx->parent.emplace(*ctx->reply);  // makes the call's hub (once)
  return *ctx->parent ? &*ctx->parent : nullptr;
}

std::stop_token frame_cancel(frame_context* ctx, const std::stop_token& user) {
  if (ctx == nullptr) return user;
  std::stop_token frame = ctx->registry->token_of(*ctx);
  if (!user.stop_possible()) return frame;
  // Both cancel the call: a source of its own that either fires. The previous call's
  // callbacks go first (that call has completed: the coroutine is running again).
  ctx->from_frame.reset();
  ctx->from_user.reset();
  ctx->merged.emplace();
  ctx->from_user.emplace(user, frame_context::forward{&*ctx->merged});
  ctx->from_frame.emplace(frame, frame_context::forward{&*ctx->merged});
  return ctx->merged->get_token();
}

}  // namespace ringrpc::coro_abi

namespace ringrpc::detail {

bool coro_frame_registry::enter() noexcept {
  std::lock_guard lock(_mu);
  if (_closed) return false;
  ++_count;
  return true;
}

void coro_frame_registry::cancel_enter() noexcept {
  std::lock_guard lock(_mu);
  --_count;
}

void coro_frame_registry::link(coro_abi::frame_context& f) noexcept {
  std::lock_guard lock(_mu);
  f.registry = this;
  f.cancelled = _cancelled;
  f.prev = nullptr;
  f.next = _head;
  if (_head != nullptr) _head->prev = &f;
  _head = &f;
}

void coro_frame_registry::leave(coro_abi::frame_context& f) noexcept {
  std::optional<std::stop_source> dropped;  // its state freed after the lock
  std::lock_guard lock(_mu);
  dropped.swap(f.stop);
  if (f.prev != nullptr) f.prev->next = f.next;
  if (f.next != nullptr) f.next->prev = f.prev;
  if (_head == &f) _head = f.next;
  f.prev = f.next = nullptr;
  --_count;
}

std::stop_token coro_frame_registry::token_of(coro_abi::frame_context& f) {
  if (f.stop) return f.stop->get_token();  // only this frame writes f.stop
  std::stop_source made;                   // allocates: outside the lock
  std::lock_guard lock(_mu);
  f.stop.emplace(std::move(made));
  if (f.cancelled) f.stop->request_stop();
  return f.stop->get_token();
}

void coro_frame_registry::cancel_all() noexcept {
  // The stop callbacks run outside the mutex: one may resume its frame on this thread (a frame
  // parked on a client stream, whose cancel wakes it, once its home takes no more), and a frame
  // that ends leaves the registry under this mutex. So: mark every frame, then take them one at
  // a time, each source copied (which shares its state, alive if the frame leaves meanwhile) and
  // fired after the unlock. Frames made from now on find `_cancelled` (token_of fires theirs).
  std::unique_lock lock(_mu);
  _cancelled = true;
  for (coro_abi::frame_context* f = _head; f != nullptr; f = f->next) f->cancelled = true;
  for (;;) {
    coro_abi::frame_context* f = _head;
    while (f != nullptr && (f->stop_fired || !f->stop)) f = f->next;
    if (f == nullptr) return;
    f->stop_fired = true;
    std::stop_source source = *f->stop;
    lock.unlock();
    source.request_stop();
    lock.lock();
  }
}

bool coro_frame_registry::close_if_empty() noexcept {
  std::lock_guard lock(_mu);
  if (_count == 0) _closed = true;
  return _closed;
}

std::uint64_t coro_frame_registry::alive() const noexcept {
  std::lock_guard lock(_mu);
  return _count;
}

std::vector<std::string> coro_frame_registry::methods() const {
  std::vector<std::string> out;
  std::lock_guard lock(_mu);
  for (const coro_abi::frame_context* f = _head; f != nullptr; f = f->next) {
    if (std::find(out.begin(), out.end(), f->method) == out.end()) out.emplace_back(f->method);
  }
  return out;
}

}  // namespace ringrpc::detail

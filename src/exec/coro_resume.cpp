// Resuming coroutines on a pool (ringrpc/coro.hpp's resume rule). A coroutine's home is a
// thread_pool; the resumption is a pool_task laid in the awaiting frame's resume_slot, queued
// as a singleton: each slot waits in a pool at most once at a time, so it needs no queue slot
// and is never refused for a full queue (a resumption refused would have nowhere to go).

#include "ringrpc/coro.hpp"

#include <new>

#include "exec/worker_pool.hpp"

namespace ringrpc::coro_abi {
namespace {

// The pool_task inside a resume_slot's link; `slot` leads back to the rest.
struct resume_task {
  detail::pool_task task;
  resume_slot* slot;
};
static_assert(sizeof(resume_task) <= sizeof(resume_slot::link));
static_assert(alignof(resume_task) <= alignof(void*));

detail::thread_pool* pool_of(coro_home* home) noexcept { return reinterpret_cast<detail::thread_pool*>(home); }

void run_resumption(detail::pool_task* t) noexcept {
  // The resumed coroutine may finish and free the frame holding the slot: nothing of it is
  // read after resume().
  reinterpret_cast<resume_task*>(t)->slot->handle.resume();
}

}  // namespace

bool post(coro_home* home, resume_slot& slot) noexcept {
  auto* rt = new (slot.link) resume_task{};
  rt->task.run = &run_resumption;
  rt->task.label = "coroutine";
  rt->slot = &slot;
  // submit_singleton wakes a worker inside the pool's gate: once the resumption is queued it
  // may run and end the last frame a stopping server waits for, and the pool may go right after
  // (src/exec/pool_submit.cpp).
  return pool_of(home)->submit_singleton(&rt->task);
}

}  // namespace ringrpc::coro_abi

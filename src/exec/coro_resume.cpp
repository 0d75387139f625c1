// Resuming coroutines on a pool (ringrpc/coro.hpp's resume rule). A coroutine's home is a
// thread_pool; the resumption is a pool_task laid in the awaiting frame's resume_slot, queued
// as a singleton: each slot waits in a pool at most once at a time, so it needs no queue slot
// and is never refused for a full queue (a resumption refused would have nowhere to go).

#include "ringrpc/coro.hpp"

#include <new>

#include "exec/worker_pool.hpp"

namespace ringrpc::detail {
namespace {

thread_local constinit coro_step tl_step{};

// The pool_task inside a resume_slot's link; `slot` leads back to the rest.
struct resume_task {
  pool_task task;
  resume_slot* slot;
};
static_assert(sizeof(resume_task) <= sizeof(resume_slot::link));
static_assert(alignof(resume_task) <= alignof(void*));

thread_pool* pool_of(coro_home* home) noexcept { return reinterpret_cast<thread_pool*>(home); }

void run_resumption(pool_task* t) noexcept {
  resume_slot* slot = reinterpret_cast<resume_task*>(t)->slot;
  // The resumed coroutine may finish and free the frame holding `slot`: read it first.
  const coro_step step = slot->step;
  coro_resume_here(slot->handle, step);
}

}  // namespace

coro_step& current_coro_step() noexcept { return tl_step; }

coro_home* coro_home_here() noexcept {
  if (tl_step.home != nullptr) return tl_step.home;
  return reinterpret_cast<coro_home*>(thread_pool::current());
}

bool coro_post(coro_home* home, resume_slot& slot) noexcept {
  auto* rt = new (slot.link) resume_task{};
  rt->task.run = &run_resumption;
  rt->task.label = "coroutine";
  rt->slot = &slot;
  return pool_of(home)->submit_singleton(&rt->task);
}

void coro_resume_here(std::coroutine_handle<> h, const coro_step& step) noexcept {
  const coro_step saved = tl_step;
  tl_step = step;
  h.resume();
  tl_step = saved;
}

}  // namespace ringrpc::detail

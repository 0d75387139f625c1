// Resuming coroutines at their home (ringrpc/coro.hpp's resume rule; exec/coro_home.hpp). On
// a pool the resumption is a pool_task laid in the awaiting frame's resume_slot, queued as a
// singleton: each slot waits in a pool at most once at a time, so it needs no queue slot and
// is never refused for a full queue (a resumption refused would have nowhere to go).

#include "ringrpc/coro.hpp"

#include <new>

#include "exec/coro_home.hpp"
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

void run_resumption(detail::pool_task* t) noexcept {
  // The resumed coroutine may finish and free the frame holding the slot: nothing of it is
  // read after resume().
  reinterpret_cast<resume_task*>(t)->slot->handle.resume();
}

}  // namespace

bool post(coro_home* home, resume_slot& slot) noexcept { return home->post(*home, slot); }

}  // namespace ringrpc::coro_abi

namespace ringrpc::detail {

bool resume_on_pool(coro_abi::coro_home& self, coro_abi::resume_slot& slot) noexcept {
  auto* rt = new (slot.link) coro_abi::resume_task{};
  rt->task.run = &coro_abi::run_resumption;
  rt->task.label = "coroutine";
  rt->slot = &slot;
  // submit_singleton wakes a worker inside the pool's gate: once the resumption is queued it
  // may run and end the last frame a stopping server waits for, and the pool may go right after
  // (src/exec/pool_submit.cpp).
  return static_cast<thread_pool*>(self.owner)->submit_singleton(&rt->task);
}

}  // namespace ringrpc::detail

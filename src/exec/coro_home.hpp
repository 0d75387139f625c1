#pragma once
// Where a coroutine resumes (ringrpc/coro.hpp's resume rule), as the library sees it: the
// opaque coro_abi::coro_home of the public headers is one of these. A pool is one
// (thread_pool::home(), coro_resume.cpp), and so is a coroutine handler frame that started on a
// shard and stays there (server/coro_server.cpp): its resumptions queue on that shard.

#include "ringrpc/coro.hpp"

namespace ringrpc::coro_abi {

struct coro_home {
  /// Queues slot.handle's resumption at this home. False when the home takes no more (a pool
  /// that has shut down, a shard whose loop is over): the completing thread then resumes the
  /// coroutine itself. Never throws or allocates: what the queue needs lives in slot.link.
  bool (*post)(coro_home& self, resume_slot& slot) noexcept = nullptr;
  void* owner = nullptr;  // what `post` queues on
};

}  // namespace ringrpc::coro_abi

namespace ringrpc::detail {

/// A pool's `post` (coro_resume.cpp): `self.owner` is the thread_pool.
bool resume_on_pool(coro_abi::coro_home& self, coro_abi::resume_slot& slot) noexcept;

}  // namespace ringrpc::detail

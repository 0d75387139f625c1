#pragma once
// The coroutine frame pool's diagnostics (src/base/frame_pool.cpp; ringrpc/task.hpp has the
// allocator itself, as coro_abi::frame_alloc and frame_free). For tests: not in the public
// headers, so not part of the ABI.

#include <cstdint>

namespace ringrpc::detail {

/// What the calling thread's frame pool holds.
struct frame_pool_counts {
  std::uint64_t live = 0;         ///< frames allocated by this thread and not freed yet (anywhere)
  std::uint64_t cached = 0;       ///< frames in this thread's free lists now
  std::uint64_t heap_allocs = 0;  ///< frames this thread had to take from the heap so far
};
frame_pool_counts this_thread_frame_pool() noexcept;

}  // namespace ringrpc::detail

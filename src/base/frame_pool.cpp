// Coroutine frames from per-thread free lists (ringrpc/task.hpp describes the policy).
//
// Every frame carries a 16-byte header naming the thread cache that allocated it and its size
// class, so a frame freed anywhere finds its way home. A cache is reference counted by the
// frames it has out plus one for its thread; the thread's exit marks it orphaned, and whoever
// drops the last reference (the thread, or a late free on another thread) frees it together
// with what waits on its return stack.

#include "ringrpc/task.hpp"

#include "base/frame_pool.hpp"

#include <array>
#include <atomic>
#include <new>

namespace ringrpc {
namespace {

constexpr std::size_t class_count = 7;  // 64 B .. 4 KiB
constexpr std::size_t smallest_shift = 6;
constexpr std::uint32_t oversized = 0xff;
constexpr std::size_t max_cached_per_class = 256;

struct thread_cache;

struct alignas(16) frame_header {
  thread_cache* owner;  // null for an oversized frame, which goes straight back to the heap
  std::uint32_t size_class;
  std::uint32_t unused;
};
static_assert(sizeof(frame_header) == 16);

// While a frame is free, its body holds the link.
struct free_frame {
  free_frame* next;
};

free_frame* body_of(frame_header* h) noexcept { return reinterpret_cast<free_frame*>(h + 1); }
frame_header* header_of(free_frame* f) noexcept { return reinterpret_cast<frame_header*>(f) - 1; }

std::uint32_t class_of(std::size_t size) noexcept {
  std::size_t total = size + sizeof(frame_header);
  std::uint32_t c = 0;
  while (c < class_count && (std::size_t{1} << (smallest_shift + c)) < total) ++c;
  return c < class_count ? c : oversized;
}

std::size_t bytes_of(std::uint32_t size_class) noexcept { return std::size_t{1} << (smallest_shift + size_class); }

struct thread_cache {
  std::array<free_frame*, class_count> lists{};
  std::array<std::size_t, class_count> lengths{};
  std::uint64_t heap_allocs = 0;
  // Frames out plus one for the thread: the cache lives until both are gone.
  std::atomic<std::uint64_t> refs{1};
  std::atomic<bool> orphaned{false};
  // Frames of this cache freed on other threads, pushed there and taken here whole.
  std::atomic<free_frame*> returned{nullptr};

  void push_local(frame_header* h) noexcept {
    const std::uint32_t c = h->size_class;
    if (lengths[c] >= max_cached_per_class) {
      ::operator delete(h);
      return;
    }
    free_frame* f = body_of(h);
    f->next = lists[c];
    lists[c] = f;
    ++lengths[c];
  }

  void take_returned() noexcept {
    free_frame* f = returned.exchange(nullptr, std::memory_order_acquire);
    while (f) {
      free_frame* next = f->next;
      push_local(header_of(f));
      f = next;
    }
  }

  void free_all() noexcept {
    for (std::size_t c = 0; c < class_count; ++c) {
      while (free_frame* f = lists[c]) {
        lists[c] = f->next;
        ::operator delete(header_of(f));
      }
      lengths[c] = 0;
    }
    free_frame* f = returned.exchange(nullptr, std::memory_order_acquire);
    while (f) {
      free_frame* next = f->next;
      ::operator delete(header_of(f));
      f = next;
    }
  }

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      free_all();
      delete this;
    }
  }
};

// Set when the thread's cache_holder is destroyed: a frame made or freed later, by another
// thread_local's destructor, must not touch the holder (a destroyed object; making a new cache
// there would leak it). Trivially destructible, so it is still readable then.
thread_local constinit bool tl_exited = false;

// The thread's cache, made on first use. Its holder's destructor orphans it at thread exit.
struct cache_holder {
  thread_cache* cache = nullptr;
  ~cache_holder() {
    tl_exited = true;
    if (!cache) return;
    cache->free_all();
    cache->orphaned.store(true, std::memory_order_release);
    cache->release();
    cache = nullptr;  // a frame freed by a later thread_local destructor goes to the heap path
  }
};

thread_local cache_holder tl_cache;

thread_cache& this_cache() {
  if (!tl_cache.cache) tl_cache.cache = new thread_cache();
  return *tl_cache.cache;
}

}  // namespace

void* coro_abi::frame_alloc(std::size_t size) {
  const std::uint32_t c = class_of(size);
  if (c == oversized || tl_exited) {  // straight from and back to the heap (owner null)
    auto* h = static_cast<frame_header*>(::operator new(size + sizeof(frame_header)));
    *h = frame_header{nullptr, oversized, 0};
    return h + 1;
  }
  thread_cache& cache = this_cache();
  if (!cache.lists[c] && cache.returned.load(std::memory_order_relaxed)) cache.take_returned();
  frame_header* h;
  if (free_frame* f = cache.lists[c]) {
    cache.lists[c] = f->next;
    --cache.lengths[c];
    h = header_of(f);
  } else {
    h = static_cast<frame_header*>(::operator new(bytes_of(c)));
    ++cache.heap_allocs;
  }
  *h = frame_header{&cache, c, 0};
  cache.refs.fetch_add(1, std::memory_order_relaxed);
  return h + 1;
}

void coro_abi::frame_free(void* frame) noexcept {
  if (!frame) return;
  frame_header* h = static_cast<frame_header*>(frame) - 1;
  thread_cache* owner = h->owner;
  if (!owner) {
    ::operator delete(h);
    return;
  }
  if (!tl_exited && owner == tl_cache.cache) {
    owner->push_local(h);
  } else if (owner->orphaned.load(std::memory_order_acquire)) {
    ::operator delete(h);
  } else {
    // Treiber push; only the owner (or the cache's last release) pops, all at once, so the
    // push has no ABA to fear.
    free_frame* f = body_of(h);
    f->next = owner->returned.load(std::memory_order_relaxed);
    while (!owner->returned.compare_exchange_weak(f->next, f, std::memory_order_release,
                                                  std::memory_order_relaxed)) {
    }
  }
  owner->release();
}

detail::frame_pool_counts detail::this_thread_frame_pool() noexcept {
  detail::frame_pool_counts counts;
  thread_cache* cache = tl_exited ? nullptr : tl_cache.cache;
  if (!cache) return counts;
  counts.live = cache->refs.load(std::memory_order_acquire) - 1;
  for (std::size_t n : cache->lengths) counts.cached += n;
  counts.heap_allocs = cache->heap_allocs;
  return counts;
}

}  // namespace ringrpc

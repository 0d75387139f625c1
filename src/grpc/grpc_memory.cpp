// nghttp2's allocator for our sessions (grpc_memory.hpp). Each block carries, in front, the
// size nghttp2 asked for (its free() is not told) so the session's count follows it. Blocks up
// to 1 KiB are rounded up to 64-byte classes, and freed ones wait in a per-thread list of their
// class for the next allocation of that class, up to 512 KiB in all per thread (sized when
// nghttp2's whole session made about seven blocks per call; its HPACK decoder, all that is
// left of it, makes far fewer, so the bound is rarely reached). Sessions run on their shard's
// thread; a block freed elsewhere joins that thread's lists, which is as good.
#include "grpc/grpc_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ringrpc::detail::grpc {

namespace {

constexpr std::size_t size_prefix = 16;  // keeps malloc's alignment
constexpr std::size_t class_bytes = 64;
constexpr std::size_t classes = 16;      // blocks (prefix included) up to 1 KiB
constexpr std::size_t kept_bytes = 512 * 1024;  // per thread, all classes

// The class of a block whose total size (prefix included) is `total`, or `classes` if none.
std::size_t class_of(std::size_t total) noexcept {
  const std::size_t c = (total + class_bytes - 1) / class_bytes;
  return c >= 1 && c <= classes ? c - 1 : classes;
}

struct free_block {
  free_block* next;
};

struct block_cache {
  free_block* heads[classes] = {};
  std::size_t bytes = 0;  // of the blocks kept

  ~block_cache() {
    for (free_block*& h : heads) {
      while (h != nullptr) {
        free_block* next = h->next;
        std::free(h);
        h = next;
      }
    }
  }

  void* take(std::size_t c) noexcept {
    if (c == classes) return nullptr;
    free_block* b = heads[c];
    if (b == nullptr) return std::malloc((c + 1) * class_bytes);
    heads[c] = b->next;
    bytes -= (c + 1) * class_bytes;
    return b;
  }

  void give(void* base, std::size_t c) noexcept {
    if (c == classes || bytes + (c + 1) * class_bytes > kept_bytes) {
      std::free(base);
      return;
    }
    auto* b = static_cast<free_block*>(base);
    b->next = heads[c];
    heads[c] = b;
    bytes += (c + 1) * class_bytes;
  }
};

thread_local block_cache cache;

library_memory& of(void* user) noexcept { return *static_cast<library_memory*>(user); }

std::size_t size_of(void* p) noexcept {
  std::size_t n = 0;
  std::memcpy(&n, static_cast<std::byte*>(p) - size_prefix, sizeof n);
  return n;
}

void* allocate(std::size_t n, void* user) {
  auto& m = of(user);
  if (n > m.cap || m.bytes > m.cap - n) return nullptr;
  const std::size_t c = class_of(n + size_prefix);
  void* base = c == classes ? std::malloc(n + size_prefix) : cache.take(c);
  if (base == nullptr) return nullptr;
  std::memcpy(base, &n, sizeof n);
  m.bytes += n;
  return static_cast<std::byte*>(base) + size_prefix;
}

void release(void* p, void* user) {
  if (p == nullptr) return;
  const std::size_t n = size_of(p);
  of(user).bytes -= n;
  cache.give(static_cast<std::byte*>(p) - size_prefix, class_of(n + size_prefix));
}

void* allocate_zeroed(std::size_t count, std::size_t size, void* user) {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* p = allocate(count * size, user);
  if (p != nullptr) std::memset(p, 0, count * size);
  return p;
}

void* reallocate(void* p, std::size_t n, void* user) {
  if (p == nullptr) return allocate(n, user);
  if (n == 0) {
    release(p, user);
    return nullptr;
  }
  auto& m = of(user);
  const std::size_t old = size_of(p);
  const std::size_t c = class_of(old + size_prefix);
  if (c != classes && class_of(n + size_prefix) == c) {
    // Still fits the block it has (and the cap, counted as for a new block).
    if (n > old && (n - old > m.cap || m.bytes > m.cap - (n - old))) return nullptr;
    std::memcpy(static_cast<std::byte*>(p) - size_prefix, &n, sizeof n);
    m.bytes = m.bytes - old + n;
    return p;
  }
  // Counted as moved, not as both at once: the old block goes as soon as it is copied.
  m.bytes -= old;
  void* grown = allocate(n, user);
  if (grown == nullptr) {
    m.bytes += old;
    return nullptr;
  }
  std::memcpy(grown, p, old < n ? old : n);
  cache.give(static_cast<std::byte*>(p) - size_prefix, c);
  return grown;
}

}  // namespace

nghttp2_mem counting_allocator(library_memory& m) noexcept {
  return {&m, allocate, release, allocate_zeroed, reallocate};
}

}  // namespace ringrpc::detail::grpc

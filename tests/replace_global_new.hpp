#pragma once
// Replaces the global operator new and delete for the one test file that includes it (they are
// definitions, not inline: one file per program), so that every allocation of the program goes
// through that file's `test_alloc`, which counts, measures or fails it and returns memory from
// malloc, which the deletes free. The nothrow forms go through it too: code that allocates with
// new (std::nothrow) must get memory from the heap these deletes free into (ASan reports a
// mismatch otherwise), and be seen like the rest.
#include <cstddef>
#include <cstdlib>
#include <new>

/// Defined by the including test file: malloc's memory for `n` bytes, or std::bad_alloc.
void* test_alloc(std::size_t n);

void* operator new(std::size_t n) { return test_alloc(n); }
void* operator new[](std::size_t n) { return test_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return test_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return test_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

#pragma once
// Replaces the global operator new and delete for the one test file that includes it (they are
// definitions, not inline: one file per program), so that every allocation of the program goes
// through that file's `test_alloc`, which counts, measures or fails it and returns memory from
// malloc, which the deletes free. The nothrow forms go through it too: code that allocates with
// new (std::nothrow) must get memory from the heap these deletes free into (ASan reports a
// mismatch otherwise), and be seen like the rest.
//
// Not under clang's ThreadSanitizer: its runtime is a static archive, linked whole, that defines
// every global operator new and delete itself, so a second definition does not link. There the
// replacement steps aside (RINGRPC_TEST_NEW_REPLACED is 0) and the tests that count or fail
// allocations skip; they run in the release and ASan stages.
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__clang__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGRPC_TEST_NEW_REPLACED 0
#endif
#endif
#ifndef RINGRPC_TEST_NEW_REPLACED
#define RINGRPC_TEST_NEW_REPLACED 1
#endif
/// What a test that needs the replacement starts with.
#define RINGRPC_SKIP_UNLESS_NEW_REPLACED()                                                          \
  if (!RINGRPC_TEST_NEW_REPLACED) GTEST_SKIP() << "global operator new is the sanitizer's here " \
                                                  "(tests/replace_global_new.hpp)"

/// Defined by the including test file: malloc's memory for `n` bytes, or std::bad_alloc.
void* test_alloc(std::size_t n);

#if RINGRPC_TEST_NEW_REPLACED

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
#endif  // RINGRPC_TEST_NEW_REPLACED

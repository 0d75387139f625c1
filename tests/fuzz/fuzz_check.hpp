#pragma once
// How a fuzz target reports a broken invariant: one line on stderr naming the target, then
// abort(), which libFuzzer takes as a crash and keeps the input for. RINGRPC_FUZZ_TARGET, the
// target's name, comes from tests/fuzz/meson.build.

#include <cstdio>
#include <cstdlib>

#ifndef RINGRPC_FUZZ_TARGET
#error "RINGRPC_FUZZ_TARGET: the fuzz target's name (tests/fuzz/meson.build sets it)"
#endif

namespace ringrpc::fuzz {

/// "<target>: <what>", then abort.
[[noreturn]] inline void bug(const char* what) {
  std::fprintf(stderr, "%s: %s\n", RINGRPC_FUZZ_TARGET, what);
  std::abort();
}

/// FUZZ_CHECK's report: "<target>: check failed: <condition> (<file>:<line>)", then abort.
[[noreturn]] inline void check_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s: check failed: %s (%s:%d)\n", RINGRPC_FUZZ_TARGET, condition, file, line);
  std::abort();
}

}  // namespace ringrpc::fuzz

#define FUZZ_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) ::ringrpc::fuzz::check_failed(#cond, __FILE__, __LINE__); \
  } while (0)

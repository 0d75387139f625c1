// main() for tests that need io_uring: exits 77 (meson's "skipped") where the kernel or a
// seccomp profile does not allow it, instead of failing every test with the same message.

#include <gtest/gtest.h>

#include <cstdio>

#include "uring/uring_probe.hpp"

int main(int argc, char** argv) {
  if (const auto why = ringrpc::detail::io_uring_unavailable_reason(); !why.empty()) {
    std::fprintf(stderr, "skipping: %s\n", why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

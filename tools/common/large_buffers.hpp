#pragma once
// Keeping glibc from giving large buffers back to the kernel after every call. A frame of
// 256 KiB costs the server three buffers of that size per call (the frame as it is assembled,
// the call's request, its reply), all freed when the call ends: that much memory following the
// bytes is ringrpc's rule. glibc's defaults then make every call fault all their pages in
// again: after the first large free it raises its mmap threshold to that size (later large
// buffers come from a heap), and frees past its trim threshold (twice the mmap one) hand the
// heap's top back with madvise(MADV_DONTNEED). Measured here (ringrpc-server, one connection,
// 256 KiB echoes one at a time, server on one core): 1.7 ms of server CPU per call, 0.12 ms
// with the fixed thresholds below; the raw io_uring echo loop takes 0.12 ms.
//
// Fixed thresholds (which also turn glibc's adjustment off): buffers up to 32 MiB come from
// the heaps, and a heap gives memory back once 32 MiB lies free at its top, not at 512 KiB.
// The process keeps up to that much freed memory per malloc arena for the next large call.
// Only the tools do this: a library must not set its host process's allocator policy, so
// docs/operations.md ("Large calls and glibc's allocator") gives embedders the same two lines.
// GLIBC_TUNABLES naming a malloc tunable means the user chose: nothing is changed then.

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace ringrpc::tools {

inline constexpr int large_buffer_threshold = 32 << 20;

/// Returns true if the thresholds were set; false if GLIBC_TUNABLES set malloc's own.
inline bool keep_large_buffers() noexcept {
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t != nullptr && std::strstr(t, "glibc.malloc.") != nullptr) {
    return false;
  }
  ::mallopt(M_MMAP_THRESHOLD, large_buffer_threshold);
  ::mallopt(M_TRIM_THRESHOLD, large_buffer_threshold);
  return true;
}

}  // namespace ringrpc::tools

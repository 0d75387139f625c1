#pragma once
// Start-up check that io_uring is usable here, and which optional kernel features we may use.

#include <string>

namespace ringrpc::detail {

struct uring_features {
  unsigned setup_flags = 0;  ///< IORING_SETUP_* flags every ring of ours is created with
  /// IORING_OP_FUTEX_WAKE works (Linux 6.7; ring_futex.hpp). Off where the kernel lacks it, and
  /// where RINGRPC_URING_AS_OF names an older kernel.
  bool futex_wake = false;
  int kernel_major = 0;
  int kernel_minor = 0;
};

/// RINGRPC_URING_AS_OF=MAJOR.MINOR in the environment (e.g. 6.1, Debian 12's kernel): use only
/// what io_uring offered in that kernel, taking every newer feature's fallback, so that a test
/// or a benchmark on a newer kernel runs the paths an older one takes.
///
/// Probes once per call (cheap: one throw-away ring). Throws std::system_error whose what()
/// names the cause: io_uring disabled by sysctl, blocked by seccomp, kernel too old, or a
/// required operation missing.
uring_features probe_io_uring();

/// Like probe_io_uring() but returns the explanation instead of throwing; empty when usable.
std::string io_uring_unavailable_reason();

}  // namespace ringrpc::detail

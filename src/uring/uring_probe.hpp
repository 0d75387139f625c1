#pragma once
// Start-up check that io_uring is usable here, and which optional kernel features we may use.

#include <string>

namespace ringrpc::detail {

struct uring_features {
  unsigned setup_flags = 0;  ///< IORING_SETUP_* flags every ring of ours is created with
  int kernel_major = 0;
  int kernel_minor = 0;
};

/// Probes once per call (cheap: one throw-away ring). Throws std::system_error whose what()
/// names the cause: io_uring disabled by sysctl, blocked by seccomp, kernel too old, or a
/// required operation missing.
uring_features probe_io_uring();

/// Like probe_io_uring() but returns the explanation instead of throwing; empty when usable.
std::string io_uring_unavailable_reason();

}  // namespace ringrpc::detail

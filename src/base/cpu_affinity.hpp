#pragma once

#include "base/shared_internal.hpp"

namespace ringrpc::detail {

/// CPUs this process may run on (sched_getaffinity, so `taskset` is honoured), at least 1.
/// Thread-count defaults derive from this, never from the machine's total core count.
RINGRPC_SHARED_INTERNAL unsigned usable_cpus() noexcept;

}  // namespace ringrpc::detail

#pragma once
// The process_* family every Prometheus client library exports (CPU, memory, file descriptors,
// start time), read from /proc, plus ringrpc_build_info: what a dashboard expects next to the
// server's own metrics.

#include "ops/prometheus_text.hpp"

namespace ringrpc::detail {

/// Adds process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_open_fds, process_max_fds,
/// process_start_time_seconds and ringrpc_build_info{version}. A value /proc does not give
/// (another kernel, a sandbox) is left out rather than reported as 0.
void fill_process_metrics(metrics_snapshot& m);

}  // namespace ringrpc::detail

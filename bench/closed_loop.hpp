#pragma once
// A closed-loop load driver on the ringrpc client library: every connection keeps `depth` calls
// in flight and sends the next one as soon as a reply comes. Used by ringrpc-load's ringrpc://
// mode and by scripts/demo.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "base/latency_histogram.hpp"

namespace ringrpc::tools {

struct closed_loop_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string method = "echo";
  std::size_t payload_bytes = 64;
  unsigned connections = 64;
  unsigned depth = 1;    ///< calls in flight per connection
  unsigned threads = 1;  ///< client runtimes (I/O threads); connections are spread over them
  std::chrono::milliseconds duration{10000};
  std::chrono::milliseconds warmup{1000};  ///< run first, excluded from every number
  std::chrono::microseconds call_timeout{0};
};

struct closed_loop_report {
  double seconds = 0;  ///< measured window
  std::uint64_t calls_ok = 0;
  std::map<std::string, std::uint64_t> errors;  ///< by kind ("timeout", "server_busy", ...)
  detail::latency_histogram latency_ns{1, 60'000'000'000ull, 3};
  double calls_per_sec() const { return seconds > 0 ? static_cast<double>(calls_ok) / seconds : 0; }
};

/// Runs the load and returns the merged report. Throws std::system_error when the target
/// cannot be reached.
closed_loop_report run_closed_loop(const closed_loop_config& config);

}  // namespace ringrpc::tools

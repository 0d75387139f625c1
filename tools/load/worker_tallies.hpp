#pragma once
// What one load worker counts, and the sum over the workers that the engine reports: one struct
// and one operator+=, so a new tally is declared and merged here and nowhere else. Internal to
// the engine (engine.cpp, engine_worker.cpp).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/latency_histogram.hpp"
#include "report.hpp"

namespace ringrpc::load::engine_detail {

// Calls answered, errors by name and latencies of one request kind (--mix) or one endpoint
// (a registry URL's members).
struct call_tally {
  std::uint64_t ok = 0;
  std::map<std::string, std::uint64_t> errors;
  detail::latency_histogram latency = make_latency_histogram();

  call_tally& operator+=(const call_tally& other);
};

// One second of the run.
struct second_bucket {
  std::uint64_t ok = 0;
  std::uint64_t errors = 0;
  std::map<std::string, std::uint64_t> error_kinds;  // errors by kind (--live); only on errors
  detail::latency_histogram latency{1000, 60'000'000'000ull, 3};

  second_bucket& operator+=(const second_bucket& other);
};

// A worker's tallies, written by its thread only; read (and summed with +=) once it has
// finished. Every sum is exact: counts add, histograms merge (the same layout on every thread),
// maps add by key, vectors add element by element (the longer one decides the length), and
// the last completion is the latest.
struct worker_tallies {
  std::map<std::string, std::uint64_t> errors;
  detail::latency_histogram latency = make_latency_histogram();
  detail::latency_histogram service = make_latency_histogram();
  std::vector<second_bucket> seconds;
  std::vector<call_tally> kinds;      // empty unless the run has several kinds
  std::vector<call_tally> endpoints;  // per endpoint; empty unless config.per_endpoint
  std::uint64_t calls_ok = 0;
  std::int64_t last_completion_ns = 0;
  std::vector<std::uint64_t> step_ok;  // open loop: successful calls by the step they were due in
  std::vector<detail::latency_histogram> step_latency;
  // Open loop, by measured step: calls sent (from the connections' schedule positions at the
  // end), and those sent over late_send_ns late with room on the connection or held by -P.
  std::vector<std::uint64_t> step_issued;
  std::vector<std::uint64_t> step_late_client;
  std::vector<std::uint64_t> step_late_held;
  // --arrival poisson, by measured step: the random arrivals due in it (until a stop).
  std::vector<std::uint64_t> step_scheduled;
  // Bytes on the sockets in the measured window.
  std::uint64_t bytes_sent_measured = 0;
  std::uint64_t bytes_received_measured = 0;
  detail::latency_histogram handshake = make_latency_histogram();  // TLS targets
  std::map<std::string, std::uint64_t> handshake_failures;
  // Receives whose bytes carried the kernel's stamp, and those that did not (latency_clock).
  std::uint64_t stamped_receives = 0;
  std::uint64_t unstamped_receives = 0;
  std::uint64_t connections_measured = 0;  // opened in the measured window
  std::uint64_t handshakes_measured = 0;   // TLS handshakes completed in it
  // --stream, over the whole run (a stream outlives the warm-up): streams opened, and those of
  // them that did not end with Ok after our half-close, by why (engine_streams.cpp).
  std::uint64_t streams_opened = 0;
  std::uint64_t streams_failed = 0;
  std::map<std::string, std::uint64_t> stream_failures;
  std::uint64_t stream_credit_waits = 0;  // messages that waited for the server's credit

  worker_tallies& operator+=(const worker_tallies& other);
};

}  // namespace ringrpc::load::engine_detail

#pragma once
// Load from many hosts: --shard K/N gives host K of N its share of the connections, of the
// open-loop rate and of -n, and --start-at lines the hosts' starts up.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringrpc::load {

struct shard_spec {
  unsigned index = 1;  ///< K, 1-based
  unsigned count = 1;  ///< N
};

/// "K/N" with 1 <= K <= N; throws std::invalid_argument otherwise.
shard_spec parse_shard(std::string_view text);

/// Shard K's part of `total`: total/N, plus one for the first total%N shards, so the N parts
/// sum to `total` exactly.
std::uint64_t shard_share(std::uint64_t total, shard_spec s) noexcept;

/// Shard K's part of a rate in calls/s: whole calls/s are split as shard_share does (the parts
/// sum exactly); a fractional rate is split evenly.
double shard_rate(double total, shard_spec s) noexcept;

/// --start-at: "@UNIX_SECONDS" (fractions allowed) or RFC 3339 ("2026-12-01T18:40:00Z",
/// "...T18:40:00.5+01:00"). Throws std::invalid_argument for anything else.
std::chrono::system_clock::time_point parse_start_at(std::string_view text);

/// How long to wait from `now` until `at`. A time in the past by more than `tolerance` (hosts'
/// clocks and the orchestrator's lag) or more than a day ahead is refused with a message
/// naming both times; within the tolerance it is 0.
std::chrono::nanoseconds wait_until_start(std::chrono::system_clock::time_point at,
                                          std::chrono::system_clock::time_point now,
                                          std::chrono::nanoseconds tolerance = std::chrono::seconds(1));

/// A time as RFC 3339 UTC with milliseconds, for messages.
std::string format_utc(std::chrono::system_clock::time_point t);

}  // namespace ringrpc::load

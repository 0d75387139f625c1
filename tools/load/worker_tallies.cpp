#include "worker_tallies.hpp"

#include <algorithm>
#include <type_traits>

namespace ringrpc::load::engine_detail {

namespace {

void add_counts(std::map<std::string, std::uint64_t>& into, const std::map<std::string, std::uint64_t>& from) {
  for (const auto& [name, n] : from) into[name] += n;
}

// Element by element; a thread that saw more seconds (or sized a vector the others did not)
// lengthens the sum with default elements first.
template <class T>
void add_each(std::vector<T>& into, const std::vector<T>& from) {
  if (into.size() < from.size()) into.resize(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    if constexpr (std::is_same_v<T, detail::latency_histogram>) {
      into[i].merge(from[i]);
    } else {
      into[i] += from[i];
    }
  }
}

}  // namespace

call_tally& call_tally::operator+=(const call_tally& other) {
  ok += other.ok;
  add_counts(errors, other.errors);
  latency.merge(other.latency);
  return *this;
}

second_bucket& second_bucket::operator+=(const second_bucket& other) {
  ok += other.ok;
  errors += other.errors;
  add_counts(error_kinds, other.error_kinds);
  latency.merge(other.latency);
  return *this;
}

worker_tallies& worker_tallies::operator+=(const worker_tallies& other) {
  add_counts(errors, other.errors);
  latency.merge(other.latency);
  service.merge(other.service);
  add_each(seconds, other.seconds);
  add_each(kinds, other.kinds);
  add_each(endpoints, other.endpoints);
  calls_ok += other.calls_ok;
  last_completion_ns = std::max(last_completion_ns, other.last_completion_ns);
  add_each(step_ok, other.step_ok);
  add_each(step_latency, other.step_latency);
  add_each(step_issued, other.step_issued);
  add_each(step_late_client, other.step_late_client);
  add_each(step_scheduled, other.step_scheduled);
  add_each(step_late_held, other.step_late_held);
  bytes_sent_measured += other.bytes_sent_measured;
  bytes_received_measured += other.bytes_received_measured;
  handshake.merge(other.handshake);
  add_counts(handshake_failures, other.handshake_failures);
  stamped_receives += other.stamped_receives;
  unstamped_receives += other.unstamped_receives;
  connections_measured += other.connections_measured;
  handshakes_measured += other.handshakes_measured;
  streams_opened += other.streams_opened;
  streams_failed += other.streams_failed;
  add_counts(stream_failures, other.stream_failures);
  stream_credit_waits += other.stream_credit_waits;
  return *this;
}

}  // namespace ringrpc::load::engine_detail

// A queue's counters: the snapshot stats() hands out and the rate-limited drop warning the
// monitor thread writes from them.

#include <chrono>
#include <string>

#include "events/event_queue.hpp"

namespace ringrpc::detail {

bool event_queue::report_drops(steady_time now) {
  if (_dropped.load(std::memory_order_seq_cst) <= _reported_total) return false;
  if (_last_drop_warning && now - *_last_drop_warning < _ctx.interval) return true;

  std::string kinds;
  std::uint64_t count = 0;
  for (std::size_t k = 0; k < event_kind_count; ++k) {
    const std::uint64_t total = _dropped_by_kind[k].load(std::memory_order_relaxed);
    const std::uint64_t delta = total - _reported_by_kind[k];
    _reported_by_kind[k] = total;
    if (delta == 0) continue;
    count += delta;
    if (!kinds.empty()) kinds += ", ";
    kinds += to_string(static_cast<event_kind>(k));
    kinds += ' ';
    kinds += std::to_string(delta);
  }
  if (count == 0) return false;
  _reported_total += count;

  std::string line = "event bus: queue '" + _name + "' dropped " + std::to_string(count) +
                     " events (" + kinds + ") ";
  if (_last_drop_warning) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - *_last_drop_warning).count();
    line += "in the last " + std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) +
            " s";
  } else {
    line += "since it started";
  }
  line += ", " + std::to_string(_reported_total) + " in all; capacity " +
          std::to_string(_ring.capacity()) + ": a listener is too slow or the queue too small";
  _last_drop_warning = now;
  _ctx.log(line);
  return false;
}

event_queue_stats event_queue::stats() const {
  event_queue_stats s;
  s.name = _name;
  s.capacity = _ring.capacity();
  s.delivered = _delivered.get();  // first: what was accepted can only have grown since
  const std::uint64_t accepted =
      _ring.claimed() + _lifecycle_accepted.load(std::memory_order_relaxed);
  s.dropped = _dropped.load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < event_kind_count; ++k) {
    s.dropped_by_kind[k] = _dropped_by_kind[k].load(std::memory_order_relaxed);
  }
  s.posted = accepted + s.dropped;
  s.rejected_after_stop = _rejected.load(std::memory_order_relaxed);
  s.listener_errors = _listener_errors.get();
  s.depth = accepted > s.delivered ? accepted - s.delivered : 0;
  s.processing_ns_total = _processing_ns.get();
  s.processing_ns_max = _processing_max.load(std::memory_order_relaxed);
  return s;
}

}  // namespace ringrpc::detail

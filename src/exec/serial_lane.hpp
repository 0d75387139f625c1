#pragma once
// Work that must run one item at a time, in arrival order, on whichever thread is draining it:
// a serial endpoint's inbox, an endpoint's connection-event lane, and (docs/design/streams.md)
// one stream's callbacks. Any thread may push; whoever's push finds the lane idle owns it and
// must see it drained (run it there, or hand a drain to a pool); the owner pops until empty and
// gives ownership back with release(). No lock: an MPSC queue, a count and a flag.

#include <atomic>
#include <cstdint>
#include <thread>

#include "base/mpsc_queue.hpp"
#include "exec/work_item.hpp"

namespace ringrpc::detail {

class serial_lane {
 public:
  enum class push_result : std::uint8_t {
    refused,  // the lane held `capacity` items already: nothing was pushed
    queued,   // someone else owns the lane and will run it
    owner,    // the lane was idle: the caller owns it now and must see it drained
  };

  /// Adds `item` behind those waiting, unless `capacity` are waiting already.
  push_result push(work_item* item, std::uint32_t capacity = UINT32_MAX) noexcept {
    if (_count.fetch_add(1, std::memory_order_acq_rel) >= capacity) {
      _count.fetch_sub(1, std::memory_order_acq_rel);
      return push_result::refused;
    }
    _queue.push(item);
    return _scheduled.exchange(true, std::memory_order_acq_rel) ? push_result::queued : push_result::owner;
  }

  /// Owner only: the oldest item, or null when none is waiting.
  work_item* pop() noexcept {
    // A producer counts before it links its node; between the two, the queue shows nothing
    // although the count says there is something. That window is a few instructions, unless
    // the producer was preempted: then yield rather than spin (one core may run every thread).
    for (unsigned spins = 0;; ++spins) {
      if (mpsc_node* n = _queue.pop()) {
        _count.fetch_sub(1, std::memory_order_acq_rel);
        return work_item::from_node(n);
      }
      if (_count.load(std::memory_order_acquire) == 0) return nullptr;
      if (spins > 64) std::this_thread::yield();
    }
  }

  /// Owner only, once pop() gave null: gives the lane up. True when items came in meanwhile and
  /// the caller got the lane back (drain again); false when it is idle or someone else took it.
  bool release() noexcept {
    _scheduled.store(false, std::memory_order_seq_cst);
    // A producer that pushed after our last pop but saw the flag still set relies on us.
    if (_count.load(std::memory_order_seq_cst) == 0) return false;
    return !_scheduled.exchange(true, std::memory_order_acq_rel);
  }

  /// Items waiting (racy: a hint for draining in slices).
  std::uint32_t waiting() const noexcept { return _count.load(std::memory_order_acquire); }

 private:
  mpsc_queue _queue;
  alignas(64) std::atomic<std::uint32_t> _count{0};
  alignas(64) std::atomic<bool> _scheduled{false};
};

}  // namespace ringrpc::detail

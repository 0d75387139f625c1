#pragma once
// How many replies a loop turn asks the kernel to gather before it wakes the loop.
//
// A closed loop that sleeps until the next reply is woken once per reply: the server's CPU pays a
// cross-CPU wake-up (an IPI) for it and the client a sleep and a wake. Waiting for a few replies
// at a time (io_uring's wait_nr: with DEFER_TASKRUN the kernel wakes the task only once that many
// are ready) cut a bare io_uring HTTP client's CPU per request by 13 % against nginx on a 2-core
// VM (bench/raw_http_client --wait-nr 4 vs 1: median 0.870, 12 alternating rounds), and
// ringrpc-load's by 11 % (0.888, 16 rounds), raising nginx's rate with it.
//
// What it costs is latency accuracy, bounded two ways. The batch is only as large as the replies
// that arrived in `window` at the rate of the last millisecond, so in a steady run a reply waits
// for the others about window / 2 on average. And a wait is cut off after `bound_ns`: that
// covers a server that stalls with fewer replies sent than the batch awaits; such a turn also
// drops the batch to one until the rate is measured again. The cut-off is milliseconds, not
// microseconds, because it is a timer armed on every wait: one due before the next scheduler tick
// reprograms the CPU's timer twice per wait (a VM exit each on a guest), and with a 64 µs
// cut-off batching cost more than it saved (1.086x the CPU per call of no batching).
#include <algorithm>
#include <cstdint>

namespace ringrpc::load {

class wake_batch {
 public:
  static constexpr std::int64_t measure_ns = 1'000'000;  ///< the rate is re-estimated this often
  static constexpr std::int64_t default_window_ns = 32'000;

  /// `calls` is how many calls the loop keeps in flight; a batch is at most an eighth of them, so
  /// that a few slow calls cannot hold the rest. `max` 1 turns batching off.
  wake_batch(unsigned calls, unsigned max, std::int64_t window_ns = default_window_ns) noexcept
      : _calls(calls), _max(max), _cap(cap_for(calls, max)), _window(window_ns) {}

  /// `calls` fewer are kept in flight from now on (a connection ramped down): the batch shrinks
  /// with them, or a turn would wait for more replies than can come and sit out bound_ns each
  /// time. Called off the per-call path, once per connection that stops.
  void drop_calls(unsigned calls) noexcept {
    _calls -= std::min(calls, _calls);
    _cap = cap_for(_calls, _max);
    _target = std::min(_target, _cap);
  }

  /// Replies completed this turn, and the time after them.
  void completed(unsigned replies, std::int64_t now) noexcept {
    _replies += replies;
    if (_since == 0) _since = now;
    const std::int64_t elapsed = now - _since;
    if (elapsed < measure_ns) return;
    const auto expected = static_cast<std::uint64_t>(_replies) * static_cast<std::uint64_t>(_window) /
                          static_cast<std::uint64_t>(elapsed);
    _target = static_cast<unsigned>(std::clamp<std::uint64_t>(expected, 1, _cap));
    _replies = 0;
    _since = now;
  }

  /// Replies to wait for before waking (1: wake on each, as without batching).
  unsigned target() const noexcept { return _target; }

  /// A turn that waited for a batch was cut off: the replies stopped coming at the rate the
  /// batch was sized for, so wake on each until the rate has been measured again.
  void timed_out(std::int64_t now) noexcept {
    _target = 1;
    _replies = 0;
    _since = now;
  }

  /// The longest a turn waits for a batch (see the top of this file).
  static constexpr std::int64_t bound_ns = 5'000'000;

  /// What one loop turn asks io_uring_enter for: wake once `wait_nr` completions are ready or at
  /// `deadline`, whichever comes first.
  struct wait {
    unsigned wait_nr = 1;
    std::int64_t deadline = 0;
    bool batched = false;  ///< waiting for more than one reply: a cut-off turn calls timed_out()
  };

  /// The wait of a turn at `now` whose loop must be back by `next_wake` anyway, with `sends`
  /// submitted in the same call (they complete first, each posting a completion), on a ring
  /// whose CQ holds `cq_entries`. Once no more calls are issued (`issuing` false) the last
  /// replies come one by one, so each wakes the loop. A batched wait never ends later than
  /// bound_ns from now: a reply that arrives alone waits at most that long, in this turn only
  /// (the kernel ends a timed-out wait with whatever completions are ready).
  wait plan(std::int64_t now, std::int64_t next_wake, unsigned sends, unsigned cq_entries,
            bool issuing) const noexcept {
    if (_target <= 1 || !issuing) return {1, next_wake, false};
    // Never more than half the CQ: thousands of sends in one turn just batch less.
    return {std::min(sends + _target, std::max(1u, cq_entries / 2)), std::min(next_wake, now + bound_ns), true};
  }

 private:
  static unsigned cap_for(unsigned calls, unsigned max) noexcept {
    return std::max(1u, std::min(max, calls / 8));
  }

  unsigned _calls;
  unsigned _max;
  unsigned _cap;
  std::int64_t _window;
  unsigned _target = 1;
  std::uint64_t _replies = 0;
  std::int64_t _since = 0;
};

}  // namespace ringrpc::load

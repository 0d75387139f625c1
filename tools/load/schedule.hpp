#pragma once
// When each call of an open-loop run is due. Pure arithmetic on an injected clock, so it is
// tested without waiting.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringrpc::load {

/// One phase of the open loop: `rate` calls per second (all connections together) for
/// `duration_ns`, constant, or a linear ramp from `rate` to `rate_to` when `rate_to` >= 0.
struct rate_step {
  double rate = 0;
  std::int64_t duration_ns = 0;
  double rate_to = -1;  // a ramp's end rate; negative: a constant step

  bool ramp() const noexcept { return rate_to >= 0; }
  /// The step's calls over its duration, per second: a ramp's is the average of its ends.
  double mean_rate() const noexcept { return ramp() ? (rate + rate_to) / 2 : rate; }
};

/// Poisson arrivals of one connection (--arrival poisson): its state, advanced by
/// rate_schedule::next_arrival. Gaps are exponential with the schedule's rate (shared by the
/// connections) in force, drawn from xoshiro256+ seeded per connection: no allocation, no lock.
struct poisson_arrivals {
  std::uint64_t rng[4] = {};
  double position = 0;     // where the arrival is in the schedule, in calls of all connections
  double spacing = 1;      // a connection's mean gap in those calls: the number of connections
  std::size_t step = 0;    // step holding `position` (positions only grow)
  std::int64_t due = -1;   // the arrival's send time; -1 once past the schedule

  /// Seeds the generator from `seed` and `connection` (splitmix64), for `connections` in all.
  void seed(std::uint64_t seed, unsigned connection, unsigned connections) noexcept;
  /// An exponential variate of mean 1: -log(u), u uniform in (0, 1].
  double unit_gap() noexcept;
};

/// The intended send times of an open-loop run, spread evenly over `connections` so that the
/// total is the requested rate (wrk2's constant-throughput model). Thread-compatible: each
/// engine thread owns the connections it asks about.
class rate_schedule {
 public:
  /// `steps` run back to back from `start_ns`; throws std::invalid_argument on a non-positive
  /// rate or duration (a ramp may start or end at 0, not both), or no steps.
  rate_schedule(std::vector<rate_step> steps, unsigned connections, std::int64_t start_ns);

  /// Intended send time of call number `n` (0-based) of connection `c`, or -1 once the
  /// schedule is over for that connection.
  std::int64_t due_ns(unsigned c, std::uint64_t n) const noexcept;

  /// Index of the step in force at `t_ns` (steps.size() after the end).
  std::size_t step_at(std::int64_t t_ns) const noexcept;
  /// Calls of connection `c` in step `step` (0 past the end): the measure of what it issued.
  std::uint64_t calls_in_step(unsigned c, std::size_t step) const noexcept;
  /// Calls of all connections together due in step `step` before `until_ns` (all of the
  /// step's calls when `until_ns` is at or past its end): what an interrupted step scheduled.
  std::uint64_t due_before(std::size_t step, std::int64_t until_ns) const noexcept;
  /// Start of step `step` (end_ns() past the last).
  std::int64_t step_start_ns(std::size_t step) const noexcept;
  std::int64_t end_ns() const noexcept;
  const std::vector<rate_step>& steps() const noexcept;

  /// Poisson arrivals: seeds `a` for connection `c` and draws its first arrival.
  void first_arrival(poisson_arrivals& a, std::uint64_t seed, unsigned c) const noexcept;
  /// Draws the arrival after `a.due`: an exponential gap of mean `connections` calls of the
  /// schedule, mapped to time through its rates (so steps and ramps shape Poisson arrivals too).
  void next_arrival(poisson_arrivals& a) const noexcept;

 private:
  // Each step's rate is held as an integer number of micro-calls per second so that due times
  // are exact integer arithmetic (no accumulated floating-point error over long runs).
  struct step_plan {
    std::int64_t start_ns = 0;
    std::int64_t duration_ns = 0;
    std::uint64_t rate_ucps = 0;  // calls per 10^6 s
    std::uint64_t slots = 0;      // calls of all connections together in this step
    // A ramp (rate_ucps 0): the rate at its start in calls/ns and its slope in calls/ns^2;
    // due times in double (53 bits of ns: exact enough for over 100 days).
    double ramp_from = 0, ramp_slope = 0;
    double calls_before = 0;  // expected calls of all connections in the steps before it
    double calls = 0;         // ... in it
  };

  std::vector<rate_step> _steps;
  std::vector<step_plan> _plan;
  unsigned _connections;
  std::int64_t _start_ns;
  std::int64_t _end_ns;
};

}  // namespace ringrpc::load

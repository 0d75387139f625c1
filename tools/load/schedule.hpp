#pragma once
// When each call of an open-loop run is due. Pure arithmetic on an injected clock, so it is
// tested without waiting.

#include <cstdint>
#include <vector>

namespace ringrpc::load {

/// One phase of constant rate: `rate` calls per second (all connections together) for
/// `duration_ns`.
struct rate_step {
  double rate = 0;
  std::int64_t duration_ns = 0;
};

/// The intended send times of an open-loop run, spread evenly over `connections` so that the
/// total is the requested rate (wrk2's constant-throughput model). Thread-compatible: each
/// engine thread owns the connections it asks about.
class rate_schedule {
 public:
  /// `steps` run back to back from `start_ns`; throws std::invalid_argument on a non-positive
  /// rate or duration, or no steps.
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

 private:
  // Each step's rate is held as an integer number of micro-calls per second so that due times
  // are exact integer arithmetic (no accumulated floating-point error over long runs).
  struct step_plan {
    std::int64_t start_ns = 0;
    std::int64_t duration_ns = 0;
    std::uint64_t rate_ucps = 0;  // calls per 10^6 s
    std::uint64_t slots = 0;      // calls of all connections together in this step
  };

  std::vector<rate_step> _steps;
  std::vector<step_plan> _plan;
  unsigned _connections;
  std::int64_t _start_ns;
  std::int64_t _end_ns;
};

}  // namespace ringrpc::load

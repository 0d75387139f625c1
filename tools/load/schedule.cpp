#include "schedule.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace ringrpc::load {

namespace {

// 128-bit intermediates: slot * 10^15 overflows 64 bits after ~2.5 hours at 1M calls/s.
__extension__ using u128 = unsigned __int128;

// A rate in calls/s times this is the step's integer rate (calls per 10^6 s); a slot's offset
// in ns is then slot * 10^9 * 10^6 / rate_ucps.
constexpr double ucps_per_cps = 1e6;
constexpr u128 ns_times_ucps_scale = u128{1'000'000'000} * 1'000'000;

// Offset from the step start of aggregate slot `j` (all connections interleaved).
std::int64_t slot_offset_ns(std::uint64_t j, std::uint64_t rate_ucps) noexcept {
  return static_cast<std::int64_t>(u128{j} * ns_times_ucps_scale / rate_ucps);
}

}  // namespace

rate_schedule::rate_schedule(std::vector<rate_step> steps, unsigned connections,
                             std::int64_t start_ns)
    : _steps(std::move(steps)), _connections(connections), _start_ns(start_ns), _end_ns(start_ns) {
  if (_steps.empty()) throw std::invalid_argument("rate schedule: no steps");
  if (_connections == 0) throw std::invalid_argument("rate schedule: connections must be >= 1");
  _plan.reserve(_steps.size());
  for (std::size_t i = 0; i < _steps.size(); ++i) {
    const rate_step& s = _steps[i];
    const std::string where = "rate schedule step " + std::to_string(i + 1) + ": ";
    if (!(s.rate > 0) || !std::isfinite(s.rate)) {
      throw std::invalid_argument(where + "rate must be a positive number of calls/s");
    }
    if (s.duration_ns <= 0) throw std::invalid_argument(where + "duration must be positive");
    const double ucps = std::round(s.rate * ucps_per_cps);
    // 2^63 as a double is exact; anything at or above it does not fit.
    if (ucps >= 9.223372036854775807e18) throw std::invalid_argument(where + "rate is too high");
    if (ucps < 1) throw std::invalid_argument(where + "rate is too low (below 1e-6 calls/s)");
    if (_end_ns > std::numeric_limits<std::int64_t>::max() - s.duration_ns) {
      throw std::invalid_argument(where + "schedule ends too far in the future");
    }

    step_plan p;
    p.start_ns = _end_ns;
    p.duration_ns = s.duration_ns;
    p.rate_ucps = static_cast<std::uint64_t>(ucps);
    // Slots j with floor(j * scale / rate) < duration, i.e. j * scale < duration * rate:
    // ceil(duration * rate / scale) of them (at least slot 0, due at the step start).
    const u128 span = u128{static_cast<std::uint64_t>(s.duration_ns)} * p.rate_ucps;
    const u128 slots = (span + ns_times_ucps_scale - 1) / ns_times_ucps_scale;
    p.slots = static_cast<std::uint64_t>(slots);  // <= duration_ns, so it fits
    _plan.push_back(p);
    _end_ns += s.duration_ns;
  }
}

std::int64_t rate_schedule::due_ns(unsigned c, std::uint64_t n) const noexcept {
  if (c >= _connections) return -1;
  const std::uint64_t conns = _connections;
  for (const step_plan& p : _plan) {
    // Connection c owns slots c, c + conns, c + 2 * conns, ... of every step: each step restarts
    // the interleaving, so its phase offset is c / step rate.
    const std::uint64_t mine = p.slots > c ? (p.slots - c - 1) / conns + 1 : 0;
    if (n < mine) return p.start_ns + slot_offset_ns(n * conns + c, p.rate_ucps);
    n -= mine;
  }
  return -1;
}

std::size_t rate_schedule::step_at(std::int64_t t_ns) const noexcept {
  if (t_ns >= _end_ns) return _plan.size();
  for (std::size_t i = 1; i < _plan.size(); ++i) {
    if (t_ns < _plan[i].start_ns) return i - 1;
  }
  return _plan.size() - 1;
}

std::uint64_t rate_schedule::calls_in_step(unsigned c, std::size_t step) const noexcept {
  if (c >= _connections || step >= _plan.size()) return 0;
  const step_plan& p = _plan[step];
  return p.slots > c ? (p.slots - c - 1) / _connections + 1 : 0;
}

std::uint64_t rate_schedule::due_before(std::size_t step, std::int64_t until_ns) const noexcept {
  if (step >= _plan.size()) return 0;
  const step_plan& p = _plan[step];
  if (until_ns <= p.start_ns) return 0;
  if (until_ns - p.start_ns >= p.duration_ns) return p.slots;
  // As for the step's slots: those with j * scale < span * rate.
  const u128 span = u128{static_cast<std::uint64_t>(until_ns - p.start_ns)} * p.rate_ucps;
  return static_cast<std::uint64_t>((span + ns_times_ucps_scale - 1) / ns_times_ucps_scale);
}

std::int64_t rate_schedule::step_start_ns(std::size_t step) const noexcept {
  return step < _plan.size() ? _plan[step].start_ns : _end_ns;
}

std::int64_t rate_schedule::end_ns() const noexcept { return _end_ns; }

const std::vector<rate_step>& rate_schedule::steps() const noexcept { return _steps; }

}  // namespace ringrpc::load

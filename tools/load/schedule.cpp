#include "schedule.hpp"

#include <algorithm>
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

// Offset from a ramp's start of its slot `j`: when the calls due so far, from*t + slope*t^2/2,
// reach j; the root written so that a flat ramp (slope 0) and one from 0 need no special case.
std::int64_t ramp_offset_ns(std::uint64_t j, double from, double slope, std::int64_t duration_ns) noexcept {
  if (j == 0) return 0;
  const double x = static_cast<double>(j);
  const double t = 2 * x / (from + std::sqrt(std::max(0.0, from * from + 2 * slope * x)));
  // Slot j < calls due by the end, so t < duration; rounding must not push it past the end.
  return std::min(static_cast<std::int64_t>(t), duration_ns - 1);
}

// Calls of all connections together due in the first `t_ns` of a ramp: the slots j < due(t).
std::uint64_t ramp_due_before(std::int64_t t_ns, double from, double slope) noexcept {
  const double t = static_cast<double>(t_ns);
  const double calls = from * t + slope * t * t / 2;
  // A whole number of calls (0:10k:30s makes 150000) must not become one more by rounding.
  const double whole = std::round(calls);
  if (std::abs(calls - whole) <= 1e-9 * std::max(1.0, calls)) return static_cast<std::uint64_t>(whole);
  return static_cast<std::uint64_t>(std::ceil(calls));
}

void check_ramp(const rate_step& s, const std::string& where) {
  const bool ok = std::isfinite(s.rate) && std::isfinite(s.rate_to) && s.rate >= 0 && s.rate_to >= 0;
  // Both 0 is a pause (no calls): a warm-up in front of a ramp from 0 is one.
  if (!ok) throw std::invalid_argument(where + "a ramp's rates must be numbers >= 0 calls/s");
  if (s.duration_ns <= 0) throw std::invalid_argument(where + "duration must be positive");
  if (std::max(s.rate, s.rate_to) >= 1e12) throw std::invalid_argument(where + "rate is too high");
}

}  // namespace

rate_schedule::rate_schedule(std::vector<rate_step> steps, unsigned connections,
                             std::int64_t start_ns)
    : _steps(std::move(steps)), _connections(connections), _start_ns(start_ns), _end_ns(start_ns) {
  if (_steps.empty()) throw std::invalid_argument("rate schedule: no steps");
  if (_connections == 0) throw std::invalid_argument("rate schedule: connections must be >= 1");
  _plan.reserve(_steps.size());
  double calls_before = 0;
  for (std::size_t i = 0; i < _steps.size(); ++i) {
    const rate_step& s = _steps[i];
    const double calls = s.mean_rate() * static_cast<double>(s.duration_ns) / 1e9;
    const std::string where = "rate schedule step " + std::to_string(i + 1) + ": ";
    if (s.ramp()) {
      check_ramp(s, where);
      if (_end_ns > std::numeric_limits<std::int64_t>::max() - s.duration_ns) {
        throw std::invalid_argument(where + "schedule ends too far in the future");
      }
      step_plan p;
      p.start_ns = _end_ns;
      p.duration_ns = s.duration_ns;
      p.ramp_from = s.rate / 1e9;
      p.ramp_slope = (s.rate_to - s.rate) / 1e9 / static_cast<double>(s.duration_ns);
      p.slots = ramp_due_before(s.duration_ns, p.ramp_from, p.ramp_slope);
      p.calls_before = calls_before;
      p.calls = calls;
      calls_before += calls;
      _plan.push_back(p);
      _end_ns += s.duration_ns;
      continue;
    }
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
    p.calls_before = calls_before;
    p.calls = calls;
    calls_before += calls;
    _plan.push_back(p);
    _end_ns += s.duration_ns;
  }
}

void poisson_arrivals::seed(std::uint64_t seed, unsigned connection, unsigned connections) noexcept {
  // Connection c's four words are outputs 4c+1..4c+4 of one splitmix64 sequence from the seed:
  // disjoint windows, so no two connections of a run share a state word.
  std::uint64_t x = seed + 0x9E3779B97F4A7C15ull * 4 * std::uint64_t{connection};
  for (std::uint64_t& word : rng) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    word = z ^ (z >> 31);
  }
  spacing = connections;
}

double poisson_arrivals::unit_gap() noexcept {
  // xoshiro256+: its top 53 bits make a uniform double in [0, 1); 1 - that is in (0, 1].
  const std::uint64_t result = rng[0] + rng[3];
  const std::uint64_t t = rng[1] << 17;
  rng[2] ^= rng[0];
  rng[3] ^= rng[1];
  rng[1] ^= rng[2];
  rng[0] ^= rng[3];
  rng[2] ^= t;
  rng[3] = (rng[3] << 45) | (rng[3] >> 19);
  const double u = 1.0 - static_cast<double>(result >> 11) * 0x1.0p-53;
  return -std::log(u);
}

void rate_schedule::first_arrival(poisson_arrivals& a, std::uint64_t seed, unsigned c) const noexcept {
  a.seed(seed, c, _connections);
  a.position = 0;
  a.step = 0;
  next_arrival(a);
}

void rate_schedule::next_arrival(poisson_arrivals& a) const noexcept {
  a.position += a.unit_gap() * a.spacing;
  while (a.step < _plan.size() && a.position >= _plan[a.step].calls_before + _plan[a.step].calls) ++a.step;
  if (a.step >= _plan.size()) {
    a.due = -1;
    return;
  }
  const step_plan& p = _plan[a.step];
  const double x = a.position - p.calls_before;  // calls into the step
  double t = 0;
  if (x <= 0) {
    t = 0;  // at the step's start (a zero gap: a ramp from 0 would divide 0 by 0)
  } else if (p.rate_ucps != 0) {
    t = x * 1e15 / static_cast<double>(p.rate_ucps);
  } else {
    t = 2 * x / (p.ramp_from + std::sqrt(std::max(0.0, p.ramp_from * p.ramp_from + 2 * p.ramp_slope * x)));
  }
  a.due = p.start_ns + std::min(static_cast<std::int64_t>(t), p.duration_ns - 1);
}

std::int64_t rate_schedule::due_ns(unsigned c, std::uint64_t n) const noexcept {
  if (c >= _connections) return -1;
  const std::uint64_t conns = _connections;
  for (const step_plan& p : _plan) {
    // Connection c owns slots c, c + conns, c + 2 * conns, ... of every step: each step restarts
    // the interleaving, so its phase offset is c / step rate.
    const std::uint64_t mine = p.slots > c ? (p.slots - c - 1) / conns + 1 : 0;
    if (n < mine) {
      const std::uint64_t j = n * conns + c;
      return p.start_ns + (p.rate_ucps != 0 ? slot_offset_ns(j, p.rate_ucps)
                                            : ramp_offset_ns(j, p.ramp_from, p.ramp_slope, p.duration_ns));
    }
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
  if (p.rate_ucps == 0) {
    // The integral gives the count within rounding; the due times themselves settle it.
    const std::int64_t u = until_ns - p.start_ns;
    std::uint64_t n = std::min(p.slots, ramp_due_before(u, p.ramp_from, p.ramp_slope));
    while (n > 0 && ramp_offset_ns(n - 1, p.ramp_from, p.ramp_slope, p.duration_ns) >= u) --n;
    while (n < p.slots && ramp_offset_ns(n, p.ramp_from, p.ramp_slope, p.duration_ns) < u) ++n;
    return n;
  }
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

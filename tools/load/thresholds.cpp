#include "thresholds.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "units.hpp"
#include "trim.hpp"

namespace ringrpc::load {

namespace {

// Built with append: GCC 12 -O3 warns falsely (-Wrestrict) on "literal" + std::string.
std::string in_quotes(std::string_view text, std::string_view tail = {}) {
  std::string out(1, '\'');
  out.append(text).append(1, '\'').append(tail);
  return out;
}

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw std::invalid_argument(std::string("bad --fail-if ").append(in_quotes(text, ": ")).append(why));
}

double number(std::string_view whole, std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) || v < 0) {
    bad(whole, in_quotes(text, " is not a non-negative number"));
  }
  return v;
}

bool holds(threshold::comparison op, double observed, double limit) {
  switch (op) {
    case threshold::comparison::greater: return observed > limit;
    case threshold::comparison::greater_equal: return observed >= limit;
    case threshold::comparison::less: return observed < limit;
    case threshold::comparison::less_equal: return observed <= limit;
  }
  return false;
}

std::string shown(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", v >= 100 || v == std::floor(v) ? 0 : 2, v, unit);
  return buf;
}

}  // namespace

threshold parse_threshold(std::string_view text) {
  threshold t;
  t.expression = std::string(trim_space(text));
  const std::string_view e = t.expression;
  const auto at = e.find_first_of("<>");
  if (at == std::string_view::npos) bad(text, "expected METRIC>VALUE or METRIC<VALUE, e.g. p99>2ms");
  const std::string_view name = trim_space(e.substr(0, at));
  const bool equal = at + 1 < e.size() && e[at + 1] == '=';
  t.op = e[at] == '>' ? (equal ? threshold::comparison::greater_equal : threshold::comparison::greater)
                      : (equal ? threshold::comparison::less_equal : threshold::comparison::less);
  std::string_view value = trim_space(e.substr(at + (equal ? 2 : 1)));
  if (value.empty()) bad(text, "no value after the comparison");
  t.relative = value.back() == '%';
  if (t.relative) value = trim_space(value.substr(0, value.size() - 1));

  if (name == "errors") {
    t.what = threshold::metric::errors;
    t.limit = number(text, value);
  } else if (name == "rate") {
    t.what = threshold::metric::rate;
    try {
      t.limit = t.relative ? number(text, value) : parse_rate(value);
    } catch (const std::invalid_argument&) {
      bad(text, in_quotes(value, " is not a rate (500, 20k, 1.5M) or a share (90%)"));
    }
  } else if (name == "mean" || name == "max" || (name.size() > 1 && name[0] == 'p')) {
    if (t.relative) bad(text, "a latency limit takes a time unit (us, ms, s), not %");
    if (name == "mean") {
      t.what = threshold::metric::mean;
    } else if (name == "max") {
      t.what = threshold::metric::max;
    } else {
      t.what = threshold::metric::percentile;
      t.percentile = number(text, name.substr(1));
      if (!(t.percentile > 0 && t.percentile <= 100)) bad(text, "the percentile must be in (0, 100]");
    }
    // A bare number would be seconds to parse_duration: too easy to misread as microseconds.
    if (value.empty() || !std::isalpha(static_cast<unsigned char>(value.back()))) {
      bad(text, "give the latency with a unit: us, ms or s");
    }
    try {
      // Durations elsewhere stop at us; a limit may be finer, for a test that must fail.
      t.limit = value.ends_with("ns") ? number(text, value.substr(0, value.size() - 2)) / 1000.0
                                      : static_cast<double>(parse_duration(value).count()) / 1000.0;
    } catch (const std::invalid_argument& err) {
      bad(text, err.what());
    }
  } else {
    bad(text, std::string("unknown metric ").append(in_quotes(name, " (p50, p99, p99.9, mean, max, errors, rate)")));
  }
  return t;
}

std::vector<threshold> parse_thresholds(std::string_view text) {
  std::vector<threshold> out;
  const std::string_view whole = text;
  for (;;) {
    const auto comma = text.find(',');
    const std::string_view one = text.substr(0, comma);
    if (trim_space(one).empty()) bad(whole, "an empty condition (two commas, or one at an end)");
    out.push_back(parse_threshold(one));
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

void check_threshold_applies(const threshold& t, bool open_loop) {
  if (t.what == threshold::metric::rate && t.relative && !open_loop) {
    throw std::invalid_argument(std::string("--fail-if ").append(in_quotes(t.expression)) +
                                ": a rate in % is a share of the requested open-loop rate, and a closed loop "
                                "requests none; give -R, or an absolute rate such as 'rate<50k'");
  }
}

threshold_verdict evaluate_threshold(const threshold& t, const run_result& r) {
  threshold_verdict v;
  v.expression = t.expression;
  v.limit_value = t.limit;
  const std::uint64_t errors = r.error_total();
  switch (t.what) {
    case threshold::metric::percentile:
    case threshold::metric::mean:
    case threshold::metric::max: {
      v.unit = "us";
      const auto& h = r.latency_ns;
      const double ns = t.what == threshold::metric::mean ? h.mean()
                        : t.what == threshold::metric::max ? static_cast<double>(h.max())
                                                           : static_cast<double>(h.value_at_percentile(t.percentile));
      v.observed_value = ns / 1000.0;
      v.observed = shown(v.observed_value, "us");
      if (r.calls_ok == 0) {
        v.failed = true;
        v.note = "no successful calls to measure";
        return v;
      }
      break;
    }
    case threshold::metric::errors: {
      const double total = static_cast<double>(r.calls_ok + errors);
      if (t.relative) {
        v.unit.assign(1, '%');
        v.observed_value = total > 0 ? 100.0 * static_cast<double>(errors) / total : 0.0;
      } else {
        v.unit = "calls";
        v.observed_value = static_cast<double>(errors);
      }
      v.observed = shown(v.observed_value, v.unit.c_str());
      break;
    }
    case threshold::metric::rate: {
      // Open loop: the calls due in the schedule that were answered, per scheduled second (never
      // above 100 % from a backlog answered late); closed loop: calls/s.
      const double rate = r.open_loop ? r.answered_rate : r.calls_per_sec();
      if (t.relative) {
        v.unit.assign(1, '%');
        v.observed_value = r.requested_rate > 0 ? 100.0 * rate / r.requested_rate : 0.0;
      } else {
        v.unit = "calls/s";
        v.observed_value = rate;
      }
      v.observed = shown(v.observed_value, v.unit.c_str());
      break;
    }
  }
  v.failed = holds(t.op, v.observed_value, t.limit);
  return v;
}

}  // namespace ringrpc::load

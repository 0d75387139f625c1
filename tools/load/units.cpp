#include "units.hpp"
#include "trim.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

namespace ringrpc::load {

namespace {

struct number_and_suffix {
  double value = 0;
  std::string_view suffix;
};

// A non-negative finite decimal number followed by an optional unit suffix. from_chars rejects
// leading '+', whitespace and hex, which is what we want on a command line.
std::optional<number_and_suffix> split_number(std::string_view text) {
  double v = 0;
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, v, std::chars_format::general);
  if (ec != std::errc{} || end == first || !std::isfinite(v) || v < 0) return std::nullopt;
  return number_and_suffix{v, text.substr(static_cast<std::size_t>(end - first))};
}

// Splits "a,b,c"; empty items are kept so the caller can reject them by name.
std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> items;
  for (;;) {
    const std::size_t comma = text.find(',');
    items.push_back(trim_blanks(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

[[noreturn]] void fail(const char* what, std::string_view text, const char* hint) {
  throw std::invalid_argument(std::string("bad ") + what + " '" + std::string(text) + "': " + hint);
}

}  // namespace

std::chrono::nanoseconds parse_duration(std::string_view text) {
  constexpr const char* hint = "use a number with us, ms, s, m or h";
  const auto n = split_number(text);
  if (!n) fail("duration", text, hint);
  double unit_ns = 0;
  if (n->suffix.empty() || n->suffix == "s") unit_ns = 1e9;
  else if (n->suffix == "us") unit_ns = 1e3;
  else if (n->suffix == "ms") unit_ns = 1e6;
  else if (n->suffix == "m") unit_ns = 60e9;
  else if (n->suffix == "h") unit_ns = 3600e9;
  else fail("duration", text, hint);
  const double ns = std::round(n->value * unit_ns);
  // 2^63 ns is ~292 years; past it the conversion below would be undefined.
  if (ns >= 9.223372036854775807e18) fail("duration", text, "too long");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

std::uint64_t parse_size(std::string_view text) {
  constexpr const char* hint = "use a whole number of bytes, optionally with k, m or g (1024-based)";
  const auto n = split_number(text);
  if (!n) fail("size", text, hint);
  double mult = 0;
  if (n->suffix.empty()) mult = 1;
  else if (n->suffix == "k" || n->suffix == "K") mult = 1024.0;
  else if (n->suffix == "m" || n->suffix == "M") mult = 1024.0 * 1024;
  else if (n->suffix == "g" || n->suffix == "G") mult = 1024.0 * 1024 * 1024;
  else fail("size", text, hint);
  const double bytes = n->value * mult;
  if (bytes != std::floor(bytes)) fail("size", text, "not a whole number of bytes");
  if (bytes >= 1.8446744073709551615e19) fail("size", text, "too large");
  return static_cast<std::uint64_t>(bytes);
}

double parse_rate(std::string_view text) {
  constexpr const char* hint = "use a positive number of calls/s, optionally with k or M (1000-based)";
  const auto n = split_number(text);
  if (!n) fail("rate", text, hint);
  std::string_view suffix = n->suffix;
  // "10k/s" reads naturally too.
  if (suffix.ends_with("/s")) suffix.remove_suffix(2);
  double mult = 0;
  if (suffix.empty()) mult = 1;
  else if (suffix == "k" || suffix == "K") mult = 1e3;
  // Lower-case m cannot mean milli for a call rate, so it is mega like M.
  else if (suffix == "m" || suffix == "M") mult = 1e6;
  else if (suffix == "g" || suffix == "G") mult = 1e9;
  else fail("rate", text, hint);
  const double rate = n->value * mult;
  if (!(rate > 0)) fail("rate", text, hint);
  return rate;
}

std::vector<double> parse_percentiles(std::string_view text) {
  std::vector<double> out;
  for (const std::string_view item : split_list(text)) {
    if (item.empty()) {
      fail("percentile list", text, "empty item; use e.g. 50,99,99.9");
    }
    // "p99" is how the summary and JSON name them, so accept it back.
    const std::string_view digits = item.front() == 'p' ? item.substr(1) : item;
    const auto n = split_number(digits);
    if (!n || !n->suffix.empty() || !(n->value > 0) || n->value > 100) {
      throw std::invalid_argument("bad percentile '" + std::string(item) + "' in '" +
                                  std::string(text) + "': each must be a number in (0, 100]");
    }
    out.push_back(n->value);
  }
  // The summary and JSON list them in increasing order, each once.
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<double> parse_rate_list(std::string_view text) {
  std::vector<double> out;
  for (const std::string_view item : split_list(text)) {
    if (item.empty()) fail("rate list", text, "empty item; use e.g. 10k,20k,40k");
    out.push_back(parse_rate(item));
  }
  return out;
}

namespace {

// A ramp end: a rate as parse_rate reads it, or 0 (a ramp from or to nothing).
double ramp_rate(std::string_view text, std::string_view segment) {
  const auto n = split_number(text);
  if (n && n->value == 0 && (n->suffix.empty() || n->suffix == "/s")) return 0;
  try {
    return parse_rate(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("bad --rate-ramp segment '" + std::string(segment) + "': " + e.what());
  }
}

}  // namespace

std::vector<rate_ramp_segment> parse_rate_ramps(std::string_view text) {
  std::vector<rate_ramp_segment> out;
  for (const std::string_view item : split_list(text)) {
    const std::string shown(item);
    const std::size_t a = item.find(':');
    const std::size_t b = a == std::string_view::npos ? a : item.find(':', a + 1);
    if (b == std::string_view::npos || item.find(':', b + 1) != std::string_view::npos) {
      throw std::invalid_argument("bad --rate-ramp segment '" + shown + "' in '" + std::string(text) +
                                  "': use FROM:TO:DURATION, e.g. 0:10k:30s (comma-separated for several)");
    }
    rate_ramp_segment seg;
    seg.from = ramp_rate(trim_blanks(item.substr(0, a)), item);
    seg.to = ramp_rate(trim_blanks(item.substr(a + 1, b - a - 1)), item);
    try {
      seg.duration = parse_duration(trim_blanks(item.substr(b + 1)));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("bad --rate-ramp segment '" + shown + "': " + e.what());
    }
    if (seg.duration.count() <= 0) {
      throw std::invalid_argument("bad --rate-ramp segment '" + shown + "': the duration must be positive");
    }
    if (seg.from == 0 && seg.to == 0) {
      throw std::invalid_argument("bad --rate-ramp segment '" + shown + "': FROM and TO cannot both be 0");
    }
    out.push_back(seg);
  }
  return out;
}

}  // namespace ringrpc::load

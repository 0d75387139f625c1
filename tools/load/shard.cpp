#include "shard.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace ringrpc::load {

namespace {

bool read_uint(std::string_view& s, std::size_t digits, unsigned& out) {
  if (s.size() < digits) return false;
  out = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  s.remove_prefix(digits);
  return true;
}

bool take(std::string_view& s, char c) {
  if (s.empty() || (s.front() != c && !(c == 'T' && (s.front() == 't' || s.front() == ' ')))) return false;
  s.remove_prefix(1);
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

[[noreturn]] void bad_time(std::string_view text) {
  throw std::invalid_argument("--start-at '" + std::string(text) +
                              "': expected @UNIX_SECONDS or an RFC 3339 time such as 2026-12-01T18:40:00Z");
}

}  // namespace

shard_spec parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  shard_spec s;
  auto number = [&](std::string_view part, unsigned& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc{} && end == part.data() + part.size();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) ||
      !number(text.substr(slash + 1), s.count) || s.count == 0 || s.index == 0 || s.index > s.count) {
    throw std::invalid_argument("--shard '" + std::string(text) + "': expected K/N with 1 <= K <= N, e.g. 2/3");
  }
  return s;
}

std::uint64_t shard_share(std::uint64_t total, shard_spec s) noexcept {
  return total / s.count + (s.index - 1 < total % s.count ? 1 : 0);
}

double shard_rate(double total, shard_spec s) noexcept {
  if (total >= 0 && total < 1e15 && std::floor(total) == total) {
    return static_cast<double>(shard_share(static_cast<std::uint64_t>(total), s));
  }
  return total / s.count;
}

std::chrono::system_clock::time_point parse_start_at(std::string_view text) {
  using namespace std::chrono;
  std::string_view s = text;
  if (take(s, '@')) {
    // Whole seconds and the fraction apart: a double would round @X.25 to X.249999872.
    std::int64_t secs = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), secs);
    if (s.empty() || ec != std::errc{} || secs < 0 || secs > 100'000'000'000) bad_time(text);
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    std::int64_t nanos = 0;
    if (take(s, '.')) {
      std::int64_t scale = 100'000'000;
      if (s.empty()) bad_time(text);
      for (; !s.empty() && s.front() >= '0' && s.front() <= '9'; s.remove_prefix(1)) {
        nanos += (s.front() - '0') * scale;
        scale /= 10;
      }
    }
    if (!s.empty()) bad_time(text);
    return system_clock::time_point(duration_cast<system_clock::duration>(seconds(secs) + nanoseconds(nanos)));
  }
  unsigned year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!read_uint(s, 4, year) || !take(s, '-') || !read_uint(s, 2, month) || !take(s, '-') || !read_uint(s, 2, day) ||
      !take(s, 'T') || !read_uint(s, 2, hour) || !take(s, ':') || !read_uint(s, 2, minute) || !take(s, ':') ||
      !read_uint(s, 2, second)) {
    bad_time(text);
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) bad_time(text);
  std::int64_t nanos = 0;
  if (take(s, '.')) {
    std::int64_t scale = 100'000'000;
    std::size_t digits = 0;
    while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
      nanos += (s.front() - '0') * scale;
      scale /= 10;
      s.remove_prefix(1);
      ++digits;
    }
    if (digits == 0) bad_time(text);
  }
  std::int64_t offset_s = 0;
  if (take(s, 'Z') || take(s, 'z')) {
  } else if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    const int sign = s.front() == '+' ? 1 : -1;
    s.remove_prefix(1);
    unsigned oh = 0, om = 0;
    if (!read_uint(s, 2, oh) || !take(s, ':') || !read_uint(s, 2, om) || oh > 23 || om > 59) bad_time(text);
    offset_s = sign * static_cast<std::int64_t>(oh * 3600 + om * 60);
  } else {
    bad_time(text);  // a time without its zone would mean something else on every host
  }
  if (!s.empty()) bad_time(text);
  const std::int64_t epoch_s = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return system_clock::time_point(duration_cast<system_clock::duration>(seconds(epoch_s) + nanoseconds(nanos)));
}

std::string format_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(((ms % 1000) + 1000) % 1000));
  return buf;
}

std::chrono::nanoseconds wait_until_start(std::chrono::system_clock::time_point at,
                                          std::chrono::system_clock::time_point now,
                                          std::chrono::nanoseconds tolerance) {
  using namespace std::chrono;
  const auto ahead = duration_cast<nanoseconds>(at - now);
  if (ahead < -tolerance) {
    char late[32];
    std::snprintf(late, sizeof late, "%.3f", duration<double>(-ahead).count());
    throw std::invalid_argument("--start-at " + format_utc(at) + " is " + late + " s in the past (now " +
                                format_utc(now) + "); give a time ahead, e.g. --start-at @$(( $(date +%s) + 10 ))");
  }
  if (ahead > hours(24)) {
    throw std::invalid_argument("--start-at " + format_utc(at) + " is more than a day ahead (now " + format_utc(now) +
                                "); is the date right?");
  }
  return ahead > nanoseconds(0) ? ahead : nanoseconds(0);
}

}  // namespace ringrpc::load

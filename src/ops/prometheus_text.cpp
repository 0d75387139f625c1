// Prometheus text exposition (format 0.0.4) and JSON renderings of a metrics snapshot.

#include "ops/prometheus_text.hpp"
#include "base/utf8.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/latency_histogram.hpp"

namespace ringrpc::detail {

namespace {

bool is_metric_name(std::string_view n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label names beginning with "__" are reserved for Prometheus itself.
bool is_label_name(std::string_view n) {
  if (n.empty() || n.starts_with("__")) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string_view type_name(metric_type t) {
  switch (t) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
  }
  return "untyped";
}

// Go's strconv.ParseFloat reads every spelling to_chars writes, plus the three specials.
void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    std::array<char, 32> buf;
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    out.append(buf.data(), r.ptr);
  }
}

void append_number(std::string& out, std::uint64_t v) {
  std::array<char, 24> buf;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

// HELP text escapes only backslash and line feed; label values also the double quote. The
// format is UTF-8 and a scraper rejects the whole page over one bad byte, so a byte that is not
// part of valid UTF-8 becomes U+FFFD.
void append_escaped(std::string& out, std::string_view s, bool quote) {
  append_utf8_escaped(out, s, "\xEF\xBF\xBD", [quote](std::string& o, char c) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\n') {
      o += "\\n";
    } else if (quote && c == '"') {
      o += "\\\"";
    } else {
      o += c;
    }
  });
}

void check_labels(const metric_family& f, const std::vector<metric_label>& labels) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto& l = labels[i];
    if (!is_label_name(l.name)) {
      throw std::invalid_argument("metric " + f.name + ": bad label name '" + l.name + "'");
    }
    if (f.type == metric_type::histogram && l.name == "le") {
      throw std::invalid_argument("metric " + f.name + ": 'le' is reserved for histogram buckets");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j].name == l.name) {
        throw std::invalid_argument("metric " + f.name + ": label '" + l.name + "' given twice");
      }
    }
  }
}

// NAME{a="x",b="y"} — `extra` is appended last (the le of a bucket).
void append_series(std::string& out, std::string_view name, const std::vector<metric_label>& labels,
                   const metric_label* extra) {
  out += name;
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  auto one = [&](const metric_label& l) {
    if (!first) out += ',';
    first = false;
    out += l.name;
    out += "=\"";
    append_escaped(out, l.value, true);
    out += '"';
  };
  for (const auto& l : labels) one(l);
  if (extra != nullptr) one(*extra);
  out += '}';
}

void check_histogram(const metric_family& f, const histogram_value& h) {
  if (h.bucket_counts.size() != h.upper_bounds.size() + 1) {
    throw std::invalid_argument("metric " + f.name + ": a histogram needs one count per bound plus one above");
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < h.upper_bounds.size(); ++i) {
    if (!std::isfinite(h.upper_bounds[i]) || (i > 0 && h.upper_bounds[i] <= h.upper_bounds[i - 1])) {
      throw std::invalid_argument("metric " + f.name + ": bucket bounds must be finite and ascending");
    }
  }
  for (const auto c : h.bucket_counts) total += c;
  if (total != h.count) {
    throw std::invalid_argument("metric " + f.name + ": bucket counts do not add up to the count");
  }
}

std::string le_text(double bound) {
  std::string s;
  append_number(s, bound);
  return s;
}

// Integral values print as integers in JSON (counters are the common case), others as doubles.
nlohmann::ordered_json json_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    if (v >= 0) return static_cast<std::uint64_t>(v);
    return static_cast<std::int64_t>(v);
  }
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
  return v;
}

constexpr std::array<double, 19> k_latency_bounds = {
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
    25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,   2.5,  5.0,    10.0,
};
constexpr std::array<double, 4> k_quantiles = {0.5, 0.9, 0.99, 0.999};

}  // namespace

metric_family& metric_family::add(double value, std::vector<metric_label> labels) {
  metric_sample s;
  s.labels = std::move(labels);
  s.value = value;
  samples.push_back(std::move(s));
  return *this;
}

metric_family& metric_family::add(histogram_value value, std::vector<metric_label> labels) {
  metric_sample s;
  s.labels = std::move(labels);
  s.histogram = std::move(value);
  samples.push_back(std::move(s));
  return *this;
}

metric_family& metrics_snapshot::family(std::string_view name, std::string_view help, metric_type type) {
  for (auto& f : _families) {
    if (f.name != name) continue;
    if (f.type != type) {
      throw std::invalid_argument("metric " + f.name + " is already a " + std::string(type_name(f.type)));
    }
    return f;
  }
  if (!is_metric_name(name)) throw std::invalid_argument("bad metric name '" + std::string(name) + "'");
  if (type == metric_type::counter && !name.ends_with("_total")) {
    throw std::invalid_argument("counter " + std::string(name) + " must end in _total");
  }
  // A histogram's series take these suffixes; a family of such a name would collide with them.
  if (type == metric_type::histogram &&
      (name.ends_with("_bucket") || name.ends_with("_sum") || name.ends_with("_count"))) {
    throw std::invalid_argument("histogram " + std::string(name) + " must not end in _bucket, _sum or _count");
  }
  metric_family f;
  f.name = name;
  f.help = help;
  f.type = type;
  _families.push_back(std::move(f));
  return _families.back();
}

std::string to_prometheus_text(const metrics_snapshot& s) {
  std::string out;
  out.reserve(4096);
  for (const auto& f : s.families()) {
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    for (const auto& sample : f.samples) {
      check_labels(f, sample.labels);
      if (f.type != metric_type::histogram) {
        append_series(out, f.name, sample.labels, nullptr);
        out += ' ';
        append_number(out, sample.value);
        out += '\n';
        continue;
      }
      const histogram_value& h = sample.histogram;
      check_histogram(f, h);
      const std::string bucket = f.name + "_bucket";
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i <= h.upper_bounds.size(); ++i) {
        cumulative += h.bucket_counts[i];
        const metric_label le{"le", i < h.upper_bounds.size() ? le_text(h.upper_bounds[i]) : "+Inf"};
        append_series(out, bucket, sample.labels, &le);
        out += ' ';
        append_number(out, cumulative);
        out += '\n';
      }
      append_series(out, f.name + "_sum", sample.labels, nullptr);
      out += ' ';
      append_number(out, h.sum);
      out += '\n';
      append_series(out, f.name + "_count", sample.labels, nullptr);
      out += ' ';
      append_number(out, h.count);
      out += '\n';
    }
  }
  return out;
}

std::string to_json(const metrics_snapshot& s) {
  using json = nlohmann::ordered_json;
  json root = json::object();
  for (const auto& f : s.families()) {
    json jf;
    jf["type"] = type_name(f.type);
    jf["help"] = f.help;
    json& samples = jf["samples"] = json::array();
    for (const auto& sample : f.samples) {
      check_labels(f, sample.labels);
      json js;
      json& labels = js["labels"] = json::object();
      for (const auto& l : sample.labels) labels[l.name] = l.value;
      if (f.type != metric_type::histogram) {
        js["value"] = json_number(sample.value);
      } else {
        const histogram_value& h = sample.histogram;
        check_histogram(f, h);
        js["count"] = h.count;
        js["sum"] = json_number(h.sum);
        json& buckets = js["buckets"] = json::array();
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= h.upper_bounds.size(); ++i) {
          cumulative += h.bucket_counts[i];
          json b;
          if (i < h.upper_bounds.size()) {
            b["le"] = h.upper_bounds[i];
          } else {
            b["le"] = "+Inf";
          }
          b["count"] = cumulative;
          buckets.push_back(std::move(b));
        }
        json& q = js["quantiles"] = json::object();
        for (const auto& [quantile, value] : h.quantiles) q[le_text(quantile)] = json_number(value);
      }
      samples.push_back(std::move(js));
    }
    root[f.name] = std::move(jf);
  }
  // Label values are arbitrary bytes (peer names, methods); replace what is not UTF-8 rather
  // than failing the whole page.
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::span<const double> default_latency_bounds_seconds() noexcept { return k_latency_bounds; }

std::span<const double> default_quantiles() noexcept { return k_quantiles; }

namespace {

// Folds buckets given by `for_each(f)`, which calls f(lowest, count) in increasing order.
template <class ForEach>
histogram_value fold(ForEach&& for_each, std::span<const double> upper_bounds, double seconds_per_unit) {
  histogram_value out;
  out.upper_bounds.assign(upper_bounds.begin(), upper_bounds.end());
  out.bucket_counts.assign(upper_bounds.size() + 1, 0);
  // Compare in the histogram's unit: 10e-6 s is 10000 ns exactly there, whereas 10000 * 1e-9
  // rounds to just above 10e-6 and would push a value lying on a bound into the next bucket.
  std::vector<double> bounds_in_units(upper_bounds.size());
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    const double u = upper_bounds[i] / seconds_per_unit;
    const double r = std::nearbyint(u);
    bounds_in_units[i] = std::fabs(u - r) <= 1e-9 * std::fmax(1.0, std::fabs(u)) ? r : u;
  }
  std::size_t b = 0;
  for_each([&](std::uint64_t lowest, std::uint64_t count) {
    const auto v = static_cast<double>(lowest);
    while (b < bounds_in_units.size() && bounds_in_units[b] < v) ++b;
    out.bucket_counts[b] += count;
    out.count += count;
  });
  return out;
}

}  // namespace

histogram_value histogram_from_buckets(std::span<const source_bucket> buckets, double sum,
                                       std::span<const double> upper_bounds, double seconds_per_unit,
                                       std::span<const double> quantiles) {
  histogram_value out = fold(
      [&](auto&& f) {
        for (const auto& sb : buckets) {
          if (sb.count != 0) f(sb.lowest, sb.count);
        }
      },
      upper_bounds, seconds_per_unit);
  out.sum = sum * seconds_per_unit;
  for (const double q : quantiles) {
    double value = 0;
    if (out.count != 0) {
      // The same rank rule as latency_histogram::value_at_percentile: the q * count-th value.
      const auto rank = static_cast<std::uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(out.count)));
      std::uint64_t seen = 0;
      for (const auto& sb : buckets) {
        seen += sb.count;
        if (sb.count != 0 && seen >= std::max<std::uint64_t>(rank, 1)) {
          value = static_cast<double>(sb.lowest) * seconds_per_unit;
          break;
        }
      }
    }
    out.quantiles.emplace_back(q, value);
  }
  return out;
}

histogram_value histogram_from(const latency_histogram& h, std::span<const double> upper_bounds,
                               double seconds_per_unit, std::span<const double> quantiles) {
  histogram_value out = fold(
      [&](auto&& f) {
        h.for_each_bucket([&](std::uint64_t low, std::uint64_t /*high*/, std::uint64_t count) { f(low, count); });
      },
      upper_bounds, seconds_per_unit);
  out.sum = h.mean() * static_cast<double>(h.count()) * seconds_per_unit;
  for (const double q : quantiles) {
    out.quantiles.emplace_back(q, static_cast<double>(h.value_at_percentile(q * 100.0)) * seconds_per_unit);
  }
  return out;
}

}  // namespace ringrpc::detail

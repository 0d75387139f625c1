// The fixed-width summary and the pieces every output shares. JSON is in report_json.cpp, the
// SVG plot in report_svg.cpp.

#include "report.hpp"

#include <algorithm>
#include <cstring>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "report_internal.hpp"

namespace ringrpc::load {

namespace report_detail {

std::string strprintf(const char* format, ...) {
  char small[256];
  std::va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(small, sizeof small, format, args);
  va_end(args);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof small) return std::string(small, static_cast<std::size_t>(n));
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and line breaks are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::vector<std::pair<double, double>> latency_spectrum(const detail::latency_histogram& h) {
  std::vector<std::pair<double, double>> out;
  const std::uint64_t count = h.count();
  if (count == 0) return out;
  constexpr double ticks_per_half_distance = 5;
  const double n = static_cast<double>(count);
  // Every step is 20 / 2^k, so p stays an exact binary fraction and reaches 100 exactly at the
  // latest after ~50 halvings.
  double p = 0;
  while (p < 100) {
    out.emplace_back(p, ns_to_us(h.value_at_percentile(p)));
    // Past the point where fewer than one value lies above p, every tick is the maximum.
    if ((100 - p) / 100 * n <= 1) break;
    const double halvings = std::floor(std::log2(100 / (100 - p)));
    const double ticks = ticks_per_half_distance * std::exp2(halvings + 1);
    p += 100 / ticks;
  }
  out.emplace_back(100.0, ns_to_us(h.max()));
  return out;
}

}  // namespace report_detail

using report_detail::ns_to_us;
using report_detail::strprintf;
using report_detail::us_decimals;

std::uint64_t kind_result::error_total() const noexcept {
  std::uint64_t total = 0;
  for (const auto& [kind, n] : errors) total += n;
  return total;
}

static std::string config_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::uint64_t run_result::error_total() const noexcept {
  std::uint64_t total = 0;
  for (const auto& [kind, n] : errors) total += n;
  return total;
}

std::vector<double> default_percentiles() { return {50, 90, 99, 99.9, 99.99}; }

std::string percentile_key(double p) {
  // Shortest round-trip form: 99.9 -> "p99.9", 50 -> "p50", never "p99.900000".
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, p);
  if (ec != std::errc{}) return "p?";
  std::string key(1, 'p');
  key.append(buf, end);
  return key;
}

plot_series plot_series_from(const run_result& r, const std::string& label) {
  plot_series s;
  s.label = label;
  s.title = run_title(r.config, r.measured_s);
  s.spectrum = report_detail::latency_spectrum(r.latency_ns);
  if (r.open_loop) {
    s.service_spectrum = report_detail::latency_spectrum(r.service_ns);
    s.requested_rate = r.requested_rate;
    for (const step_result& st : r.steps) {
      const bool ramp = st.ramp_from >= 0;
      s.requested_steps.emplace_back(st.start_s, st.start_s + st.duration_s, ramp ? st.ramp_from : st.requested_rate,
                                     ramp ? st.ramp_to : st.requested_rate);
    }
  }
  s.rate.reserve(r.per_second.size());
  for (const second_sample& x : r.per_second) {
    s.rate.emplace_back(x.t_s, x.width_s > 0 ? static_cast<double>(x.calls_ok) / x.width_s : 0);
  }
  s.last_rate_partial = !r.per_second.empty() && r.per_second.back().width_s < 1 - 1e-9;
  return s;
}

void judge_keep_up(step_result& s) noexcept {
  constexpr double on_time_share = 0.99;
  constexpr double rate_tolerance = 0.05;
  const std::uint64_t late = s.late_client + s.late_held;
  const std::uint64_t on_time = s.issued > late ? s.issued - late : 0;
  const bool behind = static_cast<double>(on_time) < on_time_share * static_cast<double>(s.scheduled);
  // Against what this step scheduled, not the nominal rate: Poisson arrivals draw more or fewer
  // calls than the mean (a standard deviation of sqrt(N)), and a step the target answered in
  // full must not fail on the luck of the draw.
  const double asked = s.duration_s > 0 ? static_cast<double>(s.scheduled) / s.duration_s : s.requested_rate;
  const bool rate_off = !(std::fabs(s.achieved_rate - asked) <= rate_tolerance * asked);
  s.kept_up = s.scheduled > 0 && !behind && !rate_off;
  if (s.kept_up) {
    s.reason.clear();
  } else {
    // Sends held by full connections and calls answered short are the target's doing (or too
    // few connections x depth for its latency); sends late with room to spare are the client's.
    s.reason = behind && s.late_client > s.late_held ? "client_behind_schedule" : "target_too_slow";
  }
}

std::string run_title(const std::map<std::string, nlohmann::json>& config, double measured_s) {
  auto text = [&](const char* key) -> std::string {
    const auto it = config.find(key);
    return it == config.end() ? std::string() : config_text(it->second);
  };
  auto rate_text = [](double v) {
    if (v >= 1e6) return strprintf("%gM", v / 1e6);
    if (v >= 1e3) return strprintf("%gk", v / 1e3);
    return strprintf("%g", v);
  };
  std::string title = text("target");
  if (const std::string c = text("connections"); !c.empty()) {
    title += " \xC2\xB7 " + c + " conn x depth " + (text("depth").empty() ? std::string("1") : text("depth"));
  }
  if (const auto it = config.find("rate"); it != config.end() && it->second.is_number()) {
    title += " \xC2\xB7 open loop " + rate_text(it->second.get<double>()) + " calls/s";
  } else if (const auto steps = config.find("rate_steps"); steps != config.end()) {
    title += " \xC2\xB7 open loop steps";
  } else if (config.count("rate_ramp") != 0) {
    title += " \xC2\xB7 open loop ramp";
  } else if (text("loop") == "closed") {
    title += " \xC2\xB7 closed loop";
  }
  if (measured_s > 0) {
    title += strprintf(" \xC2\xB7 %.3g s", measured_s);
  } else if (const auto it = config.find("duration_s"); it != config.end() && it->second.is_number()) {
    title += strprintf(" \xC2\xB7 %g s", it->second.get<double>());
  }
  return title;
}

namespace {

std::string format_us(double us, int decimals) { return strprintf("%.*f", decimals, us); }

std::string format_us(double us) { return format_us(us, us_decimals(us)); }

std::string format_rate(double rate) { return strprintf("%.1f", rate); }

std::string format_count(std::uint64_t n) { return strprintf("%llu", static_cast<unsigned long long>(n)); }

// "  <label padded to 20><value right-aligned in 14>".
std::string row(const std::string& label, const std::string& value, const std::string& tail = {}) {
  return strprintf("  %-20s %14s%s\n", label.c_str(), value.c_str(), tail.c_str());
}

std::string short_reason(const std::string& reason) {
  return reason == "client_behind_schedule" ? "client behind schedule" : "target too slow";
}

std::string keep_up_reason_text(const std::string& reason) {
  if (reason == "client_behind_schedule") {
    return "client behind schedule: over 1% of the calls went out\n"
           "  over 1 ms late with room on their connection (give the client -t or CPU)";
  }
  return "target too slow: calls waited for a free slot (-c x -P)\n"
         "  or went unanswered; the corrected latency includes their wait";
}

// Bytes per second in the units wrk's Transfer/sec uses.
std::string format_bytes_rate(double bytes_per_s) {
  if (bytes_per_s >= 1024.0 * 1024 * 1024) return strprintf("%.2f GiB/s", bytes_per_s / (1024.0 * 1024 * 1024));
  if (bytes_per_s >= 1024.0 * 1024) return strprintf("%.2f MiB/s", bytes_per_s / (1024.0 * 1024));
  if (bytes_per_s >= 1024.0) return strprintf("%.2f KiB/s", bytes_per_s / 1024.0);
  return strprintf("%.0f B/s", bytes_per_s);
}

// What ran, and which window the numbers cover.
void header_section(std::string& out, const run_result& r) {
  std::string target;
  if (const auto it = r.config.find("target"); it != r.config.end()) target = "  " + config_text(it->second);
  out += "ringrpc-load" + target + "  " + (r.open_loop ? "open loop" : "closed loop") + "\n";
  out += strprintf("  %.2f s measured", r.measured_s);
  out += r.warmup_s > 0 ? strprintf(", after %.1f s warm-up, excluded", r.warmup_s) : std::string(", no warm-up");
  out += r.interrupted ? ", ended early by SIGINT\n" : "\n";
  std::string config;
  for (const auto& [key, value] : r.config) {
    if (key != "target") config += " " + key + "=" + config_text(value);
  }
  if (!config.empty()) out += "  config:" + config + "\n";
  out += "\n";
}

void totals_section(std::string& out, const run_result& r) {
  out += row("calls/s", format_rate(r.calls_per_sec()));
  out += row("calls ok", format_count(r.calls_ok));
  out += row("errors", format_count(r.error_total()));
  for (const auto& [kind, n] : r.errors) out += row("  " + kind, format_count(n));
  if (r.streams) {  // over the whole run: a stream opens in the warm-up and ends after the window
    out += row("streams opened", format_count(r.streams_opened));
    out += row("streams failed", format_count(r.streams_failed));
    for (const auto& [kind, n] : r.stream_failures) out += row("  " + kind, format_count(n));
    out += row("credit waits", format_count(r.stream_credit_waits));
  }
  if (r.measured_s > 0 && (r.bytes_sent > 0 || r.bytes_received > 0)) {  // merged logs have none
    out += row("sent", format_bytes_rate(static_cast<double>(r.bytes_sent) / r.measured_s));
    out += row("received", format_bytes_rate(static_cast<double>(r.bytes_received) / r.measured_s));
  }
  out += "\n";
  if (r.server) out += format_server_cost(*r.server);
}

// Connections opened per second (a connection per call) and TLS handshakes, apart from the
// calls: a call's latency starts once its handshake is done.
void connections_section(std::string& out, const run_result& r) {
  const auto per_second = [&](std::uint64_t n) {
    return format_rate(r.measured_s > 0 ? static_cast<double>(n) / r.measured_s : 0);
  };
  if (r.new_connection_per_call) {
    out += row("connections/s", per_second(r.connections_measured));
    if (r.tls) out += row("tls handshakes/s", per_second(r.handshakes_measured));
    out += "\n";
  }
  if (!r.tls) return;
  const auto& h = r.handshake_ns;
  out += row("tls handshakes", format_count(h.count()));
  for (const auto& [kind, n] : r.handshake_failures) out += row("  failed " + kind, format_count(n));
  if (h.count() > 0) {
    out += row("  p50 (us)", format_us(ns_to_us(h.value_at_percentile(50)), 1));
    out += row("  p99 (us)", format_us(ns_to_us(h.value_at_percentile(99)), 1));
    out += row("  max (us)", format_us(ns_to_us(h.max()), 1));
  }
  out += "\n";
}

// Corrected latency (and, in an open loop, service time) side by side, and how replies were timed.
void latency_section(std::string& out, const run_result& r, const std::vector<double>& percentiles) {
  const bool service = r.open_loop;
  if (service) {
    out += strprintf("  %-20s %14s %14s\n", "latency (us)", "corrected", "service");
  } else {
    out += strprintf("  %-20s %14s\n", "latency (us)", "");
  }
  const auto& lat = r.latency_ns;
  const auto& svc = r.service_ns;
  double smallest_us = ns_to_us(lat.min());
  if (service && svc.count() > 0) smallest_us = std::min(smallest_us, ns_to_us(svc.min()));
  const int decimals = us_decimals(smallest_us);
  auto line = [&](const std::string& label, double corrected_us, double service_us) {
    if (service) {
      out += strprintf("  %-20s %14s %14s\n", ("  " + label).c_str(), format_us(corrected_us, decimals).c_str(),
                       format_us(service_us, decimals).c_str());
    } else {
      out += strprintf("  %-20s %14s\n", ("  " + label).c_str(), format_us(corrected_us, decimals).c_str());
    }
  };
  line("min", ns_to_us(lat.min()), ns_to_us(svc.min()));
  for (const double p : percentiles) {
    line(percentile_key(p), ns_to_us(lat.value_at_percentile(p)), ns_to_us(svc.value_at_percentile(p)));
  }
  line("max", ns_to_us(lat.max()), ns_to_us(svc.max()));
  line("mean", ns_to_us(lat.mean()), ns_to_us(svc.mean()));
  line("stddev", ns_to_us(lat.stddev()), ns_to_us(svc.stddev()));
  out += r.latency_clock == "kernel" ? "  (replies timed by the kernel's receive stamps)\n"
         : r.latency_clock == "mixed" ? "  (replies timed by the kernel's receive stamps where the socket gave one)\n"
                                       : "  (replies timed by the client's clock after each wake-up)\n";
  if (service) {
    out += "  (corrected: from each call's scheduled send time; service: from its actual send,\n"
           "   as tools without coordinated-omission correction report)\n";
  }
  if (lat.saturated() > 0) {
    out += strprintf("  note: %s calls took longer than %.0f s and are counted as %.0f s\n",
                     format_count(lat.saturated()).c_str(),
                     static_cast<double>(lat.highest_trackable()) / 1e9,
                     static_cast<double>(lat.highest_trackable()) / 1e9);
  }
}

// An open loop: the rates asked for, issued and answered, and which side fell behind when it did.
void open_loop_section(std::string& out, const run_result& r) {
  if (!r.open_loop) return;
  out += "\n";
  out += row("requested rate", format_rate(r.requested_rate), " calls/s");
  auto share = [&](double v) {
    return r.requested_rate > 0 ? strprintf(" calls/s (%.1f%%)", 100 * v / r.requested_rate) : std::string(" calls/s");
  };
  out += row("issued rate", format_rate(r.issued_rate), share(r.issued_rate));
  out += row("answered rate", format_rate(r.answered_rate), share(r.answered_rate));
  if (r.kept_up || r.steps.empty()) return;  // none: interrupted in the warm-up
  // The first step that did not keep up names the reason.
  std::string reason = "target_too_slow";
  for (const step_result& st : r.steps) {
    if (!st.kept_up) {
      reason = st.reason;
      break;
    }
  }
  out += "  COULD NOT KEEP UP: " + keep_up_reason_text(reason) + "\n";
}

// One row per --mix kind or per member of a registry target: its calls, errors and latency. The
// name column takes the longest name (HTTP paths can be long), up to `max_width`.
void breakdown_table(std::string& out, const std::vector<kind_result>& rows, const char* title, std::size_t max_width,
                     bool with_p999) {
  if (rows.empty()) return;
  std::size_t w = std::strlen(title);
  for (const kind_result& k : rows) w = std::max(w, k.name.size());
  const int wi = static_cast<int>(std::min(w, max_width));
  out += "\n";
  out += strprintf("  %-*s %12s %8s %11s %11s", wi, title, "calls ok", "errors", "p50 (us)", "p99 (us)");
  out += with_p999 ? strprintf(" %11s\n", "p99.9 (us)") : "\n";
  for (const kind_result& k : rows) {
    const auto& h = k.latency_ns;
    out += strprintf("  %-*s %12s %8s %11s %11s", wi, k.name.c_str(), format_count(k.calls_ok).c_str(),
                     format_count(k.error_total()).c_str(), format_us(ns_to_us(h.value_at_percentile(50))).c_str(),
                     format_us(ns_to_us(h.value_at_percentile(99))).c_str());
    out += with_p999 ? strprintf(" %11s\n", format_us(ns_to_us(h.value_at_percentile(99.9))).c_str()) : "\n";
    for (const auto& [kind, n] : k.errors) out += strprintf("  %-*s %12s %8s\n", wi, ("  " + kind).c_str(), "", format_count(n).c_str());
  }
}

void steps_section(std::string& out, const run_result& r) {
  if (r.steps.empty()) return;
  out += "\n";
  out += strprintf("  %-6s %12s %12s %12s %9s %12s\n", "step", "requested/s", "issued/s", "answered/s", "", "p99 (us)");
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const step_result& s = r.steps[i];
    const std::string pct = s.requested_rate > 0 ? strprintf("(%.1f%%)", 100 * s.achieved_rate / s.requested_rate) : "";
    const std::string flag = s.kept_up ? std::string() : "  could not keep up: " + short_reason(s.reason);
    out += strprintf("  %-6zu %12s %12s %12s %9s %12s%s\n", i + 1, format_rate(s.requested_rate).c_str(),
                     format_rate(s.issued_rate()).c_str(), format_rate(s.achieved_rate).c_str(), pct.c_str(),
                     format_us(ns_to_us(s.p99_ns)).c_str(), flag.c_str());
  }
}

void verdicts_section(std::string& out, const run_result& r) {
  if (r.verdicts.empty()) return;
  out += "\n  thresholds (--fail-if)\n";
  for (const threshold_verdict& v : r.verdicts) {
    const std::string value = v.note.empty() ? v.observed : v.note;
    out += strprintf("    %-20s %-24s %s\n", v.expression.c_str(), value.c_str(), v.failed ? "FAILED" : "passed");
  }
}

}  // namespace

std::string format_summary(const run_result& r, const std::vector<double>& percentiles) {
  std::string out;
  header_section(out, r);
  totals_section(out, r);
  connections_section(out, r);
  latency_section(out, r, percentiles);
  open_loop_section(out, r);
  breakdown_table(out, r.kinds, "kind", 40, true);
  breakdown_table(out, r.members, "member", 48, false);
  steps_section(out, r);
  verdicts_section(out, r);
  return out;
}

}  // namespace ringrpc::load

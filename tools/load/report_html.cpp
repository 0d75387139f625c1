// The HTML report (--html): one page a person opens in a browser, to keep or attach to an issue.
// It must show the same on a machine with no network and must not run anything a target put
// in it: inline CSS, the plots as inline SVG (report_svg.cpp), no script at all, and a
// Content-Security-Policy that forbids scripts and every fetch in case escaping ever missed one.
// Texts that are not our own literals (the target URL, headers, error kinds, --mix names, a
// registry's member names, the server's metrics URL) pass through xml_escape.

#include <string>
#include <vector>

#include "report.hpp"
#include "report_internal.hpp"

namespace ringrpc::load {

using report_detail::ns_to_us;
using report_detail::strprintf;
using report_detail::us_decimals;
using report_detail::xml_escape;

namespace {

constexpr const char* style =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:1040px;color:#222;padding:0 1em}"
    "h1{font-size:1.4em;margin-bottom:.2em}h2{font-size:1.1em;margin-top:1.6em}"
    ".target{font-family:monospace;word-break:break-all}"
    "table{border-collapse:collapse;margin:.4em 0}"
    "th,td{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".warn{color:#a00;font-weight:bold}.muted{color:#777}"
    "svg{max-width:100%;height:auto;display:block;margin:.5em 0}";

std::string count_text(std::uint64_t n) { return strprintf("%llu", static_cast<unsigned long long>(n)); }

std::string config_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A row of a two-column table; `id` lets tests (and readers' scripts) find a figure. Numbers
// align right, texts (a URL, a pid) left.
void row(std::string& html, const char* id, const std::string& label, const std::string& value, bool number = true) {
  html += strprintf("<tr id=\"%s\"><th>%s</th><td%s>%s</td></tr>\n", id, xml_escape(label).c_str(),
                    number ? " class=\"n\"" : "", xml_escape(value).c_str());
}

void head(std::string& html, const run_result& r) {
  const auto target = r.config.find("target");
  const std::string title = run_title(r.config, r.measured_s);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // No script, no fetch of any kind: the page is data, whatever the target sent.
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "img-src data:\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>ringrpc-load: " + xml_escape(title) + "</title>\n";
  html += std::string("<style>") + style + "</style>\n</head>\n<body>\n";
  html += "<h1>ringrpc-load report</h1>\n";
  html += "<p class=\"target\" id=\"title\">" + xml_escape(title) + "</p>\n";
  if (target == r.config.end()) html += "<p class=\"muted\">no target recorded</p>\n";
  if (r.interrupted) html += "<p class=\"warn\" id=\"interrupted\">ended early by SIGINT: the figures cover the time until then</p>\n";
  // Set only for runs whose other figures are meaningless (engine.hpp); shown first.
  if (!r.diagnosis.empty()) html += "<p class=\"warn\" id=\"diagnosis\">" + xml_escape(r.diagnosis) + "</p>\n";
  if (!r.fail_fast.empty()) html += "<p class=\"warn\" id=\"fail-fast\">" + xml_escape(r.fail_fast) + "</p>\n";
}

// What ran and the totals: the figures a reader looks for first.
void summary_table(std::string& html, const run_result& r) {
  const auto target = r.config.find("target");
  html += "<h2>Summary</h2>\n<table class=\"summary\">\n";
  row(html, "target", "target", target == r.config.end() ? std::string("-") : config_text(target->second), false);
  row(html, "loop", "loop", r.open_loop ? "open" : "closed", false);
  row(html, "measured", "measured (s)", strprintf("%.2f", r.measured_s));
  row(html, "warmup", "warm-up, excluded (s)", strprintf("%.2f", r.warmup_s));
  row(html, "calls-ok", "calls ok", count_text(r.calls_ok));
  row(html, "errors", "errors", count_text(r.error_total()));
  for (const auto& [kind, n] : r.errors) {
    html += "<tr class=\"error-kind\"><th>&nbsp;&nbsp;" + xml_escape(kind) + "</th><td class=\"n\">" + count_text(n) +
            "</td></tr>\n";
  }
  row(html, "rate", "calls/s (achieved)", strprintf("%.1f", report_detail::achieved_rate(r)));
  if (r.open_loop) {
    row(html, "requested-rate", "requested calls/s", strprintf("%.1f", r.requested_rate));
    row(html, "issued-rate", "issued calls/s", strprintf("%.1f", r.issued_rate));
    row(html, "answered-rate", "answered calls/s", strprintf("%.1f", r.answered_rate));
    row(html, "kept-up", "kept up", r.kept_up ? "yes" : "no", false);
  }
  html += "</table>\n";
}

// Percentiles of the corrected latency, and in an open loop of the service time beside them.
void latency_table(std::string& html, const run_result& r, const std::vector<double>& percentiles) {
  const auto& lat = r.latency_ns;
  const auto& svc = r.service_ns;
  const bool service = r.open_loop;
  const int decimals = us_decimals(ns_to_us(lat.min()));
  html += "<h2>Latency (\xC2\xB5s)</h2>\n<table class=\"latency\">\n<tr><th></th><th>";
  html += service ? "corrected</th><th>service</th></tr>\n" : "latency</th></tr>\n";
  auto line = [&](const std::string& key, double corrected_ns, double service_ns) {
    html += "<tr id=\"lat-" + xml_escape(key) + "\"><th>" + xml_escape(key) + "</th>";
    html += strprintf("<td class=\"n\">%.*f</td>", decimals, ns_to_us(corrected_ns));
    if (service) html += strprintf("<td class=\"n\">%.*f</td>", decimals, ns_to_us(service_ns));
    html += "</tr>\n";
  };
  line("min", static_cast<double>(lat.min()), static_cast<double>(svc.min()));
  for (const double p : percentiles) {
    line(percentile_key(p), static_cast<double>(lat.value_at_percentile(p)),
         static_cast<double>(svc.value_at_percentile(p)));
  }
  line("max", static_cast<double>(lat.max()), static_cast<double>(svc.max()));
  line("mean", lat.mean(), svc.mean());
  html += "</table>\n";
  if (service) {
    html += "<p class=\"muted\">corrected: from each call's scheduled send time; service: from its actual send "
            "(what tools without coordinated-omission correction report)</p>\n";
  }
}

// --server-pid / --server-metrics; a run without them says so rather than leaving a gap.
void server_section(std::string& html, const run_result& r) {
  html += "<h2>Server CPU</h2>\n";
  if (!r.server) {
    html += "<p id=\"server-cost\">not measured (give --server-pid or --server-metrics)</p>\n";
    return;
  }
  const server_cost& c = *r.server;
  if (!c.note.empty()) {
    html += "<p id=\"server-cost\">not measured: " + xml_escape(c.note) + "</p>\n";
    return;
  }
  html += "<table class=\"server\">\n";
  row(html, "server-cpu-per-call", "CPU per call (\xC2\xB5s)", strprintf("%.2f", c.cpu_us_per_call));
  row(html, "server-cores", "cores used", strprintf("%.2f", c.cores));
  row(html, "server-source", "measured from", c.source, false);
  row(html, "server-window", "over (s)", strprintf("%.2f", c.window_s));
  html += "</table>\n";
}

// The --mix kinds or a registry's members: names escaped, they may be paths or hosts.
void breakdown_table(std::string& html, const std::vector<kind_result>& rows, const char* title) {
  if (rows.empty()) return;
  html += strprintf("<h2>By %s</h2>\n<table class=\"breakdown\">\n", title);
  html += strprintf("<tr><th>%s</th><th>calls ok</th><th>errors</th><th>p50 (\xC2\xB5s)</th>"
                    "<th>p99 (\xC2\xB5s)</th></tr>\n", title);
  for (const kind_result& k : rows) {
    html += "<tr><td class=\"name\">" + xml_escape(k.name) + "</td>";
    html += strprintf("<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>\n",
                      count_text(k.calls_ok).c_str(), count_text(k.error_total()).c_str(),
                      ns_to_us(k.latency_ns.value_at_percentile(50)), ns_to_us(k.latency_ns.value_at_percentile(99)));
  }
  html += "</table>\n";
}

void steps_table(std::string& html, const run_result& r) {
  if (r.steps.size() < 2) return;  // one step is the summary's rates
  html += "<h2>Steps</h2>\n<table class=\"steps\">\n<tr><th>step</th><th>start (s)</th><th>requested/s</th>"
          "<th>issued/s</th><th>answered/s</th><th>p99 (\xC2\xB5s)</th><th>kept up</th></tr>\n";
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const step_result& s = r.steps[i];
    html += strprintf("<tr><td class=\"n\">%zu</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td>"
                      "<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td>%s</td></tr>\n",
                      i + 1, s.start_s, s.requested_rate, s.issued_rate(), s.achieved_rate, ns_to_us(s.p99_ns),
                      s.kept_up ? "yes" : xml_escape("no: " + s.reason).c_str());
  }
  html += "</table>\n";
}

void verdicts_table(std::string& html, const run_result& r) {
  if (r.verdicts.empty()) return;
  html += "<h2>Thresholds (--fail-if)</h2>\n<table class=\"thresholds\">\n";
  for (const threshold_verdict& v : r.verdicts) {
    html += "<tr><th>" + xml_escape(v.expression) + "</th><td>" + xml_escape(v.note.empty() ? v.observed : v.note) +
            "</td><td" + (v.failed ? " class=\"warn\">FAILED" : ">passed") + "</td></tr>\n";
  }
  html += "</table>\n";
}

// Latency by percentile and calls/s over time as `--plot` draws them, then errors/s.
void charts(std::string& html, const run_result& r) {
  // The plot's title names the target; a long URL as the legend's label would be cut short.
  html += "<h2>Latency by percentile (log axis) and calls/s over time</h2>\n<div id=\"plot\">\n";
  html += render_svg({plot_series_from(r, "run")});
  html += "</div>\n<h2>Errors over time</h2>\n<div id=\"errors-plot\">\n";
  time_series errors{"errors/s", {}};
  for (const second_sample& s : r.per_second) {
    errors.points.emplace_back(s.t_s, s.width_s > 0 ? static_cast<double>(s.errors) / s.width_s : 0);
  }
  html += render_time_svg("errors/s over time", "errors/s", {errors});
  html += "</div>\n";
}

void config_table(std::string& html, const run_result& r) {
  html += "<h2>Configuration</h2>\n<table class=\"config\">\n";
  for (const auto& [key, value] : r.config) {
    html += "<tr><th>" + xml_escape(key) + "</th><td>" + xml_escape(config_text(value)) + "</td></tr>\n";
  }
  html += strprintf("<tr><th>latency clock</th><td>%s</td></tr>\n</table>\n", xml_escape(r.latency_clock).c_str());
}

}  // namespace

std::string render_html(const run_result& r, const std::vector<double>& percentiles) {
  std::string html;
  head(html, r);
  summary_table(html, r);
  latency_table(html, r, percentiles);
  server_section(html, r);
  charts(html, r);
  breakdown_table(html, r.kinds, "kind");
  breakdown_table(html, r.members, "member");
  steps_table(html, r);
  verdicts_table(html, r);
  config_table(html, r);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace ringrpc::load

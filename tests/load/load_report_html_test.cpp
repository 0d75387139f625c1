// Tests for ringrpc-load's HTML report (render_html) and the errors/s panel it draws with
// render_time_svg: the figures of the run, "not measured" without a server, one offline page,
// and every text that is not our own escaped, wherever it appears.

#include "report.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace ringrpc::load;

const std::string script = "<script>alert(1)</script>";
const std::string img = "\"><img src=x onerror=alert(1)>";
const std::string hostile = script + img + "'&";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A closed-loop run of 3 s: 3000 calls at 100 us, 30 at 2 ms, and 12 errors in its second second.
run_result closed_run() {
  run_result r;
  r.config = {{"target", "http://127.0.0.1:8080/"}, {"connections", 4}, {"loop", "closed"}};
  r.measured_s = 3;
  r.calls_ok = 3030;
  r.errors = {{"http_503", 12}};
  r.latency_ns.record_n(100'000, 3000);
  r.latency_ns.record_n(2'000'000, 30);
  for (int i = 0; i < 3; ++i) {
    r.per_second.push_back({static_cast<double>(i + 1), 1010, i == 1 ? 12u : 0u, 2'000'000});
  }
  return r;
}

TEST(render_html, OneOfflinePageWithTheRunsFigures) {
  const std::string html = render_html(closed_run(), default_percentiles());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(contains(html, "</html>\n"));
  EXPECT_TRUE(contains(html, "<tr id=\"calls-ok\"><th>calls ok</th><td class=\"n\">3030</td></tr>"));
  EXPECT_TRUE(contains(html, "<tr id=\"errors\"><th>errors</th><td class=\"n\">12</td></tr>"));
  EXPECT_TRUE(contains(html, "http_503"));
  EXPECT_TRUE(contains(html, "<tr id=\"rate\"><th>calls/s (achieved)</th><td class=\"n\">1010.0</td></tr>"));
  EXPECT_TRUE(contains(html, "<tr id=\"loop\"><th>loop</th><td>closed</td></tr>"));
  EXPECT_TRUE(contains(html, "<tr id=\"lat-p50\"><th>p50</th><td class=\"n\">100.0</td></tr>"));
  EXPECT_TRUE(contains(html, "id=\"lat-p99.9\""));
  // The plot (log latency axis, calls/s) and errors/s, inline.
  EXPECT_TRUE(contains(html, "latency (log scale)"));
  EXPECT_TRUE(contains(html, "calls/s over time"));
  EXPECT_TRUE(contains(html, "errors/s over time"));
  EXPECT_TRUE(contains(html, "not measured"));
  EXPECT_FALSE(contains(html, "requested calls/s"));  // closed loop
  // Nothing to fetch, nothing to run: no script, no link or source, a policy that forbids both.
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "src="));
  EXPECT_FALSE(contains(html, "href="));
  EXPECT_FALSE(contains(html, "url("));
  EXPECT_TRUE(contains(html, "Content-Security-Policy\" content=\"default-src 'none'"));
}

TEST(render_html, OpenLoopRatesAndTheServersCpu) {
  run_result r = closed_run();
  r.open_loop = true;
  r.requested_rate = 1000;
  r.issued_rate = 1000;
  r.answered_rate = 1010;
  r.service_ns.record_n(50'000, 3030);
  r.server = server_cost{"pid 42", 0.6, 3, 0.2, 198.02, {0.2, 0.2}, ""};
  const std::string html = render_html(r, {50, 99});
  EXPECT_TRUE(contains(html, "<tr id=\"requested-rate\"><th>requested calls/s</th><td class=\"n\">1000.0</td></tr>"));
  EXPECT_TRUE(contains(html, ">service</th>"));
  EXPECT_TRUE(contains(html, "<tr id=\"server-cpu-per-call\"><th>CPU per call (\xC2\xB5s)</th><td class=\"n\">198.02</td></tr>"));
  EXPECT_FALSE(contains(html, "not measured"));
  EXPECT_FALSE(contains(html, "id=\"lat-p99.9\""));  // only the percentiles asked for

  r.server->note = "no answered call in the window";
  EXPECT_TRUE(contains(render_html(r, {50}), "not measured: no answered call in the window"));
}

// Every text that came from outside: the target URL (and so the plot's title), headers, error
// kinds, --mix names, a registry's members, the metrics URL, the messages of a stopped run.
TEST(render_html, TextsFromTheTargetOrCommandLineAreEscapedEverywhere) {
  run_result r = closed_run();
  r.config["target"] = "http://127.0.0.1:1/" + hostile;
  r.config["headers"] = std::vector<std::string>{"x-note: " + hostile};
  r.config[hostile] = hostile;
  r.errors[hostile] = 1;
  r.kinds.push_back({hostile, 1, {{hostile, 1}}, make_latency_histogram()});
  r.members.push_back({hostile, 1, {}, make_latency_histogram()});
  r.server = server_cost{hostile, 0, 0, 0, 0, {}, hostile};
  r.diagnosis = hostile;
  r.fail_fast = hostile;
  r.interrupted = true;
  r.latency_clock = hostile;
  r.verdicts.push_back({hostile, hostile, 0, 0, "%", true, ""});
  const std::string html = render_html(r, default_percentiles());
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_FALSE(contains(html, img));
  EXPECT_FALSE(contains(html, "'&"));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&apos;&amp;"));
  EXPECT_TRUE(contains(html, "ended early by SIGINT"));
}

TEST(render_time_svg, OnePanelWithEscapedLabels) {
  const std::string svg = render_time_svg("errors/s over time", "errors/s", {{hostile, {{1, 0}, {2, 12}, {3, 0}}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_TRUE(contains(svg, "errors/s over time"));
  EXPECT_TRUE(contains(svg, "class=\"series\""));
  EXPECT_FALSE(contains(svg, "<script"));
  EXPECT_FALSE(contains(svg, img));
  EXPECT_TRUE(contains(svg, "&lt;script&gt;"));
  EXPECT_FALSE(contains(svg, "nan"));
  // No points at all still draws the frame.
  EXPECT_TRUE(contains(render_time_svg("errors/s over time", "errors/s", {}), "errors/s over time"));
}

}  // namespace

// Tests for ringrpc-load's result outputs: summary text, JSON, reading JSON back, the SVG plot,
// and that merged histograms report exactly what one histogram of all values would.

#include "report.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using namespace ringrpc::load;

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// 10 s open-loop run: 10000 ok calls, mostly ~50 us, 1% ~200 us, a few ~5 ms (corrected);
// service times are a quarter of those. 5 timeouts, 2 server_busy.
run_result sample_run() {
  run_result r;
  r.config = {{"target", "ringrpc://127.0.0.1:7000/echo"}, {"connections", 64}, {"rate", 2000}};
  r.warmup_s = 1;
  r.measured_s = 10;
  r.open_loop = true;
  r.requested_rate = 2000;
  r.calls_ok = 10000;
  r.errors = {{"timeout", 5}, {"server_busy", 2}};
  auto add = [&](std::uint64_t ns, std::uint64_t n) {
    r.latency_ns.record_n(ns, n);
    r.service_ns.record_n(ns / 4, n);
  };
  add(50'000, 9890);
  add(200'000, 100);
  add(5'000'000, 10);
  for (int i = 0; i < 10; ++i) {
    r.per_second.push_back({static_cast<double>(i), 1000u + static_cast<unsigned>(i), i == 3 ? 7u : 0u, 200'000});
  }
  r.steps = {{1000, 1000, 60'000}, {2000, 1500, 4'000'000}};
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    auto& st = r.steps[i];
    st.start_s = 5.0 * static_cast<double>(i);
    st.duration_s = 5;
    st.scheduled = static_cast<std::uint64_t>(st.requested_rate * 5);
    st.issued = i == 0 ? st.scheduled : 9000;  // 1800/s of 2000/s
    st.answered = static_cast<std::uint64_t>(st.achieved_rate * 5);
    st.late_held = i == 0 ? 0 : 4000;
    ringrpc::load::judge_keep_up(st);
  }
  r.kept_up = false;
  r.issued_rate = 1400;
  r.answered_rate = 1000;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The numbers on the summary line whose first word is `label`.
std::vector<double> row_numbers(const std::string& summary, const std::string& label) {
  for (const std::string& line : lines_of(summary)) {
    std::istringstream in(line);
    std::string first;
    in >> first;
    if (first != label) continue;
    std::vector<double> nums;
    for (std::string word; in >> word;) {
      try {
        std::size_t used = 0;
        const double v = std::stod(word, &used);
        if (used == word.size()) nums.push_back(v);
      } catch (const std::exception&) {
      }
    }
    return nums;
  }
  ADD_FAILURE() << "no line '" << label << "' in:\n" << summary;
  return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::filesystem::path temp_path(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("load_report_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(percentile_key, ShortestForm) {
  EXPECT_EQ(percentile_key(99), "p99");
  EXPECT_EQ(percentile_key(99.9), "p99.9");
  EXPECT_EQ(percentile_key(50), "p50");
  EXPECT_EQ(percentile_key(99.999), "p99.999");
  EXPECT_EQ(default_percentiles(), (std::vector<double>{50, 90, 99, 99.9, 99.99}));
}

TEST(format_summary, ShowsCountsErrorsAndLatencies) {
  const run_result r = sample_run();
  EXPECT_EQ(r.error_total(), 7u);
  const std::string s = format_summary(r, default_percentiles());

  EXPECT_EQ(s.rfind("ringrpc-load  ringrpc://127.0.0.1:7000/echo  open loop\n", 0), 0u) << s;
  EXPECT_TRUE(contains(s, "10.00 s measured, after 1.0 s warm-up, excluded")) << s;
  EXPECT_TRUE(contains(s, "connections=64")) << s;
  EXPECT_EQ(row_numbers(s, "calls/s"), (std::vector<double>{1000.0}));
  EXPECT_EQ(row_numbers(s, "calls"), (std::vector<double>{10000}));  // "calls ok"
  EXPECT_EQ(row_numbers(s, "errors"), (std::vector<double>{7}));
  EXPECT_EQ(row_numbers(s, "timeout"), (std::vector<double>{5}));
  EXPECT_EQ(row_numbers(s, "server_busy"), (std::vector<double>{2}));

  // Each latency row: corrected, then service time, in us at the shown precision.
  auto expect_row = [&](const std::string& label, double corrected_us, double service_us) {
    const auto nums = row_numbers(s, label);
    ASSERT_EQ(nums.size(), 2u) << label << "\n" << s;
    EXPECT_NEAR(nums[0], corrected_us, 0.051) << label;
    EXPECT_NEAR(nums[1], service_us, 0.051) << label;
  };
  expect_row("min", us(r.latency_ns.min()), us(r.service_ns.min()));
  for (const double p : default_percentiles()) {
    expect_row(percentile_key(p), us(r.latency_ns.value_at_percentile(p)), us(r.service_ns.value_at_percentile(p)));
  }
  expect_row("max", us(r.latency_ns.max()), us(r.service_ns.max()));
  expect_row("mean", r.latency_ns.mean() / 1000, r.service_ns.mean() / 1000);
  expect_row("stddev", r.latency_ns.stddev() / 1000, r.service_ns.stddev() / 1000);
  // The right percentiles went to the right rows: ~50 us at p50/p90, ~200 us at p99 and
  // p99.9 (the 9990th of 10000), ~5 ms at p99.99.
  EXPECT_NEAR(row_numbers(s, "p50")[0], 50, 0.1);
  EXPECT_NEAR(row_numbers(s, "p99")[0], 200, 0.2);
  EXPECT_NEAR(row_numbers(s, "p99.9")[0], 200, 0.2);
  EXPECT_NEAR(row_numbers(s, "p99.99")[0], 5000, 5);

  // Open loop: requested, issued and answered apart; 1000/s answered of 2000/s requested did
  // not keep up, and the first step that missed says why.
  EXPECT_EQ(row_numbers(s, "requested"), (std::vector<double>{2000}));
  EXPECT_EQ(row_numbers(s, "issued")[0], 1400);
  EXPECT_EQ(row_numbers(s, "answered")[0], 1000);
  EXPECT_TRUE(contains(s, "COULD NOT KEEP UP: target too slow")) << s;
  EXPECT_FALSE(contains(s, "achieved")) << s;

  // Step lines: number, requested, issued, answered, share, p99, and the verdict.
  const auto step2 = row_numbers(s, "2");
  ASSERT_GE(step2.size(), 4u) << s;
  EXPECT_EQ(step2[0], 2000);
  EXPECT_EQ(step2[1], 1800);
  EXPECT_EQ(step2[2], 1500);
  EXPECT_NEAR(step2.back(), 4000, 0.5);
  EXPECT_TRUE(contains(s, "(75.0%)")) << s;
  EXPECT_TRUE(contains(s, "4000  could not keep up: target too slow\n")) << s;
  for (const std::string& line : lines_of(s)) {
    if (line.rfind("  1 ", 0) == 0) {
      EXPECT_FALSE(contains(line, "keep up")) << line;  // step 1 kept up
    }
  }
}

TEST(format_summary, NoKeepUpWarningWhenKeptUpAndNoServiceColumnClosedLoop) {
  run_result r = sample_run();
  r.kept_up = true;
  for (auto& st : r.steps) st.kept_up = true;
  EXPECT_FALSE(contains(format_summary(r, {99}), "COULD NOT KEEP UP"));
  EXPECT_FALSE(contains(format_summary(r, {99}), "could not keep up"));

  r.open_loop = false;
  r.requested_rate = 0;
  r.steps.clear();
  const std::string s = format_summary(r, {99});
  EXPECT_TRUE(contains(s, "closed loop")) << s;
  EXPECT_FALSE(contains(s, "service")) << s;
  EXPECT_FALSE(contains(s, "requested")) << s;
  EXPECT_EQ(row_numbers(s, "p99").size(), 1u);
  EXPECT_FALSE(contains(s, "p50")) << s;
}

TEST(write_json, HasTheDocumentedKeysAndValues) {
  const run_result r = sample_run();
  std::ostringstream out;
  write_json(r, default_percentiles(), out);
  const auto j = nlohmann::json::parse(out.str());

  for (const char* key : {"config", "calls_ok", "calls_per_sec", "errors", "latency_us", "service_latency_us",
                          "requested_rate", "achieved_rate", "spectrum", "per_second", "steps", "warmup_s",
                          "measured_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  // Numbers stay numbers: a reader compares them without parsing strings.
  ASSERT_TRUE(j["config"]["connections"].is_number_integer()) << j["config"].dump();
  EXPECT_EQ(j["config"]["connections"], 64);
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_EQ(j["calls_ok"], 10000);
  EXPECT_DOUBLE_EQ(j["calls_per_sec"].get<double>(), 1000);
  EXPECT_EQ(j["errors"]["timeout"], 5);
  EXPECT_EQ(j["errors"]["server_busy"], 2);
  EXPECT_DOUBLE_EQ(j["requested_rate"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(j["achieved_rate"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(j["warmup_s"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(j["measured_s"].get<double>(), 10);

  const auto& lat = j["latency_us"];
  for (const char* key : {"p50", "p90", "p99", "p99.9", "p99.99", "min", "max", "mean", "stddev"}) {
    ASSERT_TRUE(lat.contains(key)) << key;
    ASSERT_TRUE(lat[key].is_number()) << key;
  }
  EXPECT_DOUBLE_EQ(lat["p99"].get<double>(), us(r.latency_ns.value_at_percentile(99)));
  EXPECT_DOUBLE_EQ(lat["p99.9"].get<double>(), us(r.latency_ns.value_at_percentile(99.9)));
  EXPECT_DOUBLE_EQ(lat["max"].get<double>(), us(r.latency_ns.max()));
  EXPECT_DOUBLE_EQ(lat["mean"].get<double>(), r.latency_ns.mean() / 1000);
  EXPECT_DOUBLE_EQ(j["service_latency_us"]["p99"].get<double>(), us(r.service_ns.value_at_percentile(99)));

  const auto& spectrum = j["spectrum"];
  ASSERT_GE(spectrum.size(), 20u);
  EXPECT_EQ(spectrum.front()["percentile"], 0.0);
  EXPECT_DOUBLE_EQ(spectrum.front()["latency_us"].get<double>(), us(r.latency_ns.min()));
  EXPECT_EQ(spectrum.back()["percentile"], 100.0);
  EXPECT_DOUBLE_EQ(spectrum.back()["latency_us"].get<double>(), us(r.latency_ns.max()));
  for (std::size_t i = 1; i < spectrum.size(); ++i) {
    EXPECT_GT(spectrum[i]["percentile"].get<double>(), spectrum[i - 1]["percentile"].get<double>());
    EXPECT_GE(spectrum[i]["latency_us"].get<double>(), spectrum[i - 1]["latency_us"].get<double>());
  }

  ASSERT_EQ(j["per_second"].size(), 10u);
  EXPECT_EQ(j["per_second"][3]["t_s"], 3.0);
  EXPECT_EQ(j["per_second"][3]["calls_ok"], 1003);
  EXPECT_EQ(j["per_second"][3]["errors"], 7);
  EXPECT_DOUBLE_EQ(j["per_second"][3]["p99_us"].get<double>(), 200);
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["steps"][1]["requested_rate"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(j["steps"][1]["achieved_rate"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["steps"][1]["p99_us"].get<double>(), 4000);
  EXPECT_EQ(j["steps"][0]["kept_up"], true);
  EXPECT_FALSE(j["steps"][0].contains("reason"));
  EXPECT_EQ(j["steps"][1]["kept_up"], false);
  EXPECT_EQ(j["steps"][1]["reason"], "target_too_slow");
  EXPECT_DOUBLE_EQ(j["steps"][1]["issued_rate"].get<double>(), 1800);
  EXPECT_DOUBLE_EQ(j["steps"][1]["answered_rate"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["steps"][1]["start_s"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(j["steps"][1]["duration_s"].get<double>(), 5);
  EXPECT_EQ(j["steps"][1]["scheduled"], 10000);
  EXPECT_EQ(j["steps"][1]["issued"], 9000);
  EXPECT_EQ(j["steps"][1]["late_held"], 4000);
  EXPECT_EQ(j["kept_up"], false);
  EXPECT_DOUBLE_EQ(j["issued_rate"].get<double>(), 1400);
  EXPECT_DOUBLE_EQ(j["answered_rate"].get<double>(), 1000);
  for (const auto& sec : j["per_second"]) EXPECT_DOUBLE_EQ(sec["width_s"].get<double>(), 1) << sec.dump();
  EXPECT_TRUE(j["bytes"].contains("sent_per_sec")) << j.dump();
}

TEST(write_json, KindsVerdictsAndInterruption) {
  run_result r = sample_run();
  r.interrupted = true;
  ringrpc::load::kind_result a, b;
  a.name = "GET /a";
  a.calls_ok = 7;
  a.latency_ns.record(3000);
  b.name = "POST /b";
  b.errors["http_503"] = 2;
  r.kinds = {a, b};
  ringrpc::load::threshold_verdict v;
  v.expression = "p99>2ms";
  v.observed = "1500 us";
  v.observed_value = 1500;
  v.limit_value = 2000;
  v.unit = "us";
  r.verdicts = {v};
  v.expression = "errors>0";
  v.failed = true;
  r.verdicts.push_back(v);

  std::ostringstream out;
  write_json(r, {50, 99}, out);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["interrupted"], true);
  ASSERT_EQ(j["kinds"].size(), 2u);
  EXPECT_EQ(j["kinds"][0]["kind"], "GET /a");
  EXPECT_EQ(j["kinds"][0]["calls_ok"], 7);
  EXPECT_NEAR(j["kinds"][0]["latency_us"]["p99"].get<double>(), 3, 0.01);  // 3 significant digits
  EXPECT_EQ(j["kinds"][1]["errors"]["http_503"], 2);
  ASSERT_EQ(j["thresholds"].size(), 2u);
  EXPECT_EQ(j["thresholds"][0]["expression"], "p99>2ms");
  EXPECT_EQ(j["thresholds"][0]["failed"], false);
  EXPECT_DOUBLE_EQ(j["thresholds"][0]["observed"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["thresholds"][0]["limit"].get<double>(), 2000);
  EXPECT_EQ(j["thresholds"][1]["failed"], true);
  EXPECT_EQ(j["thresholds_failed"], true);

  const std::string text = format_summary(r, {50, 99});
  EXPECT_NE(text.find("ended early by SIGINT"), std::string::npos) << text;
  EXPECT_NE(text.find("GET /a"), std::string::npos) << text;
  EXPECT_NE(text.find("http_503"), std::string::npos) << text;
  EXPECT_NE(text.find("p99>2ms"), std::string::npos) << text;
  EXPECT_NE(text.find("FAILED"), std::string::npos) << text;
  EXPECT_NE(text.find("passed"), std::string::npos) << text;
}

TEST(write_json, MembersOfARegistryTarget) {
  run_result r = sample_run();
  ringrpc::load::kind_result a, b;
  a.name = "127.0.0.1:7001";
  a.calls_ok = 5;
  a.latency_ns.record(2000);
  b.name = "[::1]:7002";
  b.calls_ok = 4;
  b.errors["closed"] = 3;
  b.latency_ns.record(9000);
  r.members = {a, b};

  std::ostringstream out;
  write_json(r, {50, 99}, out);
  const auto j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j["members"].size(), 2u);
  EXPECT_EQ(j["members"][0]["address"], "127.0.0.1:7001");
  EXPECT_EQ(j["members"][0]["calls_ok"], 5);
  EXPECT_EQ(j["members"][0]["error_total"], 0);
  EXPECT_NEAR(j["members"][0]["latency_us"]["p50"].get<double>(), 2, 0.01);
  EXPECT_EQ(j["members"][1]["errors"]["closed"], 3);
  EXPECT_EQ(j["members"][1]["error_total"], 3);
  EXPECT_NEAR(j["members"][1]["latency_us"]["p99"].get<double>(), 9, 0.01);

  const std::string text = format_summary(r, {50, 99});
  EXPECT_NE(text.find("member"), std::string::npos) << text;
  EXPECT_NE(text.find("127.0.0.1:7001"), std::string::npos) << text;
  EXPECT_NE(text.find("[::1]:7002"), std::string::npos) << text;

  r.members.clear();  // a host:port target: no members key at all
  std::ostringstream plain;
  write_json(r, {50, 99}, plain);
  EXPECT_FALSE(nlohmann::json::parse(plain.str()).contains("members"));
}

TEST(write_json, ClosedLoopHasNoServiceLatencyAndEmptyRunIsValid) {
  run_result r;
  std::ostringstream out;
  write_json(r, {99}, out);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_FALSE(j.contains("service_latency_us"));
  EXPECT_EQ(j["requested_rate"], 0.0);
  EXPECT_EQ(j["latency_us"]["p99"], 0.0);
  EXPECT_TRUE(j["spectrum"].empty());
  EXPECT_TRUE(j["errors"].is_object());
  EXPECT_TRUE(j["steps"].is_array());
}

TEST(read_plot_series, RoundTripsWriteJson) {
  const run_result r = sample_run();
  const auto path = temp_path("run-a.json");
  {
    std::ofstream f(path);
    write_json(r, default_percentiles(), f);
  }
  const plot_series back = read_plot_series(path.string());
  const plot_series direct = plot_series_from(r, "run-a");
  EXPECT_EQ(back.label, "run-a");
  EXPECT_EQ(back.spectrum, direct.spectrum);
  EXPECT_EQ(back.rate, direct.rate);
  ASSERT_EQ(back.rate.size(), 10u);
  EXPECT_EQ(back.rate[2], (std::pair<double, double>{2.0, 1002.0}));
}

TEST(read_plot_series, ClearErrors) {
  auto message = [](const std::string& path) -> std::string {
    try {
      read_plot_series(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  const std::string missing = temp_path("nope.json").string();
  EXPECT_TRUE(contains(message(missing), missing)) << message(missing);

  const auto bad = temp_path("bad.json");
  std::ofstream(bad) << "{ not json";
  EXPECT_TRUE(contains(message(bad.string()), "not valid JSON")) << message(bad.string());

  const auto other = temp_path("other.json");
  std::ofstream(other) << R"({"calls_ok": 1})";
  EXPECT_TRUE(contains(message(other.string()), "\"spectrum\"")) << message(other.string());

  const auto broken = temp_path("broken.json");
  std::ofstream(broken) << R"({"spectrum": [{"percentile": 50}]})";
  EXPECT_TRUE(contains(message(broken.string()), "latency_us")) << message(broken.string());
}

TEST(render_svg, SelfContainedWithBothPanelsAndEscapedLabels) {
  const run_result r = sample_run();
  const std::string svg = render_svg({plot_series_from(r, "a<b&c>"), plot_series_from(r, "baseline")});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_TRUE(contains(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(contains(svg, "latency by percentile"));
  EXPECT_TRUE(contains(svg, "calls/s over time"));
  EXPECT_TRUE(contains(svg, "a&lt;b&amp;c&gt;"));
  EXPECT_FALSE(contains(svg, "a<b"));
  EXPECT_TRUE(contains(svg, "baseline"));
  for (const char* tick : {">0%<", ">90%<", ">99%<", ">99.9%<", ">99.99%<", ">99.999%<"}) {
    EXPECT_TRUE(contains(svg, tick)) << tick;
  }
  EXPECT_FALSE(contains(svg, "<script"));
  EXPECT_FALSE(contains(svg, "href"));
  EXPECT_FALSE(contains(svg, "nan"));
  EXPECT_FALSE(contains(svg, "inf"));
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");

  // Tags balance (every element here is either self-closing or closed).
  std::size_t opens = 0, closes = 0, self = 0, pos = 0;
  while ((pos = svg.find('<', pos)) != std::string::npos) {
    const std::size_t end = svg.find('>', pos);
    ASSERT_NE(end, std::string::npos);
    if (svg[pos + 1] == '/') ++closes;
    else if (svg[end - 1] == '/') ++self;
    else ++opens;
    pos = end;
  }
  EXPECT_EQ(opens, closes);
  EXPECT_GT(self, 0u);

  // No series at all still draws the empty frame.
  const std::string empty = render_svg({});
  EXPECT_EQ(empty.rfind("<svg", 0), 0u);
  EXPECT_TRUE(contains(empty, "latency by percentile"));
}

TEST(run_result, MergedHistogramsReportWhatOneHistogramOfAllValuesWould) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> latency(std::log(80'000.0), 0.8);
  run_result a, b, all;
  for (int i = 0; i < 200'000; ++i) {
    const auto v = static_cast<std::uint64_t>(latency(rng));
    (i % 3 == 0 ? a : b).latency_ns.record(v);
    all.latency_ns.record(v);
  }
  run_result merged = a;
  merged.latency_ns.merge(b.latency_ns);
  ASSERT_EQ(merged.latency_ns.count(), all.latency_ns.count());
  for (const double p : {0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0}) {
    EXPECT_EQ(merged.latency_ns.value_at_percentile(p), all.latency_ns.value_at_percentile(p)) << p;
  }
  EXPECT_EQ(merged.latency_ns.min(), all.latency_ns.min());
  EXPECT_EQ(merged.latency_ns.max(), all.latency_ns.max());
  EXPECT_DOUBLE_EQ(merged.latency_ns.mean(), all.latency_ns.mean());
  EXPECT_EQ(plot_series_from(merged, "x").spectrum, plot_series_from(all, "x").spectrum);

  std::ostringstream jm, ja;
  write_json(merged, default_percentiles(), jm);
  write_json(all, default_percentiles(), ja);
  EXPECT_EQ(nlohmann::json::parse(jm.str())["latency_us"], nlohmann::json::parse(ja.str())["latency_us"]);
}

}  // namespace

namespace {

using ringrpc::load::judge_keep_up;
using ringrpc::load::step_result;

// A 1 s step at 10000 calls/s: 10000 scheduled, `issued` sent of which late_client and
// late_held went over 1 ms late, `answered` answered ok.
step_result step(std::uint64_t issued, std::uint64_t late_client, std::uint64_t late_held, std::uint64_t answered) {
  step_result s;
  s.requested_rate = 10000;
  s.duration_s = 1;
  s.scheduled = 10000;
  s.issued = issued;
  s.late_client = late_client;
  s.late_held = late_held;
  s.answered = answered;
  s.achieved_rate = static_cast<double>(answered);
  judge_keep_up(s);
  return s;
}

}  // namespace

TEST(judge_keep_up, OnTimeAndAnsweredWithinTheLimits) {
  EXPECT_TRUE(step(10000, 0, 0, 10000).kept_up);
  EXPECT_TRUE(step(10000, 60, 40, 10000).kept_up) << "1 % late is allowed";
  EXPECT_TRUE(step(9950, 40, 0, 9500).kept_up) << "99 % on time and 95 % answered";
  EXPECT_EQ(step(10000, 0, 0, 10000).reason, "");
}

TEST(judge_keep_up, LateSendsOverOnePercentNameWhoseDoingTheyWere) {
  const step_result client = step(10000, 101, 0, 10000);
  EXPECT_FALSE(client.kept_up);
  EXPECT_EQ(client.reason, "client_behind_schedule");
  const step_result held = step(10000, 30, 80, 10000);
  EXPECT_FALSE(held.kept_up);
  EXPECT_EQ(held.reason, "target_too_slow");
  // Calls never sent count against the 99 % as well.
  EXPECT_FALSE(step(9800, 0, 0, 9800).kept_up);
}

TEST(judge_keep_up, AnsweredRateOffByMoreThanFivePercentIsTheTarget) {
  const step_result short_answered = step(10000, 0, 0, 9400);  // errors, or replies never came
  EXPECT_FALSE(short_answered.kept_up);
  EXPECT_EQ(short_answered.reason, "target_too_slow");
  step_result nothing;
  judge_keep_up(nothing);
  EXPECT_FALSE(nothing.kept_up) << "a step with nothing scheduled did not keep up with anything";
}

// Poisson arrivals draw more or fewer calls than the mean: a step that answered every call it
// drew keeps up, however far the draw fell from the nominal rate; one answered short does not.
TEST(judge_keep_up, TheRateIsJudgedAgainstWhatTheStepScheduled) {
  step_result drawn_low;
  drawn_low.requested_rate = 10000;
  drawn_low.duration_s = 1;
  drawn_low.scheduled = drawn_low.issued = drawn_low.answered = 9400;  // 6 % under the mean
  drawn_low.achieved_rate = 9400;
  judge_keep_up(drawn_low);
  EXPECT_TRUE(drawn_low.kept_up) << drawn_low.reason;
  step_result short_of_drawn = drawn_low;
  short_of_drawn.answered = 8900;
  short_of_drawn.achieved_rate = 8900;
  judge_keep_up(short_of_drawn);
  EXPECT_FALSE(short_of_drawn.kept_up);
  EXPECT_EQ(short_of_drawn.reason, "target_too_slow");
}

TEST(render_svg, RequestedRateDrawnAsScheduledStepsAndPartialLastSecond) {
  run_result r = sample_run();
  r.measured_s = 9.5;
  r.per_second.back().width_s = 0.5;
  r.per_second.back().calls_ok = 400;
  const plot_series p = plot_series_from(r, "steps");
  ASSERT_EQ(p.requested_steps.size(), 2u);
  EXPECT_EQ(p.requested_steps[1], std::make_tuple(5.0, 10.0, 2000.0, 2000.0));
  EXPECT_TRUE(p.last_rate_partial);
  EXPECT_DOUBLE_EQ(p.rate.back().second, 800) << "a half second's calls are a rate over half a second";
  EXPECT_TRUE(contains(p.title, "9.5 s")) << p.title;

  const std::string svg = render_svg({p});
  // The requested series: two levels, four points (start and end of each step), not one flat line.
  const auto at = svg.find("data-label=\"steps requested (steps)\"");
  ASSERT_NE(at, std::string::npos) << svg;
  const auto pts_at = svg.find("points=\"", at) + 8;
  const std::string pts = svg.substr(pts_at, svg.find('"', pts_at) - pts_at);
  std::vector<std::pair<double, double>> xy;
  std::istringstream in(pts);
  double x = 0, y = 0;
  char comma = 0;
  while (in >> x >> comma >> y) xy.emplace_back(x, y);
  ASSERT_EQ(xy.size(), 4u) << pts;
  EXPECT_EQ(xy[0].second, xy[1].second);
  EXPECT_EQ(xy[2].second, xy[3].second);
  EXPECT_GT(xy[1].second, xy[2].second) << "the second step (2000/s) is drawn higher up";
  EXPECT_EQ(xy[1].first, xy[2].first) << "the steps meet at 5 s";
  EXPECT_TRUE(contains(svg, "class=\"partial\"")) << svg;

  // Read back from the JSON: the same steps, widths and title.
  const auto path = temp_path("steps.json");
  {
    std::ofstream f(path);
    write_json(r, default_percentiles(), f);
  }
  const plot_series back = read_plot_series(path.string());
  EXPECT_EQ(back.requested_steps, p.requested_steps);
  EXPECT_EQ(back.rate, p.rate);
  EXPECT_TRUE(back.last_rate_partial);
  EXPECT_EQ(back.title, p.title);
}

// A --rate-ramp segment is a step whose requested rate is drawn slanted, from its start rate to
// its end rate, and read back so from the JSON (ramp_from, ramp_to).
TEST(render_svg, RampSegmentDrawnSlantedAndReadBackFromJson) {
  run_result r = sample_run();
  r.steps[1].ramp_from = 1000;
  r.steps[1].ramp_to = 3000;
  const plot_series p = plot_series_from(r, "ramp");
  ASSERT_EQ(p.requested_steps.size(), 2u);
  EXPECT_EQ(std::get<2>(p.requested_steps[1]), 1000.0);
  EXPECT_EQ(std::get<3>(p.requested_steps[1]), 3000.0);
  const std::string svg = render_svg({p});
  const auto at = svg.find("data-label=\"ramp requested (steps)\"");
  ASSERT_NE(at, std::string::npos) << svg;
  const auto pts_at = svg.find("points=\"", at) + 8;
  std::istringstream in(svg.substr(pts_at, svg.find('"', pts_at) - pts_at));
  std::vector<std::pair<double, double>> xy;
  double x = 0, y = 0;
  char comma = 0;
  while (in >> x >> comma >> y) xy.emplace_back(x, y);
  ASSERT_EQ(xy.size(), 4u);
  EXPECT_GT(xy[2].second, xy[3].second) << "the ramp climbs (SVG y grows downwards)";

  const auto path = temp_path("ramp.json");
  {
    std::ofstream f(path);
    write_json(r, default_percentiles(), f);
  }
  EXPECT_EQ(read_plot_series(path.string()).requested_steps, p.requested_steps);
}

// --live and --metrics-port (tools/load/live_output.hpp): merging the workers' seconds, the
// JSON line and the Prometheus page, without the engine. A real run's lines and page are
// checked in load_cli_test.sh.

#include "live_output.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace ringrpc::load {
namespace {

live_second second(std::int64_t index, std::uint64_t ok, std::vector<std::uint64_t> latencies_ns,
                   std::map<std::string, std::uint64_t> errors = {}) {
  live_second s;
  s.index = index;
  s.calls_ok = ok;
  for (const auto v : latencies_ns) s.latency.record(v);
  s.errors = std::move(errors);
  s.connections_open = 2;
  return s;
}

std::vector<nlohmann::json> lines_of(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::vector<nlohmann::json> out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), f) != nullptr) out.push_back(nlohmann::json::parse(buf));
  return out;
}

TEST(live_output, a_second_is_written_once_every_worker_handed_it_over) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  live_counters a, b;
  const std::vector<live_counters*> live = {&a, &b};
  live_output out(f, {});
  a.seconds.push_back(second(0, 10, {1000, 2000}, {{"timeout", 1}}));
  out.collect(live);
  EXPECT_TRUE(lines_of(f).empty()) << "worker b has not handed second 0 over";
  b.seconds.push_back(second(0, 5, {3000}, {{"timeout", 2}, {"http_503", 1}}));
  a.seconds.push_back(second(1, 7, {5000}));
  out.collect(live);
  auto lines = lines_of(f);
  ASSERT_EQ(lines.size(), 1u);
  const auto& l = lines[0];
  EXPECT_EQ(l["t_s"], 1.0);
  EXPECT_EQ(l["calls_ok"], 15);
  EXPECT_EQ(l["calls_per_s"], 15.0);
  EXPECT_EQ(l["errors"], 4);
  EXPECT_EQ(l["error_kinds"]["timeout"], 3);
  EXPECT_EQ(l["error_kinds"]["http_503"], 1);
  EXPECT_EQ(l["connections"], 4);
  EXPECT_FALSE(l.contains("requested_per_s")) << "a closed loop requests no rate";
  EXPECT_NEAR(l["latency_us"]["p50"].get<double>(), 2.0, 0.1);
  EXPECT_NEAR(l["latency_us"]["max"].get<double>(), 3.0, 0.1);
  // At the end, a second only one worker has counted is whole; the last is as wide as the
  // report says.
  out.collect_rest(live);
  run_result r;
  r.per_second.resize(2);
  r.per_second[1].width_s = 0.5;
  out.finish(r);
  lines = lines_of(f);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["t_s"], 1.5);
  EXPECT_EQ(lines[1]["calls_ok"], 7);
  EXPECT_EQ(lines[1]["calls_per_s"], 14.0);
  EXPECT_TRUE(a.seconds.empty() && b.seconds.empty()) << "taken seconds are not kept";
  std::fclose(f);
}

// A worker that finished early (its -n quota used, or none given) holds no second back: the
// others' seconds are written as they end. A second only finished workers had may be cut
// short, so it waits for the run's end and the report's width.
TEST(live_output, a_finished_worker_holds_no_second_back) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  live_counters a, b;
  const std::vector<live_counters*> live = {&a, &b};
  live_output out(f, {});
  live_second last = second(0, 3, {1000});
  last.final = true;  // a's last hand-over: second 0 may be cut short for a
  a.seconds.push_back(last);
  a.finished = true;
  out.collect(live);
  EXPECT_TRUE(lines_of(f).empty()) << "b has not handed second 0 over";
  b.seconds.push_back(second(0, 5, {2000}));
  b.seconds.push_back(second(1, 6, {2000}));
  out.collect(live);
  auto lines = lines_of(f);
  ASSERT_EQ(lines.size(), 2u) << "a finished: seconds 0 and 1 are whole with b's";
  EXPECT_EQ(lines[0]["calls_ok"], 8);
  EXPECT_EQ(lines[0]["t_s"], 1.0);
  EXPECT_EQ(lines[1]["calls_ok"], 6);
  live_second cut = second(2, 1, {2000});
  cut.final = true;
  b.seconds.push_back(cut);
  b.finished = true;
  out.collect(live);
  EXPECT_EQ(lines_of(f).size(), 2u) << "second 2 only finished workers had: its width is the report's";
  out.collect_rest(live);
  run_result r;
  r.per_second.resize(3);
  r.per_second[2].width_s = 0.25;
  out.finish(r);
  lines = lines_of(f);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["t_s"], 2.25);
  EXPECT_EQ(lines[2]["calls_per_s"], 4.0);
  std::fclose(f);
}

TEST(live_output, open_loop_lines_say_the_requested_rate) {
  const std::vector<rate_step> steps = {{100, 2'000'000'000, -1}, {0, 2'000'000'000, 400}};
  EXPECT_EQ(scheduled_rate_at(steps, 0.5), 100);
  EXPECT_EQ(scheduled_rate_at(steps, 3.0), 200) << "halfway up the ramp";
  EXPECT_EQ(scheduled_rate_at(steps, 9.0), 400) << "past the end: the last rate";
  EXPECT_EQ(scheduled_rate_at({}, 0.5), -1);
  live_figures f;
  f.requested_rate = 250;
  f.calls_ok = 3;
  EXPECT_EQ(nlohmann::json::parse(live_json_line(f))["requested_per_s"], 250.0);
}

TEST(live_output, prometheus_page_has_totals_and_the_last_second) {
  live_figures last;
  last.calls_ok = 40;
  last.width_s = 0.5;
  last.p99_ns = 2'000'000;
  last.connections_open = 8;
  last.requested_rate = 100;
  const std::string page = live_prometheus_text(last, 1234, {{"timeout", 3}}, 7.5);
  EXPECT_NE(page.find("# TYPE ringrpc_load_calls_total counter\nringrpc_load_calls_total 1234\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_errors_total{kind=\"timeout\"} 3\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_calls_per_second 80\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_requested_calls_per_second 100\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_latency_seconds{percentile=\"99\"} 0.002\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_connections_open 8\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_load_elapsed_seconds 7.5\n"), std::string::npos) << page;
}

}  // namespace
}  // namespace ringrpc::load

// The target's CPU per call (--server-pid, --server-metrics): reading /proc/PID/stat and a
// Prometheus page, and the arithmetic over samples with a made-up clock.
#include "server_cost.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace {

using namespace ringrpc::load;
using point = server_cost_meter::point;

TEST(ServerCost, ProcStatTicksCountFromTheLastParenthesis) {
  // A command name with spaces and ')' in it must not shift the fields.
  const std::string stat =
      "1234 (a) b) c) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 3 0 100 1000 200 0";
  EXPECT_EQ(parse_proc_stat_ticks(stat), 325u);
  EXPECT_THROW(parse_proc_stat_ticks("1234 no parenthesis"), std::runtime_error);
  EXPECT_THROW(parse_proc_stat_ticks("1234 (x) S 1 2"), std::runtime_error);
  EXPECT_THROW(parse_proc_stat_ticks("1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 7"), std::runtime_error);
}

TEST(ServerCost, OwnProcessIsReadable) {
  const cpu_reader r = pid_cpu_reader(::getpid());
  EXPECT_GE(r(), 0.0);
  EXPECT_THROW(pid_cpu_reader(0), std::invalid_argument);
}

TEST(ServerCost, PrometheusPageValue) {
  EXPECT_DOUBLE_EQ(parse_process_cpu_seconds("# HELP process_cpu_seconds_total CPU.\n"
                                             "# TYPE process_cpu_seconds_total counter\n"
                                             "process_cpu_seconds_total_other 99\n"
                                             "process_cpu_seconds_total 12.5\n"),
                   12.5);
  // Series with labels add up; a timestamp after the value is not part of it.
  EXPECT_DOUBLE_EQ(parse_process_cpu_seconds("process_cpu_seconds_total{worker=\"a\"} 1.25 1700000000000\n"
                                             "process_cpu_seconds_total{worker=\"b\"} 2e0\n"),
                   3.25);
  EXPECT_THROW(parse_process_cpu_seconds("up 1\n"), std::runtime_error);
  EXPECT_THROW(parse_process_cpu_seconds("process_cpu_seconds_total x\n"), std::runtime_error);
  EXPECT_THROW(parse_process_cpu_seconds("process_cpu_seconds_total{a=\"b\" 1\n"), std::runtime_error);
}

TEST(ServerCost, WindowFromTheSamplesAroundIt) {
  // Warm-up 1 s, 3 s measured; a sample at start, one a second (a little late), one after the end.
  const std::vector<point> samples = {{0.0, 10.0}, {1.02, 10.5}, {2.02, 12.5}, {3.03, 14.0}, {4.02, 16.0}, {4.5, 16.1}};
  const server_cost c = server_cost_meter::compute("pid 1", samples, 1.0, 3.0, 30000);
  EXPECT_EQ(c.note, "");
  EXPECT_DOUBLE_EQ(c.window_s, 3.0);  // 1.02 .. 4.02
  EXPECT_DOUBLE_EQ(c.cpu_s, 5.5);
  EXPECT_NEAR(c.cores, 5.5 / 3.0, 1e-9);
  // 10,000 calls/s at 1.83 cores: 183 µs of server CPU per call.
  EXPECT_NEAR(c.cpu_us_per_call, 5.5 / 3.0 / 10000 * 1e6, 1e-6);
  ASSERT_EQ(c.per_second_cores.size(), 3u);
  EXPECT_NEAR(c.per_second_cores[0], 2.0, 1e-9);
  EXPECT_NEAR(c.per_second_cores[1], 1.5 / 1.01, 1e-9);
  EXPECT_NEAR(c.per_second_cores[2], 2.0 / 0.99, 1e-9);
}

TEST(ServerCost, ShortRunUsesTheFinalSample) {
  // No warm-up, 0.5 s measured: the only samples are the start and the end.
  const server_cost c = server_cost_meter::compute("u", {{0.0, 1.0}, {0.55, 1.3}}, 0.0, 0.5, 500);
  EXPECT_EQ(c.note, "");
  EXPECT_NEAR(c.cores, 0.3 / 0.55, 1e-9);
  EXPECT_EQ(c.per_second_cores.size(), 1u);
}

TEST(ServerCost, NoFigureWithoutSamplesOrCalls) {
  EXPECT_NE(server_cost_meter::compute("u", {{0.0, 1.0}}, 0.0, 1.0, 10).note, "");
  EXPECT_NE(server_cost_meter::compute("u", {{0.0, 1.0}, {1.0, 2.0}}, 0.0, 1.0, 0).note, "");
}

TEST(ServerCost, APidThatDidNoWorkIsNamedNotMeasured) {
  // timeout(1)'s PID instead of the server's: its CPU time stands still while calls are answered.
  const std::vector<point> idle = {{0.0, 0.01}, {1.0, 0.01}, {2.0, 0.01}};
  const server_cost c = server_cost_meter::compute("pid 7", idle, 0.0, 2.0, 400000);
  EXPECT_NE(c.note.find("pid 7 spent no CPU time while 400000 calls were answered"), std::string::npos) << c.note;
  EXPECT_EQ(c.cpu_us_per_call, 0);
  // A few calls may cost less than a tick: that is a measurement (zero), not a wrong PID.
  EXPECT_EQ(server_cost_meter::compute("pid 7", idle, 0.0, 2.0, 500).note, "");
  // Any CPU at all over the window is a figure, however small.
  const server_cost busy = server_cost_meter::compute("pid 8", {{0.0, 1.0}, {2.0, 1.01}}, 0.0, 2.0, 400000);
  EXPECT_EQ(busy.note, "");
  EXPECT_NEAR(busy.cpu_us_per_call, 0.01 / 2.0 / 200000 * 1e6, 1e-9);
}

TEST(ServerCost, AFailingSampleIsReportedNotThrown) {
  int calls = 0;
  server_cost_meter m("pid 9", [&calls]() -> double {
    if (++calls > 1) throw std::runtime_error("cannot read /proc/9/stat");
    return 1.0;
  });
  m.start();
  m.sample(1.0);
  m.finish();
  const server_cost c = m.result(0.0, 1.0, 100);
  EXPECT_NE(c.note.find("cannot read /proc/9/stat"), std::string::npos) << c.note;
  EXPECT_NE(format_server_cost(c).find("cannot read"), std::string::npos);
  EXPECT_TRUE(server_cost_json(c).contains("note"));
}

}  // namespace

// The Prometheus text exposition and JSON writers: exact format details, histograms folded from
// HdrHistogram-layout histograms, and an end-to-end scrape over HTTP checked by `promtool check
// metrics` when promtool is installed (Debian: prometheus).

#include "ops/prometheus_text.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/admin_server.hpp"
#include "base/latency_histogram.hpp"

using namespace ringrpc::detail;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

histogram_value three_buckets(std::uint64_t a, std::uint64_t b, std::uint64_t over, double sum) {
  histogram_value h;
  h.upper_bounds = {0.1, 1.0};
  h.bucket_counts = {a, b, over};
  h.count = a + b + over;
  h.sum = sum;
  return h;
}

// The path of promtool, or empty: $PROMTOOL, else the first `promtool` on PATH.
std::string find_promtool() {
  if (const char* p = std::getenv("PROMTOOL"); p != nullptr && *p != '\0') return p;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    const std::string candidate = (dir.empty() ? "." : dir) + "/promtool";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

struct tool_result {
  int exit_code = -1;
  std::string output;
};

// Runs `promtool check metrics` with `exposition` on its stdin.
tool_result promtool_check(const std::string& promtool, const std::string& exposition) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in_path = (dir / ("ringrpc_prom_" + std::to_string(::getpid()) + ".txt")).string();
  {
    std::ofstream f(in_path, std::ios::binary);
    f << exposition;
  }
  const std::string cmd = "'" + promtool + "' check metrics < '" + in_path + "' 2>&1";
  tool_result r;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::filesystem::remove(in_path);
  return r;
}

std::string http_get(std::uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return {};
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

}  // namespace

TEST(PrometheusText, CounterAndGaugeWithHelpAndTypeOnce) {
  metrics_snapshot s;
  s.counter("ringrpc_calls_received_total", "Calls received.").add(3, {{"method", "echo"}}).add(4, {{"method", "sleep"}});
  s.gauge("ringrpc_open_connections", "Connections open now.").add(2);
  EXPECT_EQ(to_prometheus_text(s),
            "# HELP ringrpc_calls_received_total Calls received.\n"
            "# TYPE ringrpc_calls_received_total counter\n"
            "ringrpc_calls_received_total{method=\"echo\"} 3\n"
            "ringrpc_calls_received_total{method=\"sleep\"} 4\n"
            "# HELP ringrpc_open_connections Connections open now.\n"
            "# TYPE ringrpc_open_connections gauge\n"
            "ringrpc_open_connections 2\n");
}

TEST(PrometheusText, SamplesOfOneNameStayGroupedWhateverTheOrderOfFilling) {
  metrics_snapshot s;
  s.counter("a_total", "A.").add(1, {{"k", "1"}});
  s.gauge("b", "B.").add(1);
  s.counter("a_total", "A.").add(2, {{"k", "2"}});
  const std::string text = to_prometheus_text(s);
  EXPECT_EQ(text,
            "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"1\"} 1\na_total{k=\"2\"} 2\n"
            "# HELP b B.\n# TYPE b gauge\nb 1\n");
}

TEST(PrometheusText, Escaping) {
  metrics_snapshot s;
  s.gauge("g", "Help with \\ backslash\nand newline and \"quotes\".")
      .add(1, {{"peer", "a\\b\"c\nd"}, {"utf8", "caf\xc3\xa9"}});
  EXPECT_EQ(to_prometheus_text(s),
            "# HELP g Help with \\\\ backslash\\nand newline and \"quotes\".\n"
            "# TYPE g gauge\n"
            "g{peer=\"a\\\\b\\\"c\\nd\",utf8=\"caf\xc3\xa9\"} 1\n");
}

TEST(PrometheusText, NumberSpellings) {
  metrics_snapshot s;
  auto& f = s.gauge("g", "G.");
  f.add(0.25, {{"v", "quarter"}});
  f.add(1e-05, {{"v", "small"}});
  f.add(12345678901234.0, {{"v", "big"}});
  f.add(std::numeric_limits<double>::infinity(), {{"v", "inf"}});
  f.add(-std::numeric_limits<double>::infinity(), {{"v", "ninf"}});
  f.add(std::numeric_limits<double>::quiet_NaN(), {{"v", "nan"}});
  f.add(-3, {{"v", "neg"}});
  const std::string text = to_prometheus_text(s);
  EXPECT_THAT(text, HasSubstr("g{v=\"quarter\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"small\"} 1e-05\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"big\"} 12345678901234\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"inf\"} +Inf\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"ninf\"} -Inf\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"nan\"} NaN\n"));
  EXPECT_THAT(text, HasSubstr("g{v=\"neg\"} -3\n"));
}

TEST(PrometheusText, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  metrics_snapshot s;
  s.histogram("ringrpc_rpc_processing_seconds", "Processing time.")
      .add(three_buckets(2, 3, 1, 4.5), {{"method", "echo"}});
  EXPECT_EQ(to_prometheus_text(s),
            "# HELP ringrpc_rpc_processing_seconds Processing time.\n"
            "# TYPE ringrpc_rpc_processing_seconds histogram\n"
            "ringrpc_rpc_processing_seconds_bucket{method=\"echo\",le=\"0.1\"} 2\n"
            "ringrpc_rpc_processing_seconds_bucket{method=\"echo\",le=\"1\"} 5\n"
            "ringrpc_rpc_processing_seconds_bucket{method=\"echo\",le=\"+Inf\"} 6\n"
            "ringrpc_rpc_processing_seconds_sum{method=\"echo\"} 4.5\n"
            "ringrpc_rpc_processing_seconds_count{method=\"echo\"} 6\n");
}

TEST(PrometheusText, RejectsWhatPrometheusWouldNot) {
  metrics_snapshot s;
  EXPECT_THROW(s.counter("calls", "no _total"), std::invalid_argument);
  EXPECT_THROW(s.gauge("9lives", "bad start"), std::invalid_argument);
  EXPECT_THROW(s.gauge("has-dash", "bad char"), std::invalid_argument);
  EXPECT_THROW(s.histogram("x_bucket", "reserved suffix"), std::invalid_argument);
  s.gauge("g", "G.");
  EXPECT_THROW(s.counter("g", "G."), std::invalid_argument);  // same name, other type

  metrics_snapshot bad_label;
  bad_label.gauge("g", "G.").add(1, {{"bad-name", "x"}});
  EXPECT_THROW(to_prometheus_text(bad_label), std::invalid_argument);
  metrics_snapshot reserved;
  reserved.gauge("g", "G.").add(1, {{"__name__", "x"}});
  EXPECT_THROW(to_prometheus_text(reserved), std::invalid_argument);
  metrics_snapshot twice;
  twice.gauge("g", "G.").add(1, {{"a", "x"}, {"a", "y"}});
  EXPECT_THROW(to_prometheus_text(twice), std::invalid_argument);
  metrics_snapshot le;
  le.histogram("h", "H.").add(three_buckets(1, 1, 1, 1), {{"le", "1"}});
  EXPECT_THROW(to_prometheus_text(le), std::invalid_argument);
  metrics_snapshot sum_mismatch;
  histogram_value h = three_buckets(1, 1, 1, 1);
  h.count = 4;
  sum_mismatch.histogram("h", "H.").add(h);
  EXPECT_THROW(to_prometheus_text(sum_mismatch), std::invalid_argument);
  metrics_snapshot unordered;
  histogram_value u = three_buckets(1, 1, 1, 1);
  u.upper_bounds = {1.0, 0.5};
  unordered.histogram("h", "H.").add(u);
  EXPECT_THROW(to_prometheus_text(unordered), std::invalid_argument);
}

TEST(PrometheusText, HistogramFromLatencyHistogram) {
  latency_histogram h;
  h.record(10'000);         // exactly 10 µs: in le=1e-05
  h.record(9'000);          // below
  h.record(10'700);         // above 10 µs by more than the HDR resolution: in le=2.5e-05
  h.record(3'000'000);      // 3 ms: le=0.005
  h.record(20'000'000'000); // 20 s: above every bound
  const histogram_value v = histogram_from(h);
  ASSERT_EQ(v.upper_bounds.size(), 19u);
  ASSERT_EQ(v.bucket_counts.size(), 20u);
  EXPECT_DOUBLE_EQ(v.upper_bounds.front(), 10e-6);
  EXPECT_DOUBLE_EQ(v.upper_bounds.back(), 10.0);
  EXPECT_EQ(v.bucket_counts[0], 2u);   // le 10 µs
  EXPECT_EQ(v.bucket_counts[1], 1u);   // le 25 µs
  EXPECT_EQ(v.bucket_counts[8], 1u);   // le 5 ms
  EXPECT_EQ(v.bucket_counts[19], 1u);  // +Inf
  EXPECT_EQ(v.count, 5u);
  EXPECT_NEAR(v.sum, 20.003029, 0.02);
  ASSERT_EQ(v.quantiles.size(), 4u);
  EXPECT_DOUBLE_EQ(v.quantiles[0].first, 0.5);
  EXPECT_NEAR(v.quantiles[0].second, 10.7e-6, 0.1e-6);  // the 3rd of 5 values
  EXPECT_NEAR(v.quantiles[3].second, 20.0, 0.05);

  metrics_snapshot s;
  s.histogram("lat_seconds", "L.").add(v);
  const std::string text = to_prometheus_text(s);
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"1e-05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"2.5e-05\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"10\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"+Inf\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_count 5\n"));
}

TEST(PrometheusText, HistogramFromBuckets) {
  // A coarse source histogram in ns: 3 values from 9 µs, 1 from 40 µs, 2 from 20 s.
  const std::vector<source_bucket> b = {{9'000, 3}, {40'000, 1}, {45'000, 0}, {20'000'000'000, 2}};
  const histogram_value v = histogram_from_buckets(b, 40'000'067'000.0);
  EXPECT_EQ(v.count, 6u);
  EXPECT_EQ(v.bucket_counts[0], 3u);   // le 10 µs
  EXPECT_EQ(v.bucket_counts[2], 1u);   // le 50 µs
  EXPECT_EQ(v.bucket_counts[19], 2u);  // +Inf
  EXPECT_DOUBLE_EQ(v.sum, 40.000067);
  ASSERT_EQ(v.quantiles.size(), 4u);
  EXPECT_DOUBLE_EQ(v.quantiles[0].second, 9e-6);  // 3rd of 6
  EXPECT_DOUBLE_EQ(v.quantiles[1].second, 20.0);  // 6th of 6 (ceil(5.4))
  metrics_snapshot s;
  EXPECT_NO_THROW(s.histogram("h_seconds", "H.").add(v));
  EXPECT_NO_THROW((void)to_prometheus_text(s));
  EXPECT_EQ(histogram_from_buckets({}, 0).count, 0u);
}

TEST(PrometheusText, EmptyHistogram) {
  const latency_histogram h;
  const histogram_value v = histogram_from(h);
  EXPECT_EQ(v.count, 0u);
  EXPECT_EQ(v.sum, 0.0);
  metrics_snapshot s;
  s.histogram("lat_seconds", "L.").add(v);
  EXPECT_THAT(to_prometheus_text(s), HasSubstr("lat_seconds_bucket{le=\"+Inf\"} 0\nlat_seconds_sum 0\nlat_seconds_count 0\n"));
}

TEST(MetricsJson, SameSnapshotAsJson) {
  metrics_snapshot s;
  s.counter("c_total", "C.").add(7, {{"method", "echo"}});
  s.gauge("g", "G.").add(0.5);
  histogram_value h = three_buckets(1, 2, 0, 0.75);
  h.quantiles = {{0.5, 0.2}, {0.999, 0.9}};
  s.histogram("h_seconds", "H.").add(h);
  const auto j = nlohmann::json::parse(to_json(s));
  EXPECT_EQ(j["c_total"]["type"], "counter");
  EXPECT_EQ(j["c_total"]["help"], "C.");
  EXPECT_EQ(j["c_total"]["samples"][0]["labels"]["method"], "echo");
  EXPECT_TRUE(j["c_total"]["samples"][0]["value"].is_number_unsigned());
  EXPECT_EQ(j["c_total"]["samples"][0]["value"], 7);
  EXPECT_EQ(j["g"]["samples"][0]["value"], 0.5);
  const auto& hs = j["h_seconds"]["samples"][0];
  EXPECT_EQ(hs["count"], 3);
  EXPECT_EQ(hs["sum"], 0.75);
  ASSERT_EQ(hs["buckets"].size(), 3u);
  EXPECT_EQ(hs["buckets"][0]["le"], 0.1);
  EXPECT_EQ(hs["buckets"][1]["count"], 3);
  EXPECT_EQ(hs["buckets"][2]["le"], "+Inf");
  EXPECT_EQ(hs["quantiles"]["0.5"], 0.2);
  EXPECT_EQ(hs["quantiles"]["0.999"], 0.9);
}

TEST(MetricsJson, InvalidUtf8InLabelsDoesNotBreakThePage) {
  metrics_snapshot s;
  s.gauge("g", "G.").add(1, {{"peer", "bad\xff"}});
  EXPECT_TRUE(nlohmann::json::accept(to_json(s)));
}

// A snapshot shaped like the server's (Hadoop rpcMetrics names where they fit), served by the
// admin server, scraped over HTTP, checked by promtool; values move between two scrapes.
TEST(PrometheusText, ScrapedExpositionPassesPromtool) {
  std::atomic<std::uint64_t> calls{0};
  latency_histogram queue_time;
  std::mutex m;
  auto build = [&] {
    metrics_snapshot s;
    s.counter("ringrpc_rpc_calls_received_total", "Calls received (Hadoop: RpcQueueTimeNumOps).")
        .add(static_cast<double>(calls.load()), {{"method", "echo"}});
    s.counter("ringrpc_rpc_calls_failed_total", "Calls answered with an error status.")
        .add(0, {{"status", "server_busy"}})
        .add(0, {{"status", "deadline_exceeded"}});
    s.gauge("ringrpc_rpc_call_queue_length", "Calls waiting for a thread (Hadoop: CallQueueLength).").add(0);
    s.gauge("ringrpc_open_connections", "Connections open now (Hadoop: NumOpenConnections).").add(1);
    s.counter("ringrpc_received_bytes_total", "Bytes read from clients (Hadoop: ReceivedBytes).").add(1234);
    std::lock_guard lock(m);
    s.histogram("ringrpc_rpc_queue_time_seconds", "Time calls waited for a thread (Hadoop: RpcQueueTime).")
        .add(histogram_from(queue_time), {{"pool", "default"}});
    return s;
  };

  admin_server server;
  server.route("/metrics", [&] {
    return http_response{200, std::string(prometheus_content_type), to_prometheus_text(build())};
  });
  server.route("/metrics.json", [&] { return http_response{200, "application/json", to_json(build())}; });
  server.start();

  const std::string first = http_get(server.port(), "/metrics");
  ASSERT_THAT(first, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(first, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8"));
  EXPECT_THAT(first, HasSubstr("ringrpc_rpc_calls_received_total{method=\"echo\"} 0\n"));

  calls += 42;
  {
    std::lock_guard lock(m);
    for (int i = 0; i < 42; ++i) queue_time.record(50'000);
  }
  const std::string second = http_get(server.port(), "/metrics");
  const std::string body = second.substr(second.find("\r\n\r\n") + 4);
  EXPECT_THAT(body, HasSubstr("ringrpc_rpc_calls_received_total{method=\"echo\"} 42\n"));
  EXPECT_THAT(body, HasSubstr("ringrpc_rpc_queue_time_seconds_bucket{pool=\"default\",le=\"5e-05\"} 42\n"));
  EXPECT_THAT(body, Not(HasSubstr("ringrpc_rpc_calls_received_total{method=\"echo\"} 0\n")));

  const std::string json = http_get(server.port(), "/metrics.json");
  const auto j = nlohmann::json::parse(json.substr(json.find("\r\n\r\n") + 4));
  EXPECT_EQ(j["ringrpc_rpc_calls_received_total"]["samples"][0]["value"], 42);
  server.stop();

  const std::string promtool = find_promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not found (Debian package: prometheus); format not linted";
  const tool_result r = promtool_check(promtool, body);
  EXPECT_EQ(r.exit_code, 0) << r.output << "\n--- exposition ---\n" << body;
  EXPECT_EQ(r.output, "") << body;

  // And promtool does catch what it should, so the check above means something.
  const tool_result bad = promtool_check(promtool, "# TYPE calls counter\ncalls 1\n");
  EXPECT_NE(bad.output, "");
}

TEST(PrometheusText, LabelValuesAreAlwaysValidUtf8) {
  // The format is UTF-8 and one bad byte makes a scraper reject the whole page.
  metrics_snapshot s;
  s.counter("x_total", "X \xff.")
      .add(1, {{"method", "echo.\xff"}})
      .add(2, {{"method", "bad\xc3\x28"}})
      .add(3, {{"method", "surrogate\xed\xa0\x80"}})
      .add(4, {{"method", "ok \xc3\xa9 \xf0\x9f\x99\x82"}})
      .add(5, {{"method", "q\"b\\n\n"}});
  EXPECT_EQ(to_prometheus_text(s),
            "# HELP x_total X \xEF\xBF\xBD.\n"
            "# TYPE x_total counter\n"
            "x_total{method=\"echo.\xEF\xBF\xBD\"} 1\n"
            "x_total{method=\"bad\xEF\xBF\xBD(\"} 2\n"
            "x_total{method=\"surrogate\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"} 3\n"
            "x_total{method=\"ok \xc3\xa9 \xf0\x9f\x99\x82\"} 4\n"
            "x_total{method=\"q\\\"b\\\\n\\n\"} 5\n");
  const std::string promtool = find_promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian: prometheus)";
  const tool_result r = promtool_check(promtool, to_prometheus_text(s));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Running ringrpc in production, over loopback: the admin pages (/metrics checked by promtool
// when it is installed), readiness while draining, the event bus wiring, idle timeout, max
// connections, the in-flight cap, configuration applied to a server, and a quiet stop.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ops/admin_server.hpp"
#include "log/log.hpp"
#include "log/event_log.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/event_bus.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"
#include "uring/uring_probe.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::http_get;
using test::within;

/// The value of an unlabelled sample, or of the first sample whose line starts with `prefix`.
double sample(const std::string& text, const std::string& prefix) {
  std::size_t pos = 0;
  while ((pos = text.find(prefix, pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      const auto sp = text.find(' ', pos + prefix.size());
      const auto eol = text.find('\n', sp);
      return std::stod(text.substr(sp + 1, eol - sp - 1));
    }
    pos += prefix.size();
  }
  return -1;
}

std::string find_promtool() {
  if (const char* p = std::getenv("PROMTOOL"); p != nullptr && *p != '\0') return p;
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    const std::string c = std::string(dir) + "/promtool";
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return {};
}

std::pair<int, std::string> promtool_check(const std::string& promtool, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("ringrpc_ops_" + std::to_string(::getpid()) + ".prom");
  std::ofstream(path) << text;
  const std::string cmd = promtool + " check metrics < " + path.string() + " 2>&1";
  std::string out;
  int rc = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    rc = ::pclose(p);
  }
  std::filesystem::remove(path);
  return {rc, out};
}

server_config admin_config() {
  server_config cfg;
  cfg.server.readers = 1;
  cfg.server.handlers = 2;
  cfg.admin.enabled = true;
  cfg.admin.port = 0;
  return cfg;
}

TEST(admin, metrics_move_with_calls_and_pass_promtool) {
  const auto made = make_server(admin_config());
  server& s = *made;
  add_builtin_methods(s);
  s.start();
  ASSERT_NE(admin_port(s), 0);
  auto [code0, before] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(code0, 200);
  EXPECT_NE(before.find("# TYPE ringrpc_rpc_processing_time_seconds histogram"), std::string::npos);
  auto c = client::connect("127.0.0.1", s.port());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.call("echo", "hello", within(5s)).ok());
  EXPECT_EQ(c.call("nothing.here", "x", within(5s)).code, status::unknown_method);
  auto [code1, after] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(code1, 200);
  EXPECT_EQ(sample(before, "ringrpc_rpc_calls_received_total"), 0);
  EXPECT_EQ(sample(after, "ringrpc_rpc_calls_received_total"), 51);
  EXPECT_EQ(sample(after, "ringrpc_rpc_calls_completed_total{status=\"ok\"}"), 50);
  EXPECT_EQ(sample(after, "ringrpc_rpc_calls_rejected_total{path=\"unknown_method\"}"), 1);
  EXPECT_EQ(sample(after, "ringrpc_rpc_method_calls_total{method=\"echo\",status=\"ok\"}"), 50);
  // Times are sampled (one call in 8 per thread); counts are exact.
  EXPECT_GE(sample(after, "ringrpc_rpc_processing_time_seconds_count"), 50 / 8);
  EXPECT_LE(sample(after, "ringrpc_rpc_processing_time_seconds_count"), 50);
  EXPECT_EQ(sample(after, "ringrpc_rpc_queue_time_seconds_count"),
            sample(after, "ringrpc_rpc_processing_time_seconds_count"));
  EXPECT_EQ(sample(after, "ringrpc_open_connections"), 1);
  EXPECT_GT(sample(after, "ringrpc_received_bytes_total"), 50 * 5);

  const auto [jcode, json] = http_get(admin_port(s), "/metrics.json");
  ASSERT_EQ(jcode, 200);
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["ringrpc_rpc_calls_received_total"]["type"], "counter");
  EXPECT_TRUE(j["ringrpc_rpc_processing_time_seconds"]["samples"][0].contains("quantiles"));

  const std::string promtool = find_promtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not installed (Debian: prometheus); exposition not linted";
  }
  const auto [rc, out] = promtool_check(promtool, after);
  EXPECT_EQ(rc, 0) << out;
}

TEST(admin, hostile_method_names_neither_grow_the_metrics_nor_break_the_page) {
  const auto made = make_server(admin_config());
  server& s = *made;
  add_builtin_methods(s);
  s.add_method("a.b", [](call_context& ctx) { ctx.reply("ab"); });  // a dotted name of its own
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  ASSERT_TRUE(c.call("echo", "x", within(5s)).ok());
  ASSERT_TRUE(c.call("a.b", "x", within(5s)).ok());
  const auto [code0, baseline] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(code0, 200);

  // "echo.<anything>" reaches echo: these are all answered, and each is a name the caller made up.
  std::vector<std::string> names = {
      "echo." + std::string(4096, 'n'), "echo.\xff", "echo.\xc3\x28", "echo.\"quoted\"",
      "echo.back\\slash",           "echo.new\nline", "echo.\xed\xa0\x80",
  };
  for (int i = 0; i < 500; ++i) names.push_back("echo.n" + std::to_string(i));
  int answered = 0;
  for (const auto& n : names) answered += c.call(n, "p", within(5s)).ok();
  EXPECT_EQ(answered, static_cast<int>(names.size()));
  EXPECT_EQ(c.call("nothing.\xff", "x", within(5s)).code, status::unknown_method);

  const auto [code1, page] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(code1, 200);
  // Bounded: the same series as before the flood, bigger only by digits.
  EXPECT_LT(page.size(), baseline.size() + 4096) << "the page grew from " << baseline.size() << " to " << page.size();
  EXPECT_EQ(page.find("nnnnnnnn"), std::string::npos);
  EXPECT_EQ(page.find("\xff"), std::string::npos);
  EXPECT_EQ(page.find("quoted"), std::string::npos);
  EXPECT_EQ(page.find("echo.n1"), std::string::npos);
  // Every call to echo.* counts under echo, exactly.
  EXPECT_EQ(sample(page, "ringrpc_rpc_method_calls_total{method=\"echo\",status=\"ok\"}"), 1 + 507);
  EXPECT_EQ(sample(page, "ringrpc_rpc_method_calls_total{method=\"a.b\",status=\"ok\"}"), 1);
  std::regex method_label(R"re(method="([^"]*)")re");
  std::set<std::string> labels;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), method_label); it != std::sregex_iterator(); ++it) {
    labels.insert((*it)[1].str());
  }
  for (const auto& l : labels) {
    EXPECT_TRUE(l == "echo" || l == "a.b" || l == "(other)") << "unexpected method label: " << l;
  }

  const std::string promtool = find_promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian: prometheus); exposition not linted";
  const auto [rc, out] = promtool_check(promtool, page);
  EXPECT_EQ(rc, 0) << out;
}

// http_get is how the tests below poll /readyz while stop() runs: an interrupted recv is not a
// missing answer. Its socket has SO_RCVTIMEO, so recv fails with EINTR even for a handler with
// SA_RESTART, and even with no handler at all when io_uring tears down a ring this thread created
// (server and client start-up probe with a few): the task work it queues interrupts the blocking
// recv some 20 ms later. That is how the draining test below saw status 0 under load.
void on_sigusr1(int) {}

TEST(admin, http_get_reads_a_slow_answer_through_interrupted_receives) {
  detail::admin_server admin;
  admin.route("/slow", [] {
    std::this_thread::sleep_for(300ms);
    return detail::http_response{200, "text/plain; charset=utf-8", "slow\n"};
  });
  admin.start();

  struct sigaction sa {}, old {};
  sa.sa_handler = on_sigusr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  const pthread_t self = ::pthread_self();
  std::thread interrupter([self] {
    std::this_thread::sleep_for(100ms);  // the GET is waiting for the page by now
    ::pthread_kill(self, SIGUSR1);
  });
  const auto [code, body] = http_get(admin.port(), "/slow");
  interrupter.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(body, "slow\n");

  // No signal at all: rings created and closed on this thread, as every server start does.
  (void)detail::probe_io_uring();
  const auto [code2, body2] = http_get(admin.port(), "/slow");
  EXPECT_EQ(code2, 200);
  EXPECT_EQ(body2, "slow\n");
}

/// `metric{label="value"}`, or `metric` for a counter without a label.
std::string series_of(const server_counter_info& info) {
  std::string key(info.metric);
  if (info.label_key.empty()) return key;
  key.append("{").append(info.label_key).append("=\"").append(info.label_value).append("\"}");
  return key;
}

// The counter table (ringrpc/server_counters.hpp) is the one list: server_stats holds every
// counter of it, get() finds each by name, /metrics has each one's family, TYPE and sample,
// and /status lists each under "counters" with the value stats() gives.
TEST(admin, every_counter_of_the_table_is_in_stats_metrics_and_status) {
  const auto made = make_server(admin_config());
  server& s = *made;
  add_builtin_methods(s);
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.call("echo", "hello", within(5s)).ok());
  EXPECT_EQ(c.call("nothing.here", "x", within(5s)).code, status::unknown_method);

  const server_stats st = s.stats();
  ASSERT_EQ(server_counters().size(), server_counter_count);
  ASSERT_EQ(st.size(), server_counter_count);
  EXPECT_EQ(st[server_counter::calls_received], 4u);
  EXPECT_EQ(st[server_counter::calls_unknown], 1u);
  EXPECT_EQ(st[server_counter::connections_accepted], 1u);
  EXPECT_EQ(st.get("calls_received"), std::optional<std::uint64_t>(4));
  EXPECT_EQ(st.get("no_such_counter"), std::nullopt);
  std::set<std::string> names;
  std::set<std::string> series;
  const auto entries = st.entries();
  ASSERT_EQ(entries.size(), server_counter_count);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const server_counter_info& info = entries[i].info;
    EXPECT_EQ(static_cast<std::size_t>(info.id), i);
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << "two counters named " << info.name;
    EXPECT_FALSE(info.help.empty()) << info.name;
    EXPECT_EQ(st.get(info.name), std::optional<std::uint64_t>(entries[i].value)) << info.name;
    if (info.metric.empty()) continue;
    const std::string key = series_of(info);
    EXPECT_TRUE(series.insert(key).second) << "two counters are the series " << key;
  }
  // A view made by an older library holds fewer counters: the rest read 0, get() says none.
  const server_stats older(std::vector<std::uint64_t>{7});
  EXPECT_EQ(older[server_counter::connections_accepted], 7u);
  EXPECT_EQ(older[server_counter::bytes_in], 0u);
  EXPECT_EQ(older.get("bytes_in"), std::nullopt);
  EXPECT_EQ(server_stats()[server_counter::calls_received], 0u);

  const auto [mcode, page] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(mcode, 200);
  for (const server_counter_info& info : server_counters()) {
    if (info.metric.empty()) continue;
    const std::string kind = info.kind == counter_kind::gauge ? "gauge" : "counter";
    EXPECT_NE(page.find("# TYPE " + std::string(info.metric) + " " + kind + "\n"), std::string::npos) << info.name;
    const std::string key = series_of(info);
    EXPECT_NE(page.find("\n" + key + " "), std::string::npos) << "no sample " << key;
  }
  EXPECT_EQ(sample(page, "ringrpc_rpc_calls_received_total"), 4);
  EXPECT_EQ(sample(page, "ringrpc_rpc_calls_rejected_total{path=\"unknown_method\"}"), 1);
  EXPECT_EQ(sample(page, "ringrpc_connections_accepted_total"), 1);

  const auto [scode, status_body] = http_get(admin_port(s), "/status");
  ASSERT_EQ(scode, 200);
  const auto j = nlohmann::json::parse(status_body);
  ASSERT_TRUE(j.contains("counters"));
  EXPECT_EQ(j["counters"].size(), server_counter_count);
  for (const auto& name : names) EXPECT_TRUE(j["counters"].contains(name)) << name;
  EXPECT_EQ(j["counters"]["calls_received"], 4);
  EXPECT_EQ(j["counters"]["calls_unknown"], 1);
  EXPECT_EQ(j["tls"]["handshakes"], 0);
  EXPECT_EQ(j["tls"]["handshakes_in_progress"], 0);
}

TEST(admin, status_connections_health_and_readiness_while_draining) {
  server_config cfg = admin_config();
  cfg.server.drain_timeout = 5s;
  const auto made = make_server(cfg);
  server& s = *made;
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  s.add_method("hold", [&](call_context& ctx) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    ctx.reply("done");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto held = c.call_future("hold", bytes_of("x"), within(20s));
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  const auto [sc, status_body] = http_get(admin_port(s), "/status");
  ASSERT_EQ(sc, 200);
  const auto st = nlohmann::json::parse(status_body);
  EXPECT_EQ(st["state"], "running");
  EXPECT_FALSE(st["version"].get<std::string>().empty());
  EXPECT_EQ(st["config"]["server"]["handlers"], 2);
  EXPECT_NE(st["endpoints"].dump().find("hold: policy all, pool default"), std::string::npos);

  const auto [cc, conns_body] = http_get(admin_port(s), "/connections");
  ASSERT_EQ(cc, 200);
  const auto conns = nlohmann::json::parse(conns_body);
  ASSERT_EQ(conns["count"], 1);
  EXPECT_EQ(conns["connections"][0]["calls_in_flight"], 1);
  EXPECT_EQ(conns["connections"][0]["peer"].get<std::string>().rfind("127.0.0.1:", 0), 0u);

  EXPECT_EQ(http_get(admin_port(s), "/healthz").first, 200);
  EXPECT_EQ(http_get(admin_port(s), "/readyz").first, 200);
  std::thread stopper([&] { s.stop(); });
  int ready = 200;
  for (int i = 0; i < 5000 && ready == 200; ++i) {
    ready = http_get(admin_port(s), "/readyz").first;
    if (ready == 200) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(ready, 503);                                 // not ready while draining
  EXPECT_EQ(http_get(admin_port(s), "/healthz").first, 200);  // but alive
  {
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  }
  EXPECT_TRUE(held.get().ok());
  stopper.join();
}

class recorder final : public event_listener {
 public:
  void on_event(const event& e) override {
    std::lock_guard lock(mu);
    seen.push_back(e);
  }
  std::vector<event> of(event_kind k) {
    std::lock_guard lock(mu);
    std::vector<event> out;
    for (const auto& e : seen) {
      if (e.kind == k) out.push_back(e);
    }
    return out;
  }
  std::mutex mu;
  std::vector<event> seen;
};

TEST(events, the_server_posts_lifecycle_connections_rejections_slow_calls_and_samples) {
  server_options o;
  o.readers = 1;
  o.handlers = 1;
  o.handler_queue_size = 1;
  o.max_inflight_per_connection = 64;  // one connection fills the pool here, on purpose
  o.fair_share_calls = 1000;           // so its backlog shares the one queue (no fair share)
  o.slow_call_threshold = 2ms;
  o.sample_completions_every = 1;
  auto rec = std::make_shared<recorder>();
  {
    server s(o);
    s.events().add_queue("test", 4096);
    s.events().subscribe("test", rec);
    add_builtin_methods(s);
    s.start();
    auto c = client::connect("127.0.0.1", s.port());
    const auto slow_call = c.call("sleep", "5000", within(5s));  // slow
    ASSERT_TRUE(slow_call.ok()) << to_string(slow_call.error) << " " << slow_call.message;
    // One running, one queued: the third is refused by the full pool.
    auto f1 = c.call_future("sleep", bytes_of("100000"), within(5s));
    std::this_thread::sleep_for(20ms);
    auto f2 = c.call_future("sleep", bytes_of("1"), within(5s));
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(c.call("echo", "x", within(5s)).code, status::server_busy);
    EXPECT_TRUE(f1.get().ok());
    EXPECT_TRUE(f2.get().ok());
    c.close();
    s.stop();
  }
  EXPECT_EQ(rec->of(event_kind::server_started).size(), 1u);
  EXPECT_EQ(rec->of(event_kind::server_stopping).size(), 1u);
  EXPECT_EQ(rec->of(event_kind::server_stopped).size(), 1u);
  EXPECT_EQ(rec->of(event_kind::endpoint_started).size(), 3u);
  EXPECT_EQ(rec->of(event_kind::endpoint_stopped).size(), 3u);
  const auto opened = rec->of(event_kind::connection_opened);
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].peer.rfind("127.0.0.1:", 0), 0u);
  const auto closed = rec->of(event_kind::connection_closed);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].detail, "closed by peer");
  const auto rejected = rec->of(event_kind::call_rejected);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].name, "default");
  EXPECT_EQ(rejected[0].detail, "pool_full");
  const auto slow = rec->of(event_kind::slow_call);
  ASSERT_GE(slow.size(), 2u);  // the 5 ms and the 100 ms sleeps
  EXPECT_EQ(slow[0].name, "sleep");
  EXPECT_GE(slow[0].duration_ns, 5'000'000u);
  EXPECT_EQ(rec->of(event_kind::call_completed).size(), 3u);  // every call that ran
  EXPECT_GE(rec->of(event_kind::pool_exhausted).size(), 1u);
}

TEST(limits, idle_connections_close_and_busy_ones_stay) {
  server_options o;
  o.readers = 1;
  o.handlers = 2;
  o.idle_timeout = 200ms;
  server s(o);
  add_builtin_methods(s);
  s.start();
  test::raw_socket idle(s.port(), 0, 3000ms);
  test::raw_socket busy(s.port(), 0, 3000ms);
  // A call running longer than the idle timeout keeps its connection open.
  ASSERT_TRUE(busy.send_frame(test::request(1, "sleep", "600000")));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.wait_eof());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 150ms);
  detail::frame_view f;
  std::vector<std::byte> storage;
  ASSERT_TRUE(busy.read_frame(f, storage));
  EXPECT_EQ(f.call_id, 1u);
  EXPECT_EQ(f.code, status::ok);
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_idle_closed], 1u);
  EXPECT_TRUE(busy.wait_eof());  // and once answered, it idles out too
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_idle_closed], 2u);
}

TEST(limits, max_connections_refuses_cleanly_and_counts) {
  server_options o;
  o.readers = 1;
  o.handlers = 1;
  o.max_connections = 2;
  server s(o);
  add_builtin_methods(s);
  s.start();
  auto a = client::connect("127.0.0.1", s.port());
  auto b = client::connect("127.0.0.1", s.port());
  ASSERT_TRUE(a.call("echo", "a", within(5s)).ok());
  ASSERT_TRUE(b.call("echo", "b", within(5s)).ok());
  {
    test::raw_socket third(s.port());
    detail::frame_view f;
    std::vector<std::byte> storage;
    ASSERT_TRUE(third.read_frame(f, storage));
    EXPECT_EQ(f.kind, wire::Kind::Error);
    EXPECT_EQ(f.code, status::server_busy);
    EXPECT_NE(std::string(f.message).find("max_connections (2)"), std::string::npos);
    EXPECT_TRUE(third.wait_eof());
  }
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_refused], 1u);
  b.close();
  for (int i = 0; i < 2000 && s.stats()[ringrpc::server_counter::connections_open] != 1; ++i) std::this_thread::sleep_for(1ms);
  auto d = client::connect("127.0.0.1", s.port());  // a slot is free again
  EXPECT_TRUE(d.call("echo", "d", within(5s)).ok());
}

TEST(limits, in_flight_cap_pauses_reading_and_reports_the_knob) {
  server_options o;
  o.readers = 1;
  o.handlers = 4;
  o.max_inflight_per_connection = 2;
  auto rec = std::make_shared<recorder>();
  server s(o);
  s.events().add_queue("test", 1024);
  s.events().subscribe("test", rec, event_kind_set{event_kind::limit_hit});
  add_builtin_methods(s);
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  std::vector<std::future<call_result>> fs;
  for (int i = 0; i < 6; ++i) fs.push_back(c.call_future("sleep", bytes_of("50000"), within(10s)));
  for (auto& f : fs) EXPECT_TRUE(f.get().ok());
  EXPECT_GT(s.stats()[ringrpc::server_counter::reads_paused], 0u);
  s.stop();
  const auto hits = rec->of(event_kind::limit_hit);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].name, "max_inflight_per_connection");
  EXPECT_EQ(hits[0].value, 2u);
}

TEST(config, example_file_configures_a_server) {
  server_config cfg = load_config_file(RINGRPC_EXAMPLE_CONFIG);
  apply_overrides(cfg, std::vector<config_override>{{"server.port", "0"}, {"admin.port", "0"}});
  const auto made = make_server(cfg);
  server& s = *made;
  add_builtin_methods(s);
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  EXPECT_TRUE(c.call("echo", "x", within(5s)).ok());
  bool background = false;
  for (const auto& p : s.pool_stats_all()) background = background || p.name == "background";
  EXPECT_TRUE(background);
  log::configure(log_options{});  // the server applied the example's [logging]; back to defaults
}

TEST(logging, a_normal_stop_under_load_logs_no_error) {
  std::mutex mu;
  std::vector<std::string> lines;
  log_options lo;
  lo.level = log_level::debug;
  log::configure(lo, [&](std::string_view line) {
    std::lock_guard lock(mu);
    lines.emplace_back(line);
  });
  {
    server_options o;
    o.readers = 1;
    o.handlers = 2;
    server s(o);
    add_builtin_methods(s);
    s.start();
    auto c = client::connect("127.0.0.1", s.port());
    std::vector<std::future<call_result>> fs;
    for (int i = 0; i < 200; ++i) fs.push_back(c.call_future("sleep", bytes_of("1000"), within(10s)));
    s.stop();
    for (auto& f : fs) f.get();
  }
  log::configure(log_options{});
  std::lock_guard lock(mu);
  bool stopping = false;
  for (const auto& l : lines) {
    EXPECT_EQ(l.find("level=error"), std::string::npos) << l;
    EXPECT_EQ(l.find("level=critical"), std::string::npos) << l;
    stopping = stopping || l.find("event=server_stopping") != std::string::npos;
  }
  EXPECT_TRUE(stopping);
}

}  // namespace
}  // namespace ringrpc

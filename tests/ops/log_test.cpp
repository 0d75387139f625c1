// Structured logging: the line format (text and JSON), quoting, levels, file output, the
// event-bus listener, and concurrent writers never interleaving within a line.

#include "log/log.hpp"
#include "log/event_log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

using namespace ringrpc;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

namespace {

// Captures lines; each test configures the process-wide logger with one of these.
class capture {
 public:
  log::line_sink sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(_m);
      _lines.emplace_back(line);
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(_m);
    return _lines;
  }

 private:
  mutable std::mutex _m;
  std::vector<std::string> _lines;
};

log_options opts(log_level level, log_format format = log_format::text) {
  log_options o;
  o.level = level;
  o.format = format;
  return o;
}

class Log : public ::testing::Test {
 protected:
  void TearDown() override { log::configure(opts(log_level::info), [](std::string_view) {}); }
  capture cap;
};

}  // namespace

TEST(LogFormat, TextIsKeyValueWithQuotingWhenNeeded) {
  EXPECT_EQ(log::format_fields(log_format::text, log_level::warn, "pool_exhausted",
                               {{"pool", "default"}, {"active", 4}, {"queued", std::uint64_t{1024}},
                                {"msg", "queue is full"}}),
            "level=warn event=pool_exhausted pool=default active=4 queued=1024 msg=\"queue is full\"");
  EXPECT_EQ(log::format_fields(log_format::text, log_level::info, "x",
                               {{"empty", ""}, {"eq", "a=b"}, {"quote", "say \"hi\""}, {"nl", "a\nb"},
                                {"ctl", std::string_view("\x01", 1)}, {"bs", "c:\\dir"}, {"utf8", "caf\xc3\xa9"}}),
            "level=info event=x empty=\"\" eq=\"a=b\" quote=\"say \\\"hi\\\"\" nl=\"a\\nb\" ctl=\"\\x01\" "
            "bs=\"c:\\\\dir\" utf8=caf\xc3\xa9");
  EXPECT_EQ(log::format_fields(log_format::text, log_level::debug, "x",
                               {{"t", true}, {"f", false}, {"neg", -5}, {"d", 0.5}, {"bad key", 1}}),
            "level=debug event=x t=true f=false neg=-5 d=0.5 bad_key=1");
}

TEST(LogFormat, JsonIsValidAndTyped) {
  const std::string body = log::format_fields(
      log_format::json, log_level::error, "listen_failed",
      {{"address", "0.0.0.0:7000"}, {"errno", 98}, {"fatal", true}, {"ratio", 0.25}, {"msg", "in \"use\"\n"},
       {"bad", "\xff"}});
  const auto j = nlohmann::json::parse("{" + body + "}");
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["event"], "listen_failed");
  EXPECT_EQ(j["address"], "0.0.0.0:7000");
  EXPECT_EQ(j["errno"], 98);
  EXPECT_EQ(j["fatal"], true);
  EXPECT_EQ(j["ratio"], 0.25);
  EXPECT_EQ(j["msg"], "in \"use\"\n");
  EXPECT_EQ(j["bad"], "\xef\xbf\xbd");  // U+FFFD for the byte that was not UTF-8
}

TEST_F(Log, LineHasUtcTimestampThenTheFields) {
  log::configure(opts(log_level::info), cap.sink());
  log::warn("pool_exhausted", {{"pool", "default"}, {"size", 4}});
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], MatchesRegex(R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z )"
                                     R"(level=warn event=pool_exhausted pool=default size=4$)"));
}

TEST_F(Log, JsonLinesParse) {
  log::configure(opts(log_level::info, log_format::json), cap.sink());
  log::info("server_started", {{"address", "127.0.0.1:7000"}});
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  const auto j = nlohmann::json::parse(lines[0]);
  EXPECT_THAT(j["ts"].get<std::string>(), MatchesRegex(R"(^[0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z$)"));
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["event"], "server_started");
  EXPECT_EQ(j["address"], "127.0.0.1:7000");
}

TEST_F(Log, LevelsFilter) {
  log::configure(opts(log_level::warn), cap.sink());
  EXPECT_FALSE(log::enabled(log_level::info));
  EXPECT_TRUE(log::enabled(log_level::warn));
  EXPECT_TRUE(log::enabled(log_level::critical));
  log::trace("t");
  log::debug("d");
  log::info("i");
  log::warn("w");
  log::error("e");
  log::event(log_level::critical, "c");
  log::event(log_level::off, "never");  // "off" is a threshold, not a level to write at
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("level=warn event=w"));
  EXPECT_THAT(lines[1], HasSubstr("level=error event=e"));
  EXPECT_THAT(lines[2], HasSubstr("level=critical event=c"));

  log::configure(opts(log_level::off), cap.sink());
  log::error("muted");
  EXPECT_EQ(cap.lines().size(), 3u);
}

TEST_F(Log, EventAtKeepsTheEventsOwnTime) {
  log::configure(opts(log_level::info), cap.sink());
  log::event_at(std::chrono::system_clock::time_point(std::chrono::milliseconds(1'795'000'000'123)),
                log_level::info, "relayed");
  ASSERT_EQ(cap.lines().size(), 1u);
  EXPECT_THAT(cap.lines()[0], ::testing::StartsWith("2026-11-18T"));
  EXPECT_THAT(cap.lines()[0], HasSubstr(".123Z level=info event=relayed"));
}

TEST_F(Log, WritesToAFileAppending) {
  const auto path = std::filesystem::temp_directory_path() / ("ringrpc_log_test_" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(path);
  {
    std::ofstream pre(path);
    pre << "existing line\n";
  }
  log_options o = opts(log_level::info);
  o.file = path.string();
  log::configure(o);
  log::info("one", {{"n", 1}});
  log::info("two", {{"n", 2}});
  log::flush();
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "existing line");
  EXPECT_THAT(lines[1], HasSubstr(" level=info event=one n=1"));
  EXPECT_THAT(lines[2], HasSubstr(" level=info event=two n=2"));
  log::configure(opts(log_level::info), [](std::string_view) {});  // release the file
  std::filesystem::remove(path);
}

TEST_F(Log, UnopenableFileIsAnError) {
  log_options o;
  o.file = "/nonexistent-dir/ringrpc.log";
  try {
    log::configure(o);
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-dir/ringrpc.log"));
    EXPECT_EQ(e.code().value(), ENOENT);
  }
}

TEST_F(Log, ConcurrentWritersProduceWholeLines) {
  log::configure(opts(log_level::info), cap.sink());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 500; ++i) log::info("tick", {{"thread", t}, {"i", i}, {"pad", std::string(100, 'x')}});
    });
  }
  for (auto& th : threads) th.join();
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 2000u);
  const std::regex shape(R"(^\S+ level=info event=tick thread=[0-3] i=[0-9]+ pad=x{100}$)");
  for (const auto& l : lines) ASSERT_TRUE(std::regex_match(l, shape)) << l;
}

TEST_F(Log, ReconfigureWhileLoggingLosesNoLine) {
  capture other;
  log::configure(opts(log_level::info), cap.sink());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) log::info("busy", {{"i", i}});
    done = true;
  });
  for (int i = 0; !done.load(); ++i) log::configure(opts(log_level::info), (i % 2 == 0 ? other : cap).sink());
  writer.join();
  EXPECT_EQ(cap.lines().size() + other.lines().size(), 2000u);
}

TEST_F(Log, EventBusListenerLogsAtTheRightLevels) {
  log::configure(opts(log_level::info), cap.sink());
  auto listener = log::make_event_log_listener();
  event started;
  started.kind = event_kind::server_started;
  started.detail = "127.0.0.1:7000";
  listener->on_event(started);
  event stopping;
  stopping.kind = event_kind::server_stopping;
  stopping.detail = "signal 15";
  listener->on_event(stopping);
  event conn;
  conn.kind = event_kind::connection_opened;  // debug: not at info
  conn.peer = "127.0.0.1:5555";
  listener->on_event(conn);
  event exhausted;
  exhausted.kind = event_kind::pool_exhausted;
  exhausted.name = "default";
  exhausted.value = 4;
  listener->on_event(exhausted);
  event slow;
  slow.kind = event_kind::slow_call;
  slow.name = "echo";
  slow.peer = "127.0.0.1:5555";
  slow.duration_ns = 1'500'000;
  slow.value = 1'000'000;
  listener->on_event(slow);

  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("level=info event=server_started address=127.0.0.1:7000"));
  // An orderly shutdown is information, not an error.
  EXPECT_THAT(lines[1], HasSubstr("level=info event=server_stopping reason=\"signal 15\""));
  EXPECT_THAT(lines[2], HasSubstr("level=warn event=pool_exhausted pool=default size=4"));
  EXPECT_THAT(lines[3], HasSubstr("level=warn event=slow_call peer=127.0.0.1:5555 method=echo duration_ms=1.5 threshold_ms=1"));
}

TEST_F(Log, LoggedKindsFollowTheLevel) {
  const event_kind_set at_info = log::logged_event_kinds(log_level::info);
  EXPECT_TRUE(at_info.contains(event_kind::server_stopping));
  EXPECT_TRUE(at_info.contains(event_kind::pool_exhausted));
  EXPECT_FALSE(at_info.contains(event_kind::connection_opened));
  EXPECT_FALSE(at_info.contains(event_kind::call_completed));
  EXPECT_TRUE(log::logged_event_kinds(log_level::trace).contains(event_kind::call_completed));
  EXPECT_TRUE(log::logged_event_kinds(log_level::off).empty());
  EXPECT_EQ(log::level_of(event_kind::server_stopping), log_level::info);
}

TEST_F(Log, ThroughARealEventBus) {
  log::configure(opts(log_level::info), cap.sink());
  {
    event_bus_options bo;
    bo.logger = log::event_bus_logger();
    event_bus bus(bo);
    bus.add_queue("log", 64);
    bus.subscribe("log", log::make_event_log_listener(), log::logged_event_kinds(log_level::info));
    bus.start();
    event e;
    e.kind = event_kind::limit_hit;
    e.name = "max_connections";
    e.value = 100;
    e.peer = "10.0.0.1:4000";
    bus.post(e);
    bus.stop();
  }
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("level=warn event=limit_hit limit=max_connections value=100 peer=10.0.0.1:4000"));
}

TEST_F(Log, DefaultIsQuiet) {
  // Nothing at info and below is per call: the per-call kinds are debug or trace.
  EXPECT_LT(static_cast<int>(log::level_of(event_kind::call_completed)), static_cast<int>(log_level::info));
  EXPECT_LT(static_cast<int>(log::level_of(event_kind::call_rejected)), static_cast<int>(log_level::info));
  EXPECT_LT(static_cast<int>(log::level_of(event_kind::connection_closed)), static_cast<int>(log_level::info));
}

// --- rate limiting: lines a peer can cause --------------------------------------------------------

TEST(RateLimiter, LetsNPerWindowThroughAndReportsTheRestOnce) {
  using clock = log::rate_limiter::clock;
  const clock::time_point t0{std::chrono::seconds(100)};
  log::rate_limiter l(3, std::chrono::milliseconds(1000));
  int written = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto d = l.admit(t0 + std::chrono::microseconds(i));
    if (d.write) ++written;
    EXPECT_EQ(d.suppressed_before, 0u);
  }
  EXPECT_EQ(written, 3);
  EXPECT_EQ(l.suppressed_total(), 997u);
  // Nothing is reported while its window is open.
  EXPECT_EQ(l.take_suppressed(t0 + std::chrono::milliseconds(500)), 0u);
  // The first line of the next window carries the count, exactly once.
  const auto next = l.admit(t0 + std::chrono::milliseconds(1001));
  EXPECT_TRUE(next.write);
  EXPECT_EQ(next.suppressed_before, 997u);
  EXPECT_EQ(l.admit(t0 + std::chrono::milliseconds(1002)).suppressed_before, 0u);
  // A burst that ends with no later line is reported by take_suppressed once the window ends.
  for (int i = 0; i < 10; ++i) (void)l.admit(t0 + std::chrono::milliseconds(1003));
  EXPECT_EQ(l.take_suppressed(t0 + std::chrono::milliseconds(1500)), 0u);
  EXPECT_EQ(l.take_suppressed(t0 + std::chrono::milliseconds(2002)), 9u);
  EXPECT_EQ(l.take_suppressed(t0 + std::chrono::milliseconds(2003)), 0u);
  EXPECT_EQ(l.suppressed_total(), 1006u);
}

TEST_F(Log, AFloodOfLimitHitsWritesAFewLinesAndOneSuppressedCount) {
  log::configure(opts(log_level::info), cap.sink());
  {
    auto listener = log::make_event_log_listener();  // 10 lines per second per kind
    event refused;
    refused.kind = event_kind::limit_hit;
    refused.name = "max_connections";
    refused.value = 100;
    refused.peer = "127.0.0.1:4000";
    event paused = refused;
    paused.name = "max_inflight_per_connection";
    event stopping;
    stopping.kind = event_kind::server_stopping;
    for (int i = 0; i < 20'000; ++i) listener->on_event(refused);
    for (int i = 0; i < 100; ++i) listener->on_event(paused);
    for (int i = 0; i < 3; ++i) listener->on_event(stopping);  // lifecycle: never thinned
  }
  const auto lines = cap.lines();
  std::size_t refused_lines = 0, paused_lines = 0, stopping_lines = 0;
  std::vector<std::string> suppressed;
  for (const auto& l : lines) {
    if (l.find("event=limit_hit limit=max_connections") != std::string::npos) ++refused_lines;
    if (l.find("event=limit_hit limit=max_inflight_per_connection") != std::string::npos) ++paused_lines;
    if (l.find("event=server_stopping") != std::string::npos) ++stopping_lines;
    if (l.find("event=log_suppressed") != std::string::npos) suppressed.push_back(l);
  }
  EXPECT_EQ(refused_lines, 10u);
  EXPECT_EQ(paused_lines, 10u);  // each limit has its own budget
  EXPECT_EQ(stopping_lines, 3u);
  ASSERT_EQ(suppressed.size(), 2u) << ::testing::PrintToString(lines);
  std::string all = suppressed[0] + "\n" + suppressed[1];
  EXPECT_THAT(all, HasSubstr("level=warn event=log_suppressed of=limit_hit limit=max_connections suppressed=19990"));
  EXPECT_THAT(all, HasSubstr("level=warn event=log_suppressed of=limit_hit limit=max_inflight_per_connection suppressed=90"));
  EXPECT_LE(lines.size(), 25u);
}

TEST_F(Log, SuppressedCountIsWrittenWhenTheNextWindowOpens) {
  log::configure(opts(log_level::info), cap.sink());
  log::event_log_options o;
  o.lines_per_interval = 2;
  o.interval = std::chrono::milliseconds(50);
  auto listener = log::make_event_log_listener(o);
  event slow;
  slow.kind = event_kind::slow_call;
  slow.name = std::string(4096, 'x');  // a peer's method name: clipped in the line
  slow.duration_ns = 2'000'000;
  slow.value = 1'000'000;
  for (int i = 0; i < 50; ++i) listener->on_event(slow);
  EXPECT_EQ(cap.lines().size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  listener->on_event(slow);
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[2], HasSubstr("level=warn event=log_suppressed of=slow_call suppressed=48 interval_ms=50"));
  EXPECT_THAT(lines[3], HasSubstr("event=slow_call"));
  EXPECT_LT(lines[3].size(), 512u);
}

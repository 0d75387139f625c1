// ringrpc-load's io_uring engine (tools/load/engine.hpp) against small servers on loopback
// (tests/load/fake_servers.hpp): well-behaved echo, redis-like, HTTP and ringrpc targets, and
// hostile ones that answer garbage, stall, close mid-reply or claim absurd reply sizes.
//
// Tests that could hang on an engine bug run in a forked child with a time bound, so a hang is
// reported (as "engine bug: ...") instead of stalling the whole suite.

#include "engine.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "wire/frame_codec.hpp"
#include "protocol.hpp"
#include "report.hpp"
#include "ringrpc/server.hpp"
#include "load/fake_servers.hpp"
#include "test_support.hpp"

namespace ringrpc::load {
namespace {

// Sanitizer builds run the engine about twice as slowly; durations and bounds scale with them
// so the tests check behaviour, not speed. (Most of this test's time is its runs' durations and
// drains, so the factor is most of its time under ASan: 4 made it 124 s there, 2 makes it ~60 s.)
constexpr int slow = ringrpc::test::sanitized ? 2 : 1;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using namespace fakes;  // the servers: tests/load/fake_servers.hpp

// ------------------------------------------------------------------------------------------
// Running the engine.

std::string url_of(std::string_view scheme, std::uint16_t port, std::string_view path = {}) {
  return std::string(scheme) + "://127.0.0.1:" + std::to_string(port) + std::string(path);
}

engine_config config_for(const std::string& url) {
  engine_config cfg;
  cfg.where = parse_target(url);
  cfg.threads = 1;
  cfg.connections = 2;
  cfg.depth = 1;
  cfg.duration = 1s * slow;
  cfg.warmup = 0s;
  cfg.connect_timeout = 1s;
  return cfg;
}

codec_options options_with(std::string_view payload) {
  codec_options co;
  co.payload.assign(reinterpret_cast<const std::byte*>(payload.data()),
                    reinterpret_cast<const std::byte*>(payload.data()) + payload.size());
  return co;
}

struct timed_run {
  run_result r;
  double wall_s = 0;
  int ticks = 0;
};

using tick_hook = std::function<void(double elapsed_s, std::uint64_t live_calls_ok)>;

timed_run run_load(engine_config cfg, const codec_options& co = options_with(std::string(64, 'x')),
                   const tick_hook& hook = {}) {
  const auto proto = make_protocol(cfg.where, co);
  if (cfg.kinds.empty()) cfg.kinds = proto->default_kinds();
  timed_run out;
  const auto t0 = steady::now();
  out.r = run_engine(cfg, *proto, [&](double elapsed, const std::vector<live_counters*>& live) {
    ++out.ticks;
    if (hook) {
      std::uint64_t ok = 0;
      for (const auto* l : live) ok += l->calls_ok.load();
      hook(elapsed, ok);
    }
  });
  out.wall_s = std::chrono::duration<double>(steady::now() - t0).count();
  return out;
}

std::uint64_t err(const run_result& r, const std::string& kind) {
  const auto it = r.errors.find(kind);
  return it == r.errors.end() ? 0 : it->second;
}

std::string errors_text(const run_result& r) {
  std::string s;
  for (const auto& [k, v] : r.errors) s += k + "=" + std::to_string(v) + " ";
  return s.empty() ? "(none)" : s;
}

// Runs `fn` in a forked child; its exit status, or nullopt if it was still running after
// `bound` (then it is killed by its PID). fn must not use gtest assertions: it reports on stderr.
std::optional<int> run_in_child(const std::function<int()>& fn, std::chrono::milliseconds bound) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
      rc = 98;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  const auto deadline = steady::now() + bound;
  int st = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (steady::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// ------------------------------------------------------------------------------------------
// Closed loop against each protocol.

void expect_clean_closed_loop(const timed_run& t, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_GT(t.r.calls_ok, 0u);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_GT(t.r.calls_per_sec(), 0.0);
  EXPECT_FALSE(t.r.open_loop);
  EXPECT_NEAR(t.r.measured_s, 1.0 * slow, 0.01);
  EXPECT_EQ(t.r.latency_ns.count(), t.r.calls_ok);
  EXPECT_EQ(t.r.service_ns.count(), 0u) << "closed loop records no separate service time";
  EXPECT_LT(t.wall_s, (1.0 + 2.5) * slow) << "a closed loop ends at its duration plus a bounded drain";
}

TEST(load_engine, closed_loop_echo) {
  tcp_server srv(echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.depth = 4;
  expect_clean_closed_loop(run_load(cfg), "echo");
}

TEST(load_engine, closed_loop_redis) {
  tcp_server srv(redis_server("+PONG\r\n"));
  auto cfg = config_for(url_of("redis", srv.port()));
  cfg.depth = 4;
  expect_clean_closed_loop(run_load(cfg), "redis");
}

TEST(load_engine, closed_loop_http_pipelined) {
  tcp_server srv(http_server(http_ok));
  auto cfg = config_for(url_of("http", srv.port(), "/x"));
  cfg.depth = 8;  // pipelined: several requests per read on the server side
  expect_clean_closed_loop(run_load(cfg), "http");
}

TEST(load_engine, closed_loop_ringrpc_two_threads) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.threads = 2;
  cfg.connections = 4;
  cfg.depth = 4;
  expect_clean_closed_loop(run_load(cfg), "ringrpc");
}

TEST(load_engine, max_calls_is_exact_for_every_protocol) {
  tcp_server echo(echo_server);
  tcp_server redis(redis_server("+PONG\r\n"));
  tcp_server http(http_server(http_ok));
  auto rpc = start_ringrpc(2);
  struct c {
    std::string url;
    unsigned threads, connections, depth;
    std::uint64_t n;
  };
  const std::vector<c> cases = {
      {url_of("echo", echo.port()), 1, 3, 4, 501},
      {url_of("redis", redis.port()), 2, 4, 8, 1001},
      {url_of("http", http.port(), "/"), 2, 3, 5, 777},
      {url_of("ringrpc", rpc->port(), "/echo"), 3, 6, 16, 2003},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.url);
    auto cfg = config_for(k.url);
    cfg.threads = k.threads;
    cfg.connections = k.connections;
    cfg.depth = k.depth;
    cfg.duration = 0s;  // as `-n` without `-T`: the count alone ends the run
    cfg.max_calls = k.n;
    const auto t = run_load(cfg);
    EXPECT_EQ(t.r.calls_ok + t.r.error_total(), k.n) << errors_text(t.r);
    EXPECT_EQ(t.r.calls_ok, k.n);
    EXPECT_EQ(t.r.latency_ns.count(), k.n);
    EXPECT_GT(t.r.measured_s, 0.0);
    EXPECT_LT(t.wall_s, 10.0);
  }
}

// Engine bug: a thread whose share of max_calls rounds down to 0 gets quota 0, which the
// engine reads as "unlimited"; with no duration the run never ends.
TEST(load_engine, max_calls_below_thread_count_ends) {
  const auto rc = run_in_child(
      [] {
        tcp_server srv(echo_server, 20s);
        auto cfg = config_for(url_of("echo", srv.port()));
        cfg.threads = 4;
        cfg.connections = 4;
        cfg.duration = 0s;
        cfg.max_calls = 3;
        const auto t = run_load(cfg);
        if (t.r.calls_ok != 3 || t.r.error_total() != 0) {
          std::fprintf(stderr, "calls_ok %llu, errors %s\n", static_cast<unsigned long long>(t.r.calls_ok),
                       errors_text(t.r).c_str());
          return 1;
        }
        return 0;
      },
      4s * slow);
  // A thread whose share of the count is 0 issues nothing (it once read 0 as "unlimited").
  ASSERT_TRUE(rc) << "max_calls=3 with 4 threads did not end";
  EXPECT_EQ(*rc, 0);
}

// ------------------------------------------------------------------------------------------
// Hostile servers.

TEST(load_engine, garbage_replies_are_protocol_errors) {
  struct c {
    const char* name;
    std::string url_scheme, path, junk;
  };
  // ringrpc junk: a plausible 8-byte length prefix, then bytes that fail verification.
  const std::string ringrpc_junk = std::string("\x08\x00\x00\x00", 4) + "ABCDEFGH";
  const std::vector<c> cases = {
      {"http", "http", "/", "garbage, not HTTP\r\n\r\n"},
      {"redis", "redis", "", "?garbage\r\n"},
      {"echo", "echo", "", std::string(64, 'y')},
      {"ringrpc", "ringrpc", "/echo", ringrpc_junk},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    tcp_server srv(garbage_server(k.junk));
    auto cfg = config_for(url_of(k.url_scheme, srv.port(), k.path));
    cfg.depth = 2;
    cfg.duration = 600ms * slow;
    const auto t = run_load(cfg);
    EXPECT_GT(err(t.r, "protocol"), 0u) << errors_text(t.r);
    EXPECT_EQ(t.r.calls_ok, 0u) << "garbage must never count as a successful call";
    EXPECT_EQ(t.r.latency_ns.count(), 0u);
    EXPECT_LT(t.wall_s, (0.6 + 2.5) * slow) << "the run still ends on time";
    EXPECT_GT(srv.accepted(), cfg.connections) << "the engine reconnects after a protocol error";
  }
}

// Each call is one error at most: a protocol error must not be counted again as "closed" for
// the same call, so calls_ok + errors == max_calls also against a broken server.
TEST(load_engine, garbage_with_max_calls_counts_each_call_once) {
  tcp_server srv(garbage_server("garbage, not HTTP\r\n\r\n"));
  auto cfg = config_for(url_of("http", srv.port(), "/"));
  cfg.connections = 1;
  cfg.duration = 0s;
  cfg.max_calls = 5;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_GT(err(t.r, "protocol"), 0u);
  // Each garbage reply once, as 'protocol', not again as 'closed' when the connection goes.
  EXPECT_EQ(t.r.calls_ok + t.r.error_total(), cfg.max_calls) << errors_text(t.r);
}

// The engine against a server that echoes at full speed for 2,000 calls, goes quiet, and 50 ms
// later answers one more call and no other: every reply the server wrote is counted ok (none
// held until it timed out), and the calls it never answered are timeouts. How long a reply
// can wait for a batch is the wait the loop asks for (load_wake_batch_test.cpp,
// ALoneReplyIsNotHeldForABatch). The timeout is
// generous (seconds): only the counts are checked, never how long anything took.
TEST(load_engine, a_lone_reply_after_a_fast_run_is_counted) {
  // Quiet after a count of answers, not a time: a starved machine may take longer than any
  // fixed time to make the engine's first calls.
  constexpr std::uint64_t quiet_after_bytes = 2000 * 64;
  std::atomic<bool> last_answered{false};
  std::atomic<std::uint64_t> answered_bytes{0};
  tcp_server srv([&](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      if (answered_bytes.load() >= quiet_after_bytes) {
        if (last_answered.exchange(true)) continue;  // read, never answered
        std::this_thread::sleep_for(50ms);
      }
      if (!p.write_all(buf)) return;
      answered_bytes.fetch_add(buf.size());
      buf.clear();
    }
  });
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.connections = 64;
  cfg.duration = 1500ms * slow;
  cfg.call_timeout = 2s * slow;
  cfg.reply_batch_window = 1s;
  const auto t = run_load(cfg);
  ASSERT_GT(t.r.calls_ok, 2000u) << errors_text(t.r);
  EXPECT_TRUE(last_answered.load()) << "the server never went quiet";
  EXPECT_EQ(t.r.calls_ok, answered_bytes.load() / 64) << "64-byte echoes; " << errors_text(t.r);
  EXPECT_EQ(t.r.error_total(), err(t.r, "timeout")) << errors_text(t.r);
}

TEST(load_engine, stalled_server_times_out_and_run_ends) {
  tcp_server srv(stall_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.call_timeout = 200ms;
  const auto t = run_load(cfg);
  EXPECT_GT(err(t.r, "timeout"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok, 0u);
  // Duration 1 s, then the drain waits at most max(call timeout, 2 s); the slack only catches a
  // hang (a drain without its bound would run until the test's own timeout).
  EXPECT_LT(t.wall_s, (1.0 + 2.0) * slow + 5.0);
  EXPECT_GE(t.wall_s, 1.0 * slow);
}

// A call that timed out and then never finished is one error, not two.
TEST(load_engine, stalled_calls_are_counted_once) {
  tcp_server srv(stall_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.connections = 2;
  cfg.depth = 2;
  cfg.duration = 0s;
  cfg.max_calls = 4;
  cfg.call_timeout = 200ms;
  const auto t = run_load(cfg);
  EXPECT_EQ(err(t.r, "timeout"), 4u) << errors_text(t.r);
  EXPECT_LT(t.wall_s, 3.5 * slow);
  // Once each: a call that timed out is not counted again as 'unfinished' at the end.
  EXPECT_EQ(err(t.r, "unfinished"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok + t.r.error_total(), cfg.max_calls) << errors_text(t.r);
}

TEST(load_engine, server_closing_mid_reply_reconnects) {
  struct c {
    const char* name;
    std::string scheme, path, partial;
  };
  const std::vector<c> cases = {
      {"http", "http", "/", "HTTP/1.1 200 OK\r\nContent-Len"},
      {"redis", "redis", "", "+PO"},
      {"echo", "echo", "", std::string(10, 'x')},
      {"ringrpc", "ringrpc", "/echo", std::string("\x40\x00\x00\x00", 4) + "partial"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    tcp_server srv(close_mid_reply_server(k.partial));
    auto cfg = config_for(url_of(k.scheme, srv.port(), k.path));
    cfg.depth = 3;
    cfg.duration = 600ms * slow;
    const auto t = run_load(cfg);
    EXPECT_GT(err(t.r, "closed") + err(t.r, "protocol"), 0u) << errors_text(t.r);
    EXPECT_EQ(t.r.calls_ok, 0u);
    EXPECT_GT(srv.accepted(), cfg.connections + 2) << "the engine reconnects (about every 100 ms)";
    EXPECT_LT(t.wall_s, (0.6 + 2.5) * slow);
  }
}

TEST(load_engine, oversized_reply_claims_are_refused_at_once) {
  struct c {
    const char* name;
    std::string scheme, path, claim;
  };
  const std::vector<c> cases = {
      {"http", "http", "/", "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n"},
      {"http chunked", "http", "/", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFF\r\n"},
      {"redis", "redis", "", "$999999999999\r\n"},
      {"ringrpc", "ringrpc", "/echo", std::string("\xf0\xff\xff\xff", 4) + "abcd"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    tcp_server srv(oversized_claim_server(k.claim));
    auto cfg = config_for(url_of(k.scheme, srv.port(), k.path));
    cfg.connections = 1;
    cfg.call_timeout = 300ms;  // had the claim been believed, calls would time out instead
    cfg.duration = 600ms * slow;
    const auto t = run_load(cfg);
    EXPECT_GT(err(t.r, "reply_too_large"), 0u) << errors_text(t.r);
    EXPECT_EQ(err(t.r, "timeout"), 0u) << "the claim alone must be refused: " << errors_text(t.r);
    EXPECT_EQ(t.r.calls_ok, 0u);
    EXPECT_LT(t.wall_s, (0.6 + 2.5) * slow);
  }
}

// ------------------------------------------------------------------------------------------
// Error replies: counted by the server's error kind, never as ok.

TEST(load_engine, ringrpc_unknown_method) {
  auto srv = start_ringrpc(1);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/no_such_method"));
  cfg.duration = 600ms * slow;
  const auto t = run_load(cfg);
  EXPECT_GT(err(t.r, "unknown_method"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_EQ(err(t.r, "protocol"), 0u);
}

TEST(load_engine, http_503) {
  tcp_server srv(http_server(http_503));
  auto cfg = config_for(url_of("http", srv.port(), "/"));
  cfg.depth = 4;
  cfg.duration = 600ms * slow;
  const auto t = run_load(cfg);
  EXPECT_GT(err(t.r, "http_503"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_EQ(t.r.error_total(), err(t.r, "http_503")) << errors_text(t.r);
  EXPECT_EQ(srv.accepted(), cfg.connections) << "an error reply keeps the connection";
}

TEST(load_engine, redis_err) {
  tcp_server srv(redis_server("-ERR nope\r\n"));
  auto cfg = config_for(url_of("redis", srv.port()));
  cfg.depth = 4;
  cfg.duration = 600ms * slow;
  const auto t = run_load(cfg);
  EXPECT_GT(err(t.r, "resp_err"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_EQ(t.r.error_total(), err(t.r, "resp_err")) << errors_text(t.r);
}

TEST(load_engine, ringrpc_mix_of_ok_and_errors) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.depth = 4;
  cfg.kinds = {{"echo", 3, "echo", ""}, {"nope", 1, "nope", ""}};
  const auto t = run_load(cfg);
  EXPECT_GT(t.r.calls_ok, 0u);
  EXPECT_GT(err(t.r, "unknown_method"), 0u);
  EXPECT_EQ(t.r.error_total(), err(t.r, "unknown_method")) << errors_text(t.r);
  // Weighted 3:1: the error share is about a quarter.
  const double share = static_cast<double>(err(t.r, "unknown_method")) /
                       static_cast<double>(t.r.calls_ok + t.r.error_total());
  EXPECT_NEAR(share, 0.25, 0.05);
  // --mix reports each kind apart: the errors all belong to "nope", the successes to "echo".
  ASSERT_EQ(t.r.kinds.size(), 2u);
  EXPECT_EQ(t.r.kinds[0].name, "echo");
  EXPECT_EQ(t.r.kinds[0].calls_ok, t.r.calls_ok);
  EXPECT_EQ(t.r.kinds[0].error_total(), 0u);
  EXPECT_EQ(t.r.kinds[0].latency_ns.count(), t.r.latency_ns.count());
  EXPECT_EQ(t.r.kinds[1].name, "nope");
  EXPECT_EQ(t.r.kinds[1].calls_ok, 0u);
  EXPECT_EQ(t.r.kinds[1].errors.at("unknown_method"), err(t.r, "unknown_method"));
}

// ------------------------------------------------------------------------------------------
// Open loop.
//
// Engine bug: issuing() (engine.cpp:193) only stops a closed loop at measure_until, and
// nothing sets shared_run::stop, so an open-loop worker never leaves its loop once the schedule
// is over. Tests other than open_loop_ends_with_its_schedule bound the run with max_calls = the
// schedule's total (one thread), which changes nothing for a correct engine.

std::uint64_t scheduled_calls(double rate, std::chrono::nanoseconds d) {
  return static_cast<std::uint64_t>(std::ceil(rate * std::chrono::duration<double>(d).count()));
}

TEST(load_engine, open_loop_ends_with_its_schedule) {
  const auto rc = run_in_child(
      [] {
        auto srv = start_ringrpc(2);
        auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
        cfg.steps = {{500, 1'000'000'000}};
        const auto t = run_load(cfg);
        if (t.r.calls_ok == 0 || !t.r.open_loop) return 1;
        return 0;
      },
      4500ms * slow);
  ASSERT_TRUE(rc) << "an open-loop run (1 s at 500/s) did not end with its schedule";
  EXPECT_EQ(*rc, 0);
}

TEST(load_engine, open_loop_holds_the_requested_rate) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.connections = 4;
  cfg.depth = 4;
  cfg.steps = {{2000, 2'000'000'000}};
  cfg.max_calls = scheduled_calls(2000, 2s);  // see the engine bug above
  const auto t = run_load(cfg);
  EXPECT_TRUE(t.r.open_loop);
  EXPECT_EQ(t.r.requested_rate, 2000.0);
  EXPECT_NEAR(static_cast<double>(t.r.calls_ok), 2000.0 * 2, 2000.0 * 2 * 0.15);
  EXPECT_NEAR(t.r.calls_per_sec(), 2000.0, 2000.0 * 0.15);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.service_ns.count(), t.r.latency_ns.count());
  EXPECT_EQ(t.r.latency_ns.count(), t.r.calls_ok);
  EXPECT_NEAR(t.r.measured_s, 2.0, 0.01);
  ASSERT_EQ(t.r.steps.size(), 1u);
  EXPECT_EQ(t.r.steps[0].requested_rate, 2000.0);
  EXPECT_NEAR(t.r.steps[0].achieved_rate, 2000.0, 2000.0 * 0.15);
  // Corrected latency counts from the scheduled time, never less than the service time.
  EXPECT_GE(t.r.latency_ns.value_at_percentile(50), t.r.service_ns.value_at_percentile(50));
}

TEST(load_engine, open_loop_overload_shows_coordinated_omission_correction) {
  auto srv = start_ringrpc(1);  // one handler, 2 ms per call: at most ~500 calls/s
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/sleep"));
  cfg.connections = 2;
  cfg.depth = 1;
  cfg.steps = {{2000, 1'000'000'000}};
  cfg.max_calls = 1000;  // bounds the run despite the engine bug; more than ~500 calls/s can finish
  const auto t = run_load(cfg, options_with("2000"));
  EXPECT_TRUE(t.r.open_loop);
  EXPECT_EQ(t.r.requested_rate, 2000.0);
  EXPECT_GT(t.r.calls_ok, 0u);
  EXPECT_LT(t.r.calls_per_sec(), 0.5 * 2000) << "the target cannot keep up";
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  const auto lat_p99 = t.r.latency_ns.value_at_percentile(99);
  const auto svc_p99 = t.r.service_ns.value_at_percentile(99);
  EXPECT_GT(svc_p99, 1'900'000u) << "each call sleeps 2 ms";
  EXPECT_GT(lat_p99, 10 * svc_p99) << "latency from the scheduled time includes the queueing";
  EXPECT_EQ(t.r.service_ns.count(), t.r.latency_ns.count());
}

// ------------------------------------------------------------------------------------------
// Out-of-order replies, per-second series.

TEST(load_engine, ringrpc_out_of_order_replies) {
  auto srv = start_ringrpc(6);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/jitter"));
  cfg.connections = 2;
  cfg.depth = 16;
  const auto t = run_load(cfg);
  EXPECT_GT(t.r.calls_ok, 500u);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
}

TEST(load_engine, ringrpc_out_of_order_replies_with_max_calls) {
  auto srv = start_ringrpc(6);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/jitter"));
  cfg.connections = 3;
  cfg.depth = 16;
  cfg.duration = 0s;
  cfg.max_calls = 1500;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.calls_ok, 1500u);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
}

TEST(load_engine, per_second_series) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.duration = 2s;
  cfg.warmup = 500ms;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_NEAR(t.r.measured_s, 2.0, 0.01);
  EXPECT_DOUBLE_EQ(t.r.warmup_s, 0.5);
  ASSERT_EQ(t.r.per_second.size(), 2u);
  ASSERT_EQ(t.r.interval_latency_ns.size(), t.r.per_second.size());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < t.r.per_second.size(); ++i) {
    const auto& s = t.r.per_second[i];
    EXPECT_DOUBLE_EQ(s.t_s, static_cast<double>(i + 1));
    EXPECT_GT(s.calls_ok, 0u);
    EXPECT_EQ(t.r.interval_latency_ns[i].count(), s.calls_ok);
    EXPECT_GT(s.p99_ns, 0u);
    sum += s.calls_ok;
  }
  EXPECT_EQ(sum, t.r.calls_ok) << "the series adds up to the total (warm-up excluded)";
  EXPECT_GE(t.ticks, 2) << "the live display ticks about once a second";
}

TEST(load_engine, refused_target_throws_system_error) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto port = ntohs(addr.sin_port);
  ::close(fd);  // bound then closed: nothing listens there now
  auto cfg = config_for(url_of("echo", port));
  EXPECT_THROW(run_load(cfg), std::system_error);
}

TEST(load_engine, bad_config_throws_invalid_argument) {
  tcp_server srv(echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.connections = 0;
  EXPECT_THROW(run_load(cfg), std::invalid_argument);
  cfg.connections = 1;
  cfg.depth = 0;
  EXPECT_THROW(run_load(cfg), std::invalid_argument);
}


// ------------------------------------------------------------------------------------------
// Found while testing: measurement windows and receive buffering.

// With both a count and a duration, the run ends when the count is reached; the measured time
// (and so calls/s) must be the time it actually took, not the duration never waited for.
TEST(load_engine, max_calls_before_duration_measures_the_actual_time) {
  tcp_server srv(echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.connections = 1;
  cfg.duration = 5s;
  cfg.max_calls = 300;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.calls_ok, 300u) << errors_text(t.r);
  EXPECT_LT(t.wall_s, std::min(2.0 * slow, 4.5)) << "the count ends the run first";
  // The measured time is the run's, not the configured duration the count cut short.
  EXPECT_LE(t.r.measured_s, t.wall_s + 0.01);
  EXPECT_GT(t.r.calls_per_sec(), 300 / t.wall_s * 0.9);
}

// --rate-steps results: each step's achieved rate comes from the calls of that step, also for
// steps shorter than a second.
TEST(load_engine, sub_second_rate_steps_report_their_achieved_rate) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.connections = 2;
  cfg.depth = 4;
  cfg.steps = {{1000, 500'000'000}, {2000, 500'000'000}};
  cfg.max_calls = 500 + 1000;  // bounds the run
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_NEAR(static_cast<double>(t.r.calls_ok), 1500.0, 1500.0 * 0.15);
  EXPECT_DOUBLE_EQ(t.r.requested_rate, 1500.0);
  ASSERT_EQ(t.r.steps.size(), 2u);
  // Steps shorter than a second get their own rates (not sums of whole-second buckets).
  EXPECT_NEAR(t.r.steps[0].achieved_rate, 1000.0, 150.0);
  EXPECT_NEAR(t.r.steps[1].achieved_rate, 2000.0, 300.0);
  EXPECT_GT(t.r.steps[1].p99_ns, 0u);
}

// Item by item, what a step did: every call of the schedule counted once, as sent and answered.
TEST(load_engine, open_loop_step_counts_scheduled_issued_and_answered) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.connections = 4;
  cfg.depth = 8;
  cfg.warmup = 0ms;
  cfg.steps = {{1000, 1'000'000'000}};
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  ASSERT_EQ(t.r.steps.size(), 1u);
  const auto& st = t.r.steps[0];
  EXPECT_EQ(st.scheduled, 1000u);
  // Calls due in the last moments may miss the end of the schedule, and replies after it are
  // not in the window; the counts still nest.
  EXPECT_LE(st.issued, 1000u);
  EXPECT_GE(st.issued, 900u);
  EXPECT_LE(st.answered, st.issued);
  EXPECT_GE(st.answered + cfg.connections * cfg.depth, st.issued);
  EXPECT_DOUBLE_EQ(st.duration_s, 1.0);
  EXPECT_DOUBLE_EQ(st.start_s, 0.0);
  EXPECT_LE(st.late_client + st.late_held, st.issued);
  EXPECT_DOUBLE_EQ(t.r.answered_rate, static_cast<double>(st.answered));
  EXPECT_DOUBLE_EQ(st.issued_rate(), static_cast<double>(st.issued));
  EXPECT_GT(t.r.bytes_sent, 0u);
  EXPECT_GT(t.r.bytes_received, 0u);
}

// A target that answers at most ~500 calls/s (one handler, 2 ms a call) asked for 2000/s on
// two connections of depth 1: the calls wait for a free slot, so the step did not keep up and
// the target is named, whatever the machine's speed.
TEST(load_engine, open_loop_held_by_a_slow_target_did_not_keep_up) {
  auto srv = start_ringrpc(1);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/sleep"));
  cfg.connections = 2;
  cfg.depth = 1;
  cfg.warmup = 0ms;
  cfg.steps = {{2000, 1'000'000'000}};
  const auto t = run_load(cfg, options_with("2000"));
  ASSERT_EQ(t.r.steps.size(), 1u);
  const auto& st = t.r.steps[0];
  EXPECT_EQ(st.scheduled, 2000u);
  EXPECT_LT(st.issued, st.scheduled);
  EXPECT_GT(st.late_held, st.late_client);
  EXPECT_FALSE(st.kept_up);
  EXPECT_EQ(st.reason, "target_too_slow");
  EXPECT_FALSE(t.r.kept_up);
  EXPECT_LT(t.r.answered_rate, 0.5 * 2000);
}

// Every answer an error no retry changes: the run stops in about a second instead of running
// its 10 s, and says which error.
TEST(load_engine, hopeless_answers_stop_the_run) {
  auto srv = start_ringrpc(1);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/no_such_method"));
  cfg.duration = 10s;
  const auto t = run_load(cfg);
  EXPECT_NE(t.r.fail_fast.find("unknown_method"), std::string::npos) << t.r.fail_fast;
  EXPECT_NE(t.r.fail_fast.find("no_such_method"), std::string::npos) << t.r.fail_fast;
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_LT(t.wall_s, 8.0) << "a bound that only catches running the whole 10 s";
}

long rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long v = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) v = std::strtol(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return v;
}

// The engine keeps the unparsed tail of a connection's input; it must not keep the parsed
// bytes before it. A server whose every segment ends one byte into a reply is legal TCP.
TEST(load_engine, receive_buffer_stays_bounded_when_reads_end_mid_reply) {
  tcp_server srv(lagging_echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.connections = 1;
  cfg.depth = 64;
  cfg.duration = 3s;
  constexpr std::size_t payload = 3001;
  std::vector<std::pair<long, std::uint64_t>> samples;  // (RSS KiB, calls so far) per tick
  const auto t = run_load(cfg, options_with(std::string(payload, 'x')),
                          [&](double, std::uint64_t ok) { samples.emplace_back(rss_kib(), ok); });
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_GT(t.r.calls_ok, 0u);
  ASSERT_GE(samples.size(), 2u);
  const long grown_kib = samples.back().first - samples.front().first;
  const double received_mib =
      static_cast<double>((samples.back().second - samples.front().second) * payload) / (1 << 20);
  // Parsed bytes are dropped as replies are read, not kept until the buffer is fully parsed
  // (a buffer that kept them would grow by what was received: gigabytes). Under ASan, freed
  // blocks sit in its quarantine instead of being reused, so RSS creeps up regardless (8.01 MiB
  // in one run that received 2.2 GiB): the bound there is wider, still far below that.
  constexpr long bound_kib = (ringrpc::test::sanitized ? 64 : 8) * 1024;
  EXPECT_LT(grown_kib, bound_kib) << "RSS grew by " << grown_kib / 1024 << " MiB while " << received_mib
                                 << " MiB were received";
}


// ------------------------------------------------------------------------------------------
// Memory follows the bytes received; the call window follows the calls in flight.

std::vector<std::byte> bytes_of_size(std::size_t n, std::byte fill = std::byte{'r'}) {
  return std::vector<std::byte>(n, fill);
}

TEST(receive_buffer, a_claimed_length_costs_only_the_bytes_that_arrived) {
  receive_buffer rx;
  // A ringrpc prefix claiming 16 MiB and 100 bytes of the body: the codec says incomplete, the
  // engine keeps the bytes.
  std::vector<std::byte> claim(4 + 100, std::byte{0});
  const std::uint32_t body = 16u << 20;
  std::memcpy(claim.data(), &body, 4);
  rx.append(claim);
  EXPECT_EQ(rx.data().size(), claim.size());
  EXPECT_EQ(rx.capacity(), receive_buffer::initial_bytes);
}

TEST(receive_buffer, grows_geometrically_and_frees_a_big_buffer_once_parsed) {
  receive_buffer rx;
  const auto chunk = bytes_of_size(32 * 1024);
  std::vector<std::size_t> capacities;
  for (int i = 0; i < 64; ++i) {  // a 2 MiB reply arriving in 32 KiB reads
    rx.append(chunk);
    if (capacities.empty() || capacities.back() != rx.capacity()) capacities.push_back(rx.capacity());
  }
  EXPECT_EQ(rx.data().size(), 2u << 20);
  EXPECT_EQ(rx.capacity(), 2u << 20);
  EXPECT_LE(capacities.size(), 10u) << "doubling: a handful of reallocations, not one per read";
  rx.consume(rx.data().size() - 10);  // the reply parsed, 10 bytes of the next one kept
  EXPECT_EQ(rx.data().size(), 10u);
  EXPECT_EQ(rx.capacity(), receive_buffer::initial_bytes) << "the big buffer is given back";
  rx.consume(10);
  EXPECT_TRUE(rx.empty());
  rx.append(chunk);
  rx.append(chunk);
  rx.append(chunk);
  rx.consume(3 * chunk.size());
  EXPECT_EQ(rx.capacity(), 0u) << "an empty buffer above keep_bytes is freed";
}

TEST(receive_buffer, slides_instead_of_growing_when_reads_end_mid_reply) {
  receive_buffer rx;
  const auto piece = bytes_of_size(1000);
  for (int i = 0; i < 100000; ++i) {
    rx.append(piece);
    rx.consume(rx.data().size() - 1);  // every read leaves one byte of the next reply
  }
  EXPECT_EQ(rx.capacity(), receive_buffer::initial_bytes);
}

TEST(call_window, one_stuck_call_among_a_million_later_ones_does_not_grow_it) {
  constexpr unsigned depth = 8;
  call_window w(depth);
  const std::size_t cap = w.capacity();
  EXPECT_LE(cap, 4u * depth);
  w.insert(0).sent_ns = 42;  // never answered
  std::vector<std::uint64_t> live;
  for (std::uint64_t seq = 1; seq < 1'000'000; ++seq) {
    if (live.size() == depth - 1) {
      auto* s = w.find(live.front());
      ASSERT_NE(s, nullptr);
      w.erase(*s);
      live.erase(live.begin());
    }
    w.insert(seq).sent_ns = static_cast<std::int64_t>(seq);
    live.push_back(seq);
  }
  EXPECT_EQ(w.capacity(), cap) << "the low-bits window doubled at every wrap-around (to 2^20 here)";
  ASSERT_NE(w.find(0), nullptr);
  EXPECT_EQ(w.find(0)->sent_ns, 42);
  EXPECT_EQ(w.size(), depth);
}

TEST(call_window, agrees_with_a_map_under_out_of_order_completion) {
  constexpr unsigned depth = 64;
  call_window w(depth);
  std::unordered_map<std::uint64_t, std::int64_t> ref;
  std::mt19937_64 rng(7);
  std::uint64_t next = 0;
  for (int step = 0; step < 300000; ++step) {
    if (ref.size() < depth && (rng() % 2 == 0 || ref.empty())) {
      const auto v = static_cast<std::int64_t>(rng() >> 1);
      w.insert(next).sent_ns = v;
      ref.emplace(next++, v);
    } else {
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      auto* s = w.find(it->first);
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(s->sent_ns, it->second);
      w.erase(*s);
      ASSERT_EQ(w.find(it->first), nullptr);
      ref.erase(it);
    }
    ASSERT_EQ(w.size(), ref.size());
  }
  std::size_t seen = 0;
  w.for_each([&](const call_window::slot& s) {
    ASSERT_EQ(ref.at(s.seq), s.sent_ns);
    ++seen;
  });
  EXPECT_EQ(seen, ref.size());
}

// Bytes the allocator has handed out and not got back (all arenas, mmapped chunks included).
std::size_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

using ringrpc::test::sanitized;

// Heap in use at the live display's ticks 1 and 2 of a run against `srv` (which does its
// damage between 1.2 s and 2 s).
std::pair<std::size_t, std::size_t> heap_at_ticks(const std::string& url, timed_run& t) {
  auto cfg = config_for(url);
  cfg.connections = 1;
  cfg.depth = 1;
  cfg.duration = 2500ms;
  std::size_t at1 = 0, at2 = 0;
  int tick = 0;
  codec_options o = options_with(std::string(64, 'x'));
  o.max_reply_bytes = 64u << 20;  // past the 8 and 16 MiB replies these tests send
  t = run_load(cfg, o, [&](double, std::uint64_t) {
    ++tick;
    if (tick == 1) at1 = heap_in_use();
    if (tick == 2) at2 = heap_in_use();
  });
  return {at1, at2};
}

// An HTTP/2 server that answers the first request with GOAWAY ENHANCE_YOUR_CALM covering every
// stream and then neither answers nor closes: the calls fail by that code at once (they used
// to wait for the end of the run and count as "unfinished").
TEST(load_engine, h2_goaway_with_an_error_code_fails_the_calls_by_its_code) {
  tcp_server srv([](peer& p) {
    std::string buf;
    if (!p.read_some(buf)) return;
    const std::string settings("\0\0\0\x04\0\0\0\0\0", 9);
    const std::string goaway("\0\0\x08\x07\0\0\0\0\0\x7f\xff\xff\xff\0\0\0\x0b", 17);
    if (!p.write_all(settings + goaway)) return;
    p.drain();
  });
  auto cfg = config_for(url_of("h2c", srv.port(), "/"));
  cfg.connections = 1;
  cfg.duration = 600ms * slow;
  const auto t = run_load(cfg);
  EXPECT_GT(err(t.r, "h2_goaway_enhance_your_calm"), 0u) << errors_text(t.r);
  EXPECT_EQ(err(t.r, "unfinished"), 0u) << errors_text(t.r);
  EXPECT_EQ(t.r.calls_ok, 0u);
  EXPECT_TRUE(t.r.diagnosis.empty()) << t.r.diagnosis;
}

// One 8 MiB HTTP reply 1.2 s into the run: once parsed, the engine gives its buffer back.
TEST(load_engine, a_huge_reply_leaves_no_buffer_behind) {
  if (sanitized) GTEST_SKIP() << "sanitizer allocators do not report through mallinfo2";
  const std::string big = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(8u << 20) + "\r\n\r\n" +
                          std::string(8u << 20, 'b');
  tcp_server srv([&big](peer& p) {
    const auto t0 = steady::now();
    bool sent_big = false;
    std::string buf;
    while (p.read_some(buf)) {
      for (auto end = buf.find("\r\n\r\n"); end != std::string::npos; end = buf.find("\r\n\r\n")) {
        buf.erase(0, end + 4);
        const bool now_big = !sent_big && steady::now() - t0 > 1200ms;
        sent_big = sent_big || now_big;
        if (!p.write_all(now_big ? big : http_ok)) return;
      }
    }
  });
  timed_run t;
  const auto [at1, at2] = heap_at_ticks(url_of("http", srv.port(), "/"), t);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_GT(t.r.calls_ok, 10u);
  ASSERT_NE(at1, 0u);
  ASSERT_NE(at2, 0u);
  EXPECT_LT(at2, at1 + (1u << 20)) << "kept " << (at2 - at1) / 1024 << " KiB after an 8 MiB reply";
}

// A ringrpc peer that, 1.2 s in, claims a 16 MiB reply and sends 100 bytes of it.
TEST(load_engine, a_claimed_reply_costs_only_the_bytes_that_arrived) {
  if (sanitized) GTEST_SKIP() << "sanitizer allocators do not report through mallinfo2";
  tcp_server srv([](peer& p) {
    const auto t0 = steady::now();
    std::string buf;
    for (;;) {
      if (!p.read_some(buf)) return;
      // Answer whole requests with replies until it is time to lie.
      while (buf.size() >= 4) {
        std::uint32_t len = 0;
        std::memcpy(&len, buf.data(), 4);
        if (buf.size() < 4 + len) break;
        std::vector<std::byte> f(4 + len);
        std::memcpy(f.data(), buf.data(), f.size());
        buf.erase(0, f.size());
        detail::frame_view v;
        if (detail::decode_frame(f, v) != detail::decode_outcome::ok) return;
        if (steady::now() - t0 > 1200ms) {
          std::string claim(4 + 100, '\0');
          const std::uint32_t body = 16u << 20;
          std::memcpy(claim.data(), &body, 4);
          p.write_all(claim);
          p.drain();
          return;
        }
        detail::frame_view r;
        r.call_id = v.call_id;
        r.kind = wire::Kind::Reply;
        r.payload = v.payload;
        detail::frame_encoder enc;
        const auto out = enc.encode(r);
        if (!p.write_all(std::string_view(reinterpret_cast<const char*>(out.data()), out.size()))) return;
      }
    }
  });
  timed_run t;
  const auto [at1, at2] = heap_at_ticks(url_of("ringrpc", srv.port(), "/echo"), t);
  EXPECT_GT(t.r.calls_ok, 10u);
  ASSERT_NE(at1, 0u);
  ASSERT_NE(at2, 0u);
  EXPECT_LT(at2, at1 + (256u << 10)) << "grew " << (at2 - at1) / 1024 << " KiB on a 100-byte read";
}

// One call held for a second while the others on its connection keep completing: the window
// keeps working (and stays its size, see call_window above).
TEST(load_engine, ringrpc_one_call_held_while_the_others_flow) {
  server_options o = test::threads(1, 2);
  o.drain_timeout = 1000ms;
  server s(o);
  std::atomic<bool> held{false};
  s.add_method("hold_first", [&](call_context& ctx) {
    if (!held.exchange(true)) std::this_thread::sleep_for(1000ms);
    ctx.reply(ctx.payload());
  });
  s.start();
  auto cfg = config_for(url_of("ringrpc", s.port(), "/hold_first"));
  cfg.connections = 1;
  cfg.depth = 8;
  cfg.duration = 2s * slow;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_GT(t.r.calls_ok, 1000u);
  EXPECT_GE(t.r.latency_ns.max(), 900'000'000u) << "the held call was answered and counted";
}

// A server that answers one request per connection with `Connection: close` (as nginx does
// after keepalive_requests): the calls pipelined behind that reply were never taken, so they are
// dropped without an error and the connection is made again.
TEST(load_engine, pipelined_calls_behind_connection_close_are_not_errors) {
  tcp_server srv([](peer& p) {
    std::string buf;
    if (!p.read_some(buf)) return;
    p.write_all("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  });
  auto cfg = config_for(url_of("http", srv.port(), "/"));
  cfg.depth = 4;
  cfg.duration = 600ms * slow;
  const auto t = run_load(cfg);
  EXPECT_GT(t.r.calls_ok, 2u);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
}

// ------------------------------------------------------------------------------------------
// Ending early: SIGINT's flag, and the diagnosis of a server of another protocol.

TEST(load_engine, stop_flag_ends_the_run_early_with_results) {
  tcp_server srv(echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.duration = 20s;
  std::atomic<bool> stop{false};
  cfg.stop_requested = &stop;
  const auto t = run_load(cfg, options_with(std::string(64, 'x')), [&](double elapsed, std::uint64_t) {
    if (elapsed >= 1.0) stop.store(true);
  });
  EXPECT_TRUE(t.r.interrupted);
  EXPECT_GT(t.r.calls_ok, 0u);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_LT(t.r.measured_s, 2.5 * slow) << "the window ends when the flag was seen";
  EXPECT_GE(t.r.measured_s, 0.9);
  EXPECT_LT(t.wall_s, 4.0 * slow);
  EXPECT_LE(t.r.per_second.size(), 3u);
}

TEST(load_engine, foreign_first_reply_is_diagnosed_and_stops_the_run) {
  tcp_server srv(garbage_server("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"));
  auto cfg = config_for(url_of("ringrpc", srv.port(), "/echo"));
  cfg.duration = 10s;
  cfg.diagnose_first_reply = true;
  const auto t = run_load(cfg);
  EXPECT_NE(t.r.diagnosis.find("looks like an HTTP/1.1 server; try http://127.0.0.1:"), std::string::npos)
      << t.r.diagnosis;
  EXPECT_LT(t.wall_s, 3.0 * slow) << "stopped at the first reply, not after the duration";
}

TEST(load_engine, hang_up_before_any_reply_is_diagnosed) {
  tcp_server srv(close_mid_reply_server(""));
  auto cfg = config_for(url_of("http", srv.port(), "/"));
  cfg.duration = 10s;
  cfg.diagnose_first_reply = true;
  const auto t = run_load(cfg);
  EXPECT_NE(t.r.diagnosis.find("closed the connection without answering"), std::string::npos) << t.r.diagnosis;
  EXPECT_LT(t.wall_s, 3.0 * slow);
}

TEST(load_engine, silent_server_is_diagnosed_after_the_silence_limit) {
  tcp_server srv(stall_server);
  auto cfg = config_for(url_of("redis", srv.port()));
  cfg.duration = 10s;
  cfg.diagnose_first_reply = true;
  cfg.silence_limit = 500ms;
  const auto t = run_load(cfg);
  EXPECT_NE(t.r.diagnosis.find("no byte came back"), std::string::npos) << t.r.diagnosis;
  EXPECT_GE(t.wall_s, 0.5);
  EXPECT_LT(t.wall_s, 3.0 * slow);
}

// --rate-ramp and --arrival poisson together on loopback (issue 34): a ramp up and down, each
// segment one step with its ends, Poisson arrivals counted as drawn, every call answered.
TEST(load_engine, poisson_arrivals_over_a_ramp) {
  auto srv = start_ringrpc(2);
  auto cfg = config_for(url_of("ringrpc", srv->port(), "/echo"));
  cfg.connections = 4;
  cfg.depth = 8;
  cfg.warmup = 0ms;
  cfg.steps = {{0, 500'000'000, 2000}, {2000, 500'000'000, 0}};  // 500 calls expected in each
  cfg.poisson_arrivals = true;
  cfg.seed = 34;
  const auto t = run_load(cfg);
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  ASSERT_EQ(t.r.steps.size(), 2u);
  for (const auto& st : t.r.steps) {
    EXPECT_EQ(st.requested_rate, 1000);
    EXPECT_GE(st.scheduled, 400u);  // Poisson: 500 +- 4.5 standard deviations
    EXPECT_LE(st.scheduled, 600u);
    EXPECT_LE(st.issued, st.scheduled);
    EXPECT_GE(st.issued + cfg.connections * cfg.depth, st.scheduled);
    EXPECT_LE(st.answered, st.issued);
  }
  EXPECT_EQ(t.r.steps[0].ramp_from, 0);
  EXPECT_EQ(t.r.steps[0].ramp_to, 2000);
  EXPECT_EQ(t.r.steps[1].ramp_to, 0);
  EXPECT_GT(t.r.calls_ok, 0u);
}

// --conn-ramp 1:4: one connection at the start, the other three opened later (the first of
// them 200 ms after the start), all four by the end, calls answered on them.
TEST(load_engine, connection_ramp_opens_connections_progressively) {
  tcp_server srv(echo_server);
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.threads = 2;
  cfg.connections = 4;
  cfg.depth = 2;
  cfg.conn_ramp_from = 1;
  cfg.conn_ramp_time = 600ms;
  std::atomic<unsigned> early{99};
  std::thread watch([&] {
    std::this_thread::sleep_for(100ms);  // the clock starts after this thread does: < 200 ms in
    early = srv.accepted();
  });
  const auto t = run_load(cfg);
  watch.join();
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_LE(early.load(), 1u) << "connections opened before their time";
  EXPECT_EQ(srv.accepted(), 4u);
  EXPECT_GT(t.r.calls_ok, 0u);
}

// --conn-ramp 4:1: four connections at the start; three stop taking calls one after another
// over 450 ms and close once answered, so the server sees 4 open, then 1. No call is lost: every
// one the server received is counted ok, but for those still in flight on the last connection
// when the duration ends (answered after it, so not measured: at most the depth).
TEST(load_engine, connection_ramp_down_closes_connections_progressively) {
  std::atomic<int> open{0};
  std::atomic<std::uint64_t> received_bytes{0};
  tcp_server srv([&](peer& p) {
    ++open;
    std::string buf;
    while (p.read_some(buf)) {
      received_bytes.fetch_add(buf.size());
      if (!p.write_all(buf)) break;
      buf.clear();
    }
    --open;
  });
  auto cfg = config_for(url_of("echo", srv.port()));
  cfg.threads = 2;
  cfg.connections = 4;
  cfg.depth = 2;
  cfg.conn_ramp_from = 4;
  cfg.conn_ramp_to = 1;
  cfg.conn_ramp_time = 450ms * slow;
  std::atomic<int> early{-1}, late{-1};
  std::thread watch([&] {
    std::this_thread::sleep_for(60ms * slow);  // the first closes 150 ms in
    early = open.load();
    std::this_thread::sleep_for(700ms * slow);  // the ramp ended 450 ms in
    late = open.load();
  });
  const auto t = run_load(cfg);
  watch.join();
  EXPECT_EQ(t.r.error_total(), 0u) << errors_text(t.r);
  EXPECT_EQ(early.load(), 4) << "connections closed before their time";
  EXPECT_EQ(late.load(), 1) << "the ramp down did not close three of the four";
  EXPECT_EQ(srv.accepted(), 4u) << "a ramped-down connection was reopened";
  EXPECT_GT(t.r.calls_ok, 0u);
  const std::uint64_t server_calls = received_bytes.load() / 64;  // 64-byte echoes
  EXPECT_LE(t.r.calls_ok, server_calls);
  EXPECT_LE(server_calls - std::min(server_calls, t.r.calls_ok), std::uint64_t{cfg.depth})
      << "calls the server received that were never counted: lost in the ramp down";
}

}  // namespace
}  // namespace ringrpc::load

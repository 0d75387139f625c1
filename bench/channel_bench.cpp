// The cost of a channel over a plain client, and how each policy spreads calls.
//
//   channel_bench RINGRPC_SERVER [--rounds N] [--seconds S] [--window W]
//
// 1. Overhead: one ringrpc-server child process (readers 1, handlers 1) on loopback; rounds
//    alternate a plain ringrpc::client and a one-member ringrpc::channel, each keeping W echo
//    calls in flight for S seconds (closed loop, the next call issued from the reply's
//    callback). Per round: calls/s and this process's CPU per call (getrusage: the client
//    side only, the server is another process). Prints median [min, max] of each and the
//    channel/client ratio of the medians.
// 2. Distribution: three servers, one channel per policy, W calls in flight for S seconds;
//    prints each member's share of the calls and the largest share over the mean.
//
// Run under `flock /tmp/ringrpc-bench.lock` (docs/benchmarks.md, "Noise").

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;

struct child {
  pid_t pid = -1;
  std::uint16_t port = 0;
};

std::uint16_t pick_port(unsigned i) { return static_cast<std::uint16_t>(20000 + (::getpid() * 7 + i * 13) % 20000); }

child start_server(const std::string& bin, unsigned index) {
  for (unsigned attempt = 0; attempt < 20; ++attempt) {
    child c;
    c.port = pick_port(index * 31 + attempt);
    const std::string port = std::to_string(c.port);
    std::vector<std::string> argv{bin, "--port", port, "--readers", "1", "--handlers", "1", "--log-level", "warn"};
    // SERVER_CPU: the server pinned to that CPU (the per-core comparison, channel_per_core.sh).
    const char* cpu = std::getenv("SERVER_CPU");
    const std::string exe = cpu != nullptr && *cpu != '\0' ? std::string("/usr/bin/taskset") : bin;
    if (exe != bin) argv.insert(argv.begin(), {exe, "-c", cpu});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&c.pid, exe.c_str(), &fa, nullptr, args.data(), environ) != 0) {
      std::fprintf(stderr, "cannot start %s\n", bin.c_str());
      std::exit(2);
    }
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      try {
        auto cl = ringrpc::client::connect("127.0.0.1", c.port);
        if (cl.call("echo", "x").ok()) return c;
      } catch (const std::exception&) {
      }
      int st = 0;
      if (::waitpid(c.pid, &st, WNOHANG) == c.pid) break;  // port taken: try another
    }
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
  }
  std::fprintf(stderr, "cannot start a server\n");
  std::exit(2);
}

void stop_server(child& c) {
  ::kill(c.pid, SIGTERM);
  ::waitpid(c.pid, nullptr, 0);
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct round_result {
  double calls_per_s = 0;
  double cpu_us_per_call = 0;
};

// Keeps `window` calls in flight through `issue` for `seconds`; `issue(done)` starts one call.
round_result closed_loop(const std::function<void(ringrpc::call_callback)>& issue, unsigned window, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0}, failed{0};
  std::atomic<unsigned> in_flight{0};
  std::function<void()> one;
  one = [&] {
    in_flight.fetch_add(1);
    issue([&](const ringrpc::call_outcome& o) {
      if (o.ok()) {
        done.fetch_add(1, std::memory_order_relaxed);
      } else {
        failed.fetch_add(1, std::memory_order_relaxed);
      }
      const bool again = !stop.load(std::memory_order_relaxed);
      in_flight.fetch_sub(1);
      if (again) one();
    });
  };
  const double cpu0 = cpu_seconds();
  const auto t0 = clock_type::now();
  for (unsigned i = 0; i < window; ++i) one();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const std::uint64_t n = done.load();
  const auto t1 = clock_type::now();
  const double cpu1 = cpu_seconds();
  stop = true;
  while (in_flight.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (failed.load() > 0) std::fprintf(stderr, "warning: %llu calls failed\n", (unsigned long long)failed.load());
  round_result r;
  r.calls_per_s = static_cast<double>(n) / std::chrono::duration<double>(t1 - t0).count();
  r.cpu_us_per_call = n > 0 ? (cpu1 - cpu0) * 1e6 / static_cast<double>(n) : 0;
  return r;
}

struct summary {
  double median, min, max;
};
summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {med, v.front(), v.back()};
}

const std::byte payload[16] = {};

// The per-core comparison (bench/channel_per_core.sh): `connections` plain clients against as
// many one-member channels, all on one shared I/O thread, each keeping `depth` calls in flight
// (the window is depth x connections); alternating rounds, median with min and max.
int per_core(const std::string& bin, unsigned rounds, double seconds, unsigned connections, unsigned depth) {
  child one = start_server(bin, 0);
  const std::string target = "127.0.0.1:" + std::to_string(one.port);
  std::vector<double> plain_rate, plain_cpu, chan_rate, chan_cpu, rate_ratio, cpu_ratio;
  for (unsigned r = 0; r < rounds; ++r) {
    round_result p, c;
    {
      auto rt = ringrpc::client_runtime::create();
      std::vector<ringrpc::client> cl;
      for (unsigned i = 0; i < connections; ++i) cl.push_back(ringrpc::client::connect("127.0.0.1", one.port, {}, rt));
      std::atomic<unsigned> next{0};
      p = closed_loop(
          [&](ringrpc::call_callback cb) {
            cl[next.fetch_add(1, std::memory_order_relaxed) % connections].call_async("echo", payload, std::move(cb));
          },
          connections * depth, seconds);
    }
    {
      auto rt = ringrpc::client_runtime::create();
      std::vector<ringrpc::channel> ch;
      for (unsigned i = 0; i < connections; ++i) {
        ringrpc::channel_options o;
        o.runtime = rt;
        ch.push_back(ringrpc::channel::create(target, o));
      }
      for (auto& x : ch) x.wait_for_members(1, std::chrono::seconds(5));
      std::atomic<unsigned> next{0};
      c = closed_loop(
          [&](ringrpc::call_callback cb) {
            ch[next.fetch_add(1, std::memory_order_relaxed) % connections].call_async("echo", payload, std::move(cb));
          },
          connections * depth, seconds);
    }
    plain_rate.push_back(p.calls_per_s);
    plain_cpu.push_back(p.cpu_us_per_call);
    chan_rate.push_back(c.calls_per_s);
    chan_cpu.push_back(c.cpu_us_per_call);
    rate_ratio.push_back(c.calls_per_s / p.calls_per_s);
    cpu_ratio.push_back(c.cpu_us_per_call / p.cpu_us_per_call);
  }
  stop_server(one);
  const auto pr = summarize(plain_rate), pc = summarize(plain_cpu), cr = summarize(chan_rate),
             cc = summarize(chan_cpu), rr = summarize(rate_ratio), cq = summarize(cpu_ratio);
  std::printf("per-core: %u connections, depth %u, %u alternating rounds of %.1f s\n", connections, depth, rounds,
              seconds);
  std::printf("  %-8s %12s %22s %16s %18s\n", "", "calls/s", "[min, max]", "client us/call", "[min, max]");
  std::printf("  %-8s %12.0f [%9.0f, %9.0f] %16.2f [%7.2f, %7.2f]\n", "client", pr.median, pr.min, pr.max, pc.median,
              pc.min, pc.max);
  std::printf("  %-8s %12.0f [%9.0f, %9.0f] %16.2f [%7.2f, %7.2f]\n", "channel", cr.median, cr.min, cr.max, cc.median,
              cc.min, cc.max);
  std::printf("  channel/client per round: calls/s %.3f [%.3f, %.3f], CPU per call %.3f [%.3f, %.3f]\n", rr.median,
              rr.min, rr.max, cq.median, cq.min, cq.max);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: channel_bench RINGRPC_SERVER [--rounds N] [--seconds S] [--window W]\n"
                 "       channel_bench RINGRPC_SERVER --connections C [--depth D] [--rounds N] [--seconds S]\n");
    return 2;
  }
  const std::string bin = argv[1];
  unsigned rounds = 7, window = 32;
  double seconds = 1.0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--window")) window = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  ::signal(SIGPIPE, SIG_IGN);
  unsigned connections = 0, depth = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--connections")) connections = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--depth")) depth = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  if (connections > 0) return per_core(bin, rounds, seconds, connections, std::max(1u, depth));

  // 1. Overhead with one member.
  child one = start_server(bin, 0);
  const std::string target = "127.0.0.1:" + std::to_string(one.port);
  std::vector<double> plain_rate, plain_cpu, chan_rate, chan_cpu;
  for (unsigned r = 0; r < rounds; ++r) {
    {
      auto cl = ringrpc::client::connect("127.0.0.1", one.port);
      const auto res = closed_loop([&](ringrpc::call_callback cb) { cl.call_async("echo", payload, std::move(cb)); },
                                   window, seconds);
      plain_rate.push_back(res.calls_per_s);
      plain_cpu.push_back(res.cpu_us_per_call);
    }
    {
      auto ch = ringrpc::channel::create(target);
      ch.wait_for_members(1, std::chrono::seconds(5));
      const auto res = closed_loop([&](ringrpc::call_callback cb) { ch.call_async("echo", payload, std::move(cb)); },
                                   window, seconds);
      chan_rate.push_back(res.calls_per_s);
      chan_cpu.push_back(res.cpu_us_per_call);
    }
  }
  stop_server(one);
  const auto pr = summarize(plain_rate), pc = summarize(plain_cpu), cr = summarize(chan_rate), cc = summarize(chan_cpu);
  std::printf("overhead: one member, %u calls in flight, %u alternating rounds of %.1f s\n", window, rounds, seconds);
  std::printf("  %-8s %12s %22s %16s %18s\n", "", "calls/s", "[min, max]", "client us/call", "[min, max]");
  std::printf("  %-8s %12.0f [%9.0f, %9.0f] %16.2f [%7.2f, %7.2f]\n", "client", pr.median, pr.min, pr.max, pc.median,
              pc.min, pc.max);
  std::printf("  %-8s %12.0f [%9.0f, %9.0f] %16.2f [%7.2f, %7.2f]\n", "channel", cr.median, cr.min, cr.max, cc.median,
              cc.min, cc.max);
  std::printf("  channel/client: calls/s %.3f, CPU per call %.3f\n", cr.median / pr.median, cc.median / pc.median);

  // 2. Distribution over three members per policy.
  std::vector<child> three;
  std::string list;
  for (unsigned i = 0; i < 3; ++i) {
    three.push_back(start_server(bin, i + 1));
    if (!list.empty()) list += ",";
    list += "127.0.0.1:" + std::to_string(three.back().port);
  }
  std::printf("distribution: 3 members, %u calls in flight, %.1f s per policy\n", window, seconds);
  for (auto policy : {ringrpc::balancing_policy::round_robin, ringrpc::balancing_policy::least_outstanding,
                      ringrpc::balancing_policy::power_of_two_choices}) {
    ringrpc::channel_options opt;
    opt.policy = policy;
    auto ch = ringrpc::channel::create(list, opt);
    ch.wait_for_members(3, std::chrono::seconds(5));
    const auto res = closed_loop([&](ringrpc::call_callback cb) { ch.call_async("echo", payload, std::move(cb)); },
                                 window, seconds);
    std::uint64_t total = 0, top = 0;
    const auto members = ch.members();
    for (const auto& m : members) {
      total += m.calls;
      top = std::max(top, m.calls);
    }
    std::printf("  %-18s %9.0f calls/s  shares:", std::string(ringrpc::to_string(policy)).c_str(), res.calls_per_s);
    for (const auto& m : members) std::printf(" %5.1f%%", 100.0 * static_cast<double>(m.calls) / static_cast<double>(total));
    std::printf("  max/mean %.3f\n", static_cast<double>(top) * 3 / static_cast<double>(total));
  }
  for (auto& c : three) stop_server(c);
  return 0;
}

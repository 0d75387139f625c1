// ringrpc-load: drives a ringrpc server with pipelined calls and reports throughput and latency.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <regex>
#include <string>

#include "closed_loop.hpp"

namespace {

// "10s", "500ms", "1m", "2" (seconds).
std::chrono::milliseconds parse_duration(const std::string& text) {
  std::size_t used = 0;
  const double v = std::stod(text, &used);
  const std::string unit = text.substr(used);
  double ms = 0;
  if (unit.empty() || unit == "s") ms = v * 1000;
  else if (unit == "ms") ms = v;
  else if (unit == "m") ms = v * 60'000;
  else if (unit == "us") ms = v / 1000;
  else throw std::invalid_argument("unknown time unit '" + unit + "' (use us, ms, s or m)");
  if (ms < 0) throw std::invalid_argument("durations cannot be negative");
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

// "64", "4k", "1m" (binary multiples).
std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  const unsigned long long v = std::stoull(text, &used);
  const std::string unit = text.substr(used);
  if (unit.empty()) return v;
  if (unit == "k" || unit == "K") return v << 10;
  if (unit == "m" || unit == "M") return v << 20;
  throw std::invalid_argument("unknown size unit '" + unit + "' (use k or m)");
}

}  // namespace

int main(int argc, char** argv) {
  ringrpc::tools::closed_loop_config cfg;
  std::string target, duration = "10s", warmup = "1s", size = "64", timeout = "0";
  CLI::App app{"ringrpc-load: closed-loop load generator for ringrpc servers.\n"
               "Example: ringrpc-load -c 64 -d 16 -T 10s ringrpc://127.0.0.1:7000/echo"};
  app.add_option("target", target, "ringrpc://HOST:PORT/METHOD")->required();
  app.add_option("-c,--connections", cfg.connections, "connections in total")->capture_default_str();
  app.add_option("-d,--depth", cfg.depth, "calls in flight per connection")->capture_default_str();
  app.add_option("-t,--threads", cfg.threads, "I/O threads (one ring each)")->capture_default_str();
  app.add_option("-T,--duration", duration, "measured time (us, ms, s, m)")->capture_default_str();
  app.add_option("--warmup", warmup, "time run first and excluded")->capture_default_str();
  app.add_option("-s,--size", size, "payload bytes (k, m suffixes)")->capture_default_str();
  app.add_option("--timeout", timeout, "per-call deadline; 0 = none")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const std::regex url(R"(ringrpc://([^:/]+):(\d+)/(.+))");
    std::smatch m;
    if (!std::regex_match(target, m, url)) {
      throw std::invalid_argument("target must look like ringrpc://HOST:PORT/METHOD, got '" +
                                  target + "'");
    }
    cfg.host = m[1];
    cfg.port = static_cast<std::uint16_t>(std::stoul(m[2]));
    cfg.method = m[3];
    cfg.duration = parse_duration(duration);
    cfg.warmup = parse_duration(warmup);
    cfg.payload_bytes = parse_size(size);
    cfg.call_timeout = std::chrono::duration_cast<std::chrono::microseconds>(parse_duration(timeout));
    if (cfg.connections == 0 || cfg.depth == 0) throw std::invalid_argument("-c and -d must be >= 1");

    std::printf("ringrpc-load: %s, %u connections x depth %u, %u thread(s), %zu-byte payload, "
                "%.1fs measured after %.1fs warm-up\n",
                target.c_str(), cfg.connections, cfg.depth, cfg.threads, cfg.payload_bytes,
                cfg.duration.count() / 1000.0, cfg.warmup.count() / 1000.0);
    std::fflush(stdout);
    const auto r = ringrpc::tools::run_closed_loop(cfg);
    auto us = [&](double p) { return static_cast<double>(r.latency_ns.value_at_percentile(p)) / 1000.0; };
    std::uint64_t errors = 0;
    for (const auto& [k, v] : r.errors) errors += v;
    std::printf("%-12s %14.0f\n", "calls/s", r.calls_per_sec());
    std::printf("%-12s %14llu\n", "calls ok", static_cast<unsigned long long>(r.calls_ok));
    std::printf("%-12s %14llu\n", "errors", static_cast<unsigned long long>(errors));
    for (const auto& [k, v] : r.errors) {
      std::printf("  %-10s %14llu\n", k.c_str(), static_cast<unsigned long long>(v));
    }
    std::printf("latency (us)   p50 %.1f   p90 %.1f   p99 %.1f   p99.9 %.1f   max %.1f\n", us(50),
                us(90), us(99), us(99.9), static_cast<double>(r.latency_ns.max()) / 1000.0);
    return errors == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-load: %s\n", e.what());
    return 2;
  }
}

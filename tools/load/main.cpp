// ringrpc-load: a load generator for ringrpc, echo, redis and HTTP servers on io_uring.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "engine.hpp"
#include "grpc_request.hpp"
#include "hdr_log.hpp"
#include "interrupt.hpp"
#include "live_output.hpp"
#include "large_buffers.hpp"
#include "open_files.hpp"
#include "output_file.hpp"
#include "protocol.hpp"
#include "report.hpp"
#include "ringrpc/version.hpp"
#include "server_cost.hpp"
#include "shard.hpp"
#include "sniff.hpp"
#include "template_options.hpp"
#include "typed_template.hpp"
#include "thresholds.hpp"
#include "typed_json.hpp"
#include "units.hpp"
#if RINGRPC_HAVE_TLS
#include "ringrpc/tls.hpp"
#endif

namespace {

// The client side of a TLS target: what to trust, who we are, and the ALPN its server expects
// (nginx refuses a handshake whose offer it cannot match).
std::shared_ptr<ringrpc::record_layer> make_tls_layer(const ringrpc::load::target& t, const std::string& cacert,
                                                      const std::string& cert, const std::string& key,
                                                      bool insecure, unsigned connections) {
#if RINGRPC_HAVE_TLS
  ringrpc::tls_client_options o;
  // Busy connections: OpenSSL freeing and allocating its record buffers around every record
  // was 2.5 % of the CPU against nginx; past 4096 connections the 34 KiB each (140 MB) count more.
  o.keep_record_buffers = connections <= 4096;
  o.ca_file = cacert;
  o.cert_file = cert;
  o.key_file = key;
  o.insecure = insecure;
  if (t.scheme == "http") o.alpn = {"http/1.1"};
  if (t.scheme == "h2c" || t.scheme == "grpc") o.alpn = {"h2"};
  if (t.scheme == "redis") o.alpn = {"redis"};
  if (cert.empty() != key.empty()) throw std::invalid_argument("--cert and --key go together");
  return ringrpc::tls_context::client(o);
#else
  (void)t, (void)cacert, (void)cert, (void)key, (void)insecure, (void)connections;
  throw std::invalid_argument(t.scheme + " over TLS: this ringrpc-load was built without TLS (-Dtls=disabled); "
                              "rebuild with OpenSSL 3 (libssl-dev) for " + ringrpc::load::tls_scheme_of(t.scheme) + "://");
#endif
}

using namespace ringrpc::load;

// "echo:9,sleep:1" / "PING:1,GET:8,SET:1" / "GET /a:3,POST /b:1": name[:weight] entries.
std::vector<request_kind> parse_mix(const std::string& text, const target& t) {
  std::vector<request_kind> kinds;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    request_kind k;
    const auto colon = item.rfind(':');
    std::string name = item;
    if (colon != std::string::npos && item.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
        colon + 1 < item.size()) {
      name = item.substr(0, colon);
      k.weight = static_cast<unsigned>(std::stoul(item.substr(colon + 1)));
      if (k.weight == 0) throw std::invalid_argument("--mix weight must be >= 1 in '" + item + "'");
    }
    if (name.empty()) throw std::invalid_argument("--mix entry '" + item + "' has no name");
    k.name = name;
    if (t.scheme == "grpc") {
      if (name.find('/') == std::string::npos) throw std::invalid_argument("--mix entry '" + item + "' is not package.Service/Method");
      k.method = "POST";
      k.path = "/" + name;
    } else if (t.scheme == "http" || t.scheme == "h2c") {
      const auto space = name.find(' ');
      k.method = space == std::string::npos ? "GET" : name.substr(0, space);
      k.path = space == std::string::npos ? name : name.substr(space + 1);
    } else {
      k.method = name;
    }
    kinds.push_back(k);
  }
  if (kinds.empty()) throw std::invalid_argument("--mix is empty");
  return kinds;
}

// --method: the request JSON converted once, here, into options.payload with the method's schema
// (or, with placeholders, compiled into `message`)
// (from --schema or the server's reflection endpoint, asked with the run's metadata). Returns the
// wire method name ("Greeter.SayHello" even when the service was given qualified).
std::string typed_payload(const target& t, const std::string& method, const std::string& json,
                          const std::string& schema_file, const std::vector<std::string>& includes,
                          std::chrono::nanoseconds connect_timeout, codec_options& options,
                          std::shared_ptr<const message_template>& message) {
  std::vector<std::byte>& payload = options.payload;
  using namespace ringrpc::tools;
  const std::vector<ringrpc::metadata_entry> call_metadata = ringrpc_call_metadata(options);
  try {
    const auto dot = method.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == method.size()) {
      throw std::invalid_argument("--method '" + method + "' is not Service.Method");
    }
    auto schema = [&] {
      if (!schema_file.empty()) return typed_schema::from_file(schema_file, includes);
      ringrpc::client_options o;
      o.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(connect_timeout);
      auto c = ringrpc::client::connect(t.host, t.port, o);
      ringrpc::call_options co;
      co.timeout = std::chrono::seconds(10);
      co.metadata = call_metadata;  // a server with bearer tokens wants one for reflection too
      return fetch_schema(c, method.substr(0, dot), co);
    }();
    const method_info& m = schema.method(method);
    if (!m.streaming.empty()) {
      // --method sends unary calls; a typed stream's messages are not what --stream sends either.
      throw std::invalid_argument("--method " + method + " is a " + m.streaming +
                                  " stream method; --method calls unary methods");
    }
    std::string text = json;
    if (!text.empty() && text[0] == '@') {
      std::ifstream in(text.substr(1), std::ios::binary);
      if (!in) throw std::invalid_argument("cannot read --data " + text);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (json_placeholders::present(text)) {
      message = typed_template_from_json(schema, m.request, text);
      return m.full_name;
    }
    const auto bytes = schema.to_binary(m.request, text);
    payload.assign(reinterpret_cast<const std::byte*>(bytes.data()),
                   reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    return m.full_name;
  } catch (const tool_error& e) {
    throw std::invalid_argument(std::string("--method ") + method + ": " + e.what());
  } catch (const std::system_error& e) {
    throw std::invalid_argument("cannot connect to " + t.host + ":" + std::to_string(t.port) +
                                " for the schema of --method " + method + ": " + e.what());
  }
}

double epoch_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void print_live(bool tty, double elapsed, const std::vector<live_counters*>& live, std::uint64_t& last_ok) {
  std::uint64_t ok = 0, errors = 0, p99 = 0;
  for (auto* l : live) {
    ok += l->calls_ok.load(std::memory_order_relaxed);
    errors += l->errors.load(std::memory_order_relaxed);
    p99 = std::max<std::uint64_t>(p99, l->last_second_p99_ns.load(std::memory_order_relaxed));
  }
  const std::uint64_t rate = ok - last_ok;
  last_ok = ok;
  std::fprintf(stderr, "%s[%5.1fs] %10llu calls/s   p99 %9.1f us   errors %llu%s", tty ? "\r" : "",
               elapsed, static_cast<unsigned long long>(rate), static_cast<double>(p99) / 1000.0,
               static_cast<unsigned long long>(errors), tty ? "   " : "\n");
  std::fflush(stderr);
}

int run_merge(const std::vector<std::string>& files, const std::vector<double>& percentiles) {
  run_result merged;
  double first_start = 1e300, last_end = 0;
  bool first = true;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw std::runtime_error("cannot open " + f);
    ringrpc::detail::interval_log_reader reader(in);
    for (auto& iv : reader.read_all()) {
      // Merge in the logs' own layout (which other HdrHistogram tools may choose too).
      if (first) {
        merged.latency_ns = iv.histogram;
        merged.latency_ns.reset();
        first = false;
      }
      merged.latency_ns.merge(iv.histogram);
      merged.calls_ok += iv.histogram.count();
      first_start = std::min(first_start, iv.start_s);
      last_end = std::max(last_end, iv.start_s + iv.interval_s);
    }
  }
  merged.measured_s = last_end > first_start ? last_end - first_start : 0;
  merged.config["merged_files"] = files.size();
  std::cout << format_summary(merged, percentiles);
  return 0;
}

int run_plot(const std::vector<std::string>& files, const std::string& out_path) {
  output_file out(out_path);
  std::vector<plot_series> series;
  for (const auto& f : files) series.push_back(read_plot_series(f));
  out.commit(render_svg(series));
  if (!out.is_stdout()) std::cout << "wrote " << out_path << "\n";
  return 0;
}

// The length the run was given: the steps' total in an open loop (not -d's default), 0 for -n
// alone; what it measured is measured_s.
double scheduled_seconds(const engine_config& cfg) {
  if (cfg.steps.empty()) return static_cast<double>(cfg.duration.count()) / 1e9;
  double s = 0;
  for (const auto& st : cfg.steps) s += static_cast<double>(st.duration_ns) / 1e9;
  return s;
}

// --rate-ramp's segments as run (this shard's share): [{from, to, duration_s}, ...].
nlohmann::json ramp_config(const engine_config& cfg) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& st : cfg.steps) {
    out.push_back({{"from", st.rate}, {"to", st.rate_to}, {"duration_s", static_cast<double>(st.duration_ns) / 1e9}});
  }
  return out;
}

std::string read_payload_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read --payload-file " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// -H as the summary and JSON show it: a credential's value is not written out with the results.
std::vector<std::string> shown_headers(std::vector<std::string> headers) {
  for (std::string& h : headers) {
    const auto sep = h.find_first_of(":=");
    std::string name = h.substr(0, sep);
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (sep != std::string::npos && (name == "authorization" || name == "proxy-authorization")) {
      h = h.substr(0, sep + 1) + " (hidden)";
    }
  }
  return headers;
}

// --max-body, or its default: 1 MiB, but room for an echo of a larger request payload.
std::uint32_t reply_limit(const std::string& text, const target& t, std::size_t payload_bytes) {
  if (!text.empty()) {
    const std::uint64_t n = parse_size(text);
    if (n == 0 || n > (1ull << 31)) throw std::invalid_argument("--max-body must be 1 .. 2g bytes");
    return static_cast<std::uint32_t>(n);
  }
  const bool echoes = t.scheme == "ringrpc" || t.scheme == "echo";
  if (!echoes) return default_max_reply_bytes;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(payload_bytes + (64u << 10), default_max_reply_bytes, 1ull << 31));
}

// --server-pid or --server-metrics: checked now (the first sample is taken), so that a wrong
// PID or URL fails before the run.
std::unique_ptr<server_cost_meter> make_server_meter(const std::string& pid, const std::string& url) {
  if (!pid.empty() && !url.empty()) throw std::invalid_argument("give --server-pid or --server-metrics, not both");
  if (!pid.empty()) {
    if (pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument("--server-pid '" + pid + "' is not a process id");
    }
    return std::make_unique<server_cost_meter>("pid " + pid, pid_cpu_reader(std::stol(pid)));
  }
  if (url.empty()) return nullptr;
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    throw std::invalid_argument("--server-metrics takes an http:// or https:// URL, got '" + url + "'");
  }
  return std::make_unique<server_cost_meter>(url, metrics_cpu_reader(url));
}

std::string hdr_log_text(const run_result& r, double measured_epoch) {
  std::ostringstream out;
  ringrpc::detail::interval_log_writer w(out);
  w.write_header(measured_epoch);
  for (std::size_t i = 0; i < r.interval_latency_ns.size(); ++i) {
    // A last interval cut short (SIGINT) carries its own width.
    const double width = i < r.per_second.size() ? r.per_second[i].width_s : 1.0;
    w.write_interval(static_cast<double>(i), width, r.interval_latency_ns[i]);
  }
  return out.str();
}

/// Everything the command line says, as given; checked and turned into a run below.
struct cli_args {
  std::string url, d_text, duration = "10s", warmup, size = "64", payload_file, rate, rate_steps, step_time = "5s",
              connect_timeout = "3s", call_timeout = "0", mix, percentiles_text, json_path, hdr_path, plot_path, html_path,
              typed_method, data, schema_file, proto_file, shard_text, start_at_text, max_body, batch_window,
              latency_clock = "kernel", arrival = "uniform", seed, conn_ramp, server_pid, server_metrics, tls_cacert, tls_cert, tls_key;
  std::vector<std::string> schema_includes, headers, fail_if, rate_ramps;
  template_args templates;  // --template, --redis-key, --data-file
  std::string live_path, metrics_addr = "127.0.0.1";  // --live, --metrics-addr
  int metrics_port = -1;  // --metrics-port; -1: none
  bool uses_random = false;  // a template draws {random:N}: --seed applies
  std::uint64_t count = 0, key_space = 100000;
  bool verify = false, wrk_latency = false, tls_insecure = false, stream = false;
  // Which options were given at all (a default and an explicit equal value differ here).
  bool given_connections = false, given_duration = false, given_size = false, given_data = false, given_schema = false, given_include = false;
  // The subcommands.
  bool merge = false, plot = false;
  std::vector<std::string> merge_files, plot_files;
  std::string plot_out = "ringrpc-load.svg";

  bool typed() const { return !typed_method.empty(); }
};

constexpr const char* footer_text =
    "Signals: SIGINT ends the run early with all its results (summary, --json,\n"
    "--hdr-log, --plot, --html); a second SIGINT exits at once (130), writes nothing.\n"
    "SIGTERM and others have their default effect.\n"
    "Exit status: 0 no error in the measured window (also --help, --version,\n"
    "merge, plot); 2 usage, a target unreachable at start or not speaking the\n"
    "URL's protocol, io_uring unusable, an output that cannot be written; 3 the run\n"
    "had errors; 4 a --fail-if condition held; 5 stopped early: every first answer\n"
    "was an error no retry changes (unknown_method, unauthenticated, http_404, ...);\n"
    "130 a second SIGINT.";

void add_run_options(CLI::App& app, cli_args& a, engine_config& cfg) {
  app.add_option("url", a.url, "target URL");
  app.add_option("-t,--threads", cfg.threads, "threads, each with a ring")->capture_default_str();
  app.add_option("-c,--connections", cfg.connections, "connections in total")->capture_default_str();
  app.add_option("-d", a.d_text, "duration, as in wrk: 10s 2m; 30 = 30 s [10s]");
  app.add_option("-z,--duration", a.duration, "duration (us ms s m h; bare: s)")->capture_default_str();
  app.add_flag("--latency", a.wrk_latency, "wrk's flag: percentiles always shown");
  app.add_option("-P,--depth", cfg.depth, "calls in flight per connection")->capture_default_str();
  app.add_flag("--stream", a.stream, "ringrpc, grpc: a bidi stream per conn, -P msgs");
  // --latency-clock and --reply-batch-window are named in --reply-batch's line and in
  // docs/load.md, to keep --help one screen.
  app.add_option("--reply-batch", cfg.reply_batch, "closed loop: wake per N replies; --latency-clock")
      ->capture_default_str();
  app.add_option("--latency-clock", a.latency_clock, "")->group("");
  app.add_option("--reply-batch-window", a.batch_window, "")->group("");
  // --arrival (with --seed), --step-time and --conn-ramp are named in these lines and in
  // docs/load.md, to keep --help one screen.
  app.add_option("-R,--rate", a.rate, "open loop: total calls/s (k, M); --arrival");
  app.add_option("--rate-steps", a.rate_steps, "open loop in steps: 10k,20k; --step-time");
  app.add_option("--step-time", a.step_time, "")->group("");
  app.add_option("--rate-ramp", a.rate_ramps, "open loop: FROM:TO:TIME,...; --conn-ramp")->allow_extra_args(false);
  app.add_option("--arrival", a.arrival, "")->group("");
  app.add_option("--seed", a.seed, "")->group("");
  app.add_option("--conn-ramp", a.conn_ramp, "")->group("");
  app.add_option("-n,--count", a.count, "stop after this many calls");
  app.add_option("--warmup", a.warmup, "excluded from results [1s]");
  // --payload-file, --redis-key and --data-file are named in these lines and in docs/load.md,
  // to keep --help one screen.
  app.add_option("-s,--size", a.size, "payload bytes (k, m); or --payload-file")->capture_default_str();
  app.add_option("--data", a.data, "--method/--proto: request JSON, or @FILE [{}]");
  app.add_option("--payload-file", a.payload_file, "")->group("");
  app.add_option("--template", a.templates.payload, "per call: {seq} {random:N} {line}, --data-file");
  app.add_option("--redis-key", a.templates.redis_key, "")->group("");
  app.add_option("--data-file", a.templates.data_file, "")->group("");
  app.add_option("-H,--header", a.headers, "'Name: value' (repeat); ringrpc: metadata")->allow_extra_args(false);
  app.add_option("--max-body", a.max_body, "fail a reply larger than this [1m]");
  // --server-metrics is named in --server-pid's line, to keep --help one screen.
  app.add_option("--server-pid", a.server_pid, "target's CPU/call; or --server-metrics URL")->type_name("PID");
  app.add_option("--server-metrics", a.server_metrics, "")->group("");
  app.add_option("--mix", a.mix, "weighted kinds, e.g. GET:8,SET:1");
  app.add_option("--method", a.typed_method, "ringrpc: typed Service.Method, --data JSON");
  // --schema is named in -I's line and in docs/load.md, to keep --help one screen.
  app.add_option("--schema", a.schema_file, "")->group("");
  app.add_option("--proto", a.proto_file, "grpc: .proto file for --data");
  app.add_option("-I,--include", a.schema_includes, "include path for --schema/--proto")->allow_extra_args(false);
  app.add_option("--key-space", a.key_space, "redis: keys key:0 .. key:N-1; --redis-key")->capture_default_str();
  // --connect-timeout is named in --timeout's line and in docs/load.md, to keep --help one
  // screen (--stream has a line of its own).
  app.add_option("--connect-timeout", a.connect_timeout, "")->group("");
  app.add_option("--timeout", a.call_timeout, "per-call timeout, 0 = none; --connect-timeout")
      ->capture_default_str();
  app.add_option("-p,--percentiles", a.percentiles_text, "e.g. 50,99,99.9");
  app.add_option("--fail-if", a.fail_if, "exit 4 if: p99>2ms,errors>0.1%,rate<90%")->allow_extra_args(false);
  app.add_option("--json", a.json_path, "write results as JSON (- = stdout)");
  // --metrics-port and --metrics-addr are named in --live's line and in docs/load.md.
  app.add_option("--live", a.live_path, "a JSON line a second (- = stdout); --metrics-port");
  app.add_option("--metrics-port", a.metrics_port, "")->group("");
  app.add_option("--metrics-addr", a.metrics_addr, "")->group("");
  app.add_option("--hdr-log", a.hdr_path, "write per-second HdrHistogram log");
  // --html is named in --plot's line and in docs/load.md, to keep --help one screen.
  app.add_option("--plot", a.plot_path, "write an SVG plot; --html FILE: HTML report");
  app.add_option("--html", a.html_path, "")->group("");
  app.add_option("--shard", a.shard_text, "host K of N: its share of -c -R -n");
  app.add_option("--start-at", a.start_at_text, "start at @UNIX_S or RFC 3339 UTC");
  // Neither wrk nor h2load has this: every call opens its own connection (TLS: a full
  // handshake), which we close after the reply; the summary gives connections/s.
  app.add_flag("--verify", a.verify, "ringrpc: error unless reply == request bytes");
  app.add_flag("--new-conn-per-call", cfg.new_connection_per_call, "every call on a fresh connection (TLS: handshake)");
  const std::string tls_group = "TLS (https h2 ringrpcs rediss grpcs)";
  app.add_option("--cacert", a.tls_cacert, "PEM CAs to verify the server [system]")->group(tls_group);
  app.add_flag("-k,--insecure", a.tls_insecure, "do not verify the server")->group(tls_group);
  app.add_option("--cert", a.tls_cert, "PEM client certificate (mutual TLS)")->group(tls_group);
  app.add_option("--key", a.tls_key, "PEM key of --cert")->group(tls_group);
}

/// Parses the command line. A status to exit with at once (help, version: 0; usage: 2), or
/// nullopt to go on.
std::optional<int> parse_command_line(int argc, char** argv, cli_args& a, engine_config& cfg) {
  CLI::App app{"ringrpc-load: a load generator on io_uring. ringrpc-load [options] URL\n"
               "  URL: ringrpc://H:P/method echo://H:P redis://H:P http://H:P/path ([::1]:P)\n"
               "       h2c://H:P/path grpc://H:P/pkg.Service/Method etcd://H:P/service/method\n"
               "       over TLS: ringrpcs:// rediss:// https:// h2:// grpcs:// (TLS options)",
               "ringrpc-load"};
  app.require_subcommand(0, 1);
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version", "ringrpc-load " + std::string(ringrpc::version()));
  app.footer(footer_text);
  add_run_options(app, a, cfg);
  auto* merge = app.add_subcommand("merge", "merge --hdr-log files into one summary");
  merge->add_option("files", a.merge_files, "interval logs")->required();
  auto* plot = app.add_subcommand("plot", "overlay --json files in one SVG");
  plot->add_option("files", a.plot_files, "JSON results")->required();
  plot->add_option("-o,--output", a.plot_out, "SVG file")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as documented, with our prefix.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ringrpc-load: %s (see --help)\n", e.what());
    return 2;
  }
  a.merge = merge->parsed();
  a.plot = plot->parsed();
  a.given_duration = app.count("--duration") != 0;
  a.given_connections = app.count("--connections") != 0;
  a.given_size = app.count("--size") != 0;
  a.given_data = app.count("--data") != 0;
  a.given_schema = app.count("--schema") != 0;
  a.given_include = app.count("--include") != 0;
  return std::nullopt;
}

std::string lower_scheme(const std::string& url) {
  const auto sep = url.find("://");
  std::string scheme = url.substr(0, sep == std::string::npos ? 0 : sep);
  for (auto& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return scheme;
}

/// Where the payload comes from: -s, --payload-file, --method's or --proto's --data, --mix. Each
/// source excludes the others it cannot go with.
void check_payload_sources(const cli_args& a) {
  const bool grpc = lower_scheme(a.url) == "grpc";
  if (!a.proto_file.empty() && !grpc) throw std::invalid_argument("--proto goes with grpc:// targets");
  if (grpc && a.given_schema) throw std::invalid_argument("grpc:// takes its schema from --proto FILE, not --schema");
  if (grpc && a.given_data && a.proto_file.empty()) {
    throw std::invalid_argument("--data for grpc:// needs --proto FILE to convert the JSON; raw message bytes "
                                "come from --payload-file");
  }
  if (grpc && !a.proto_file.empty() && (a.given_size || !a.payload_file.empty() || !a.mix.empty())) {
    throw std::invalid_argument("--proto makes the request from --data; it excludes -s, --payload-file and --mix");
  }
  if (!a.typed() && !grpc && (a.given_data || a.given_schema || a.given_include)) {
    // As in ghz, --data is a request as JSON, converted with the method's schema.
    throw std::invalid_argument("--data, --schema and -I go with --method (--data is the request as JSON); "
                                "raw payload bytes come from -s or --payload-file");
  }
  if (!a.templates.payload.empty() && (a.given_size || !a.payload_file.empty() || a.typed() || !a.proto_file.empty())) {
    throw std::invalid_argument("--template is the payload: it excludes -s, --payload-file, --method and --proto "
                                "(their --data JSON takes the placeholders itself)");
  }
  if (a.given_size && !a.payload_file.empty()) throw std::invalid_argument("give the payload once: -s or --payload-file");
  if (a.typed()) {
    if (a.given_size || !a.payload_file.empty() || !a.mix.empty()) {
      throw std::invalid_argument("--method makes the payload from --data; it excludes -s, --payload-file and --mix");
    }
    if (lower_scheme(a.url) != "ringrpc") throw std::invalid_argument("--method works with ringrpc:// targets only");
  }
}

/// The URL's endpoints (a registry lists several), and the -H check that depends on its scheme.
void resolve_target(const cli_args& a, engine_config& cfg) {
  std::string url = a.url;
  // The method may be left out of the URL: ringrpc://HOST:PORT --method Service.Method.
  if (a.typed() && a.url.find('/', a.url.find("://") + 3) == std::string::npos) url += "/" + a.typed_method;
  cfg.endpoints = resolve_endpoints(url);
  cfg.where = cfg.endpoints.front();
  cfg.per_endpoint = is_registry_url(a.url);
  if (cfg.per_endpoint) {
    std::string listed;
    for (const auto& e : cfg.endpoints) listed.append(listed.empty() ? "" : ", ").append(authority_of(e));
    std::fprintf(stderr, "ringrpc-load: %s lists %zu member(s): %s\n", a.url.c_str(), cfg.endpoints.size(),
                 listed.c_str());
  }
  if (!a.headers.empty() && (cfg.where.scheme == "echo" || cfg.where.scheme == "redis")) {
    throw std::invalid_argument("-H goes with http://, h2c://, grpc:// and ringrpc:// targets");
  }
}

std::vector<std::byte> as_bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

/// The request every call sends: made from --method's or --proto's JSON, read from a file, or
/// -s bytes of 'x'. --method's and --proto's JSON with placeholders make `message` instead.
void make_payload(const cli_args& a, engine_config& cfg, codec_options& co,
                  std::shared_ptr<const message_template>& message) {
  const bool grpc = lower_scheme(a.url) == "grpc";
  if (a.typed()) {
    if (cfg.where.path != a.typed_method) {
      throw std::invalid_argument("the URL names method '" + cfg.where.path + "' and --method '" + a.typed_method +
                                  "'; give it once");
    }
    cfg.where.path = typed_payload(cfg.where, a.typed_method, a.data.empty() ? std::string("{}") : a.data,
                                   a.schema_file, a.schema_includes, parse_duration(a.connect_timeout), co, message);
  } else if (grpc && !a.proto_file.empty()) {
    std::string text = a.data.empty() ? std::string("{}") : a.data;
    if (text[0] == '@') {
      std::ifstream in(text.substr(1), std::ios::binary);
      if (!in) throw std::invalid_argument("cannot read --data " + text);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (json_placeholders::present(text)) {
      // The stream codec sends one fixed message: placeholders would be silently ignored there.
      if (a.stream) throw std::invalid_argument("placeholders in --data do not go with --stream (yet)");
      message = grpc_template_from_json(a.proto_file, a.schema_includes, cfg.where.path.substr(1), text);
    } else {
      co.payload = as_bytes(grpc_request_from_json(a.proto_file, a.schema_includes, cfg.where.path.substr(1), text,
                                                   a.stream));
    }
  } else if (!a.payload_file.empty()) {
    co.payload = as_bytes(read_payload_file(a.payload_file));
  } else if (grpc && !a.given_size) {
    co.payload.clear();  // an empty message: valid for every request type
  } else {
    co.payload.assign(parse_size(a.size), std::byte{'x'});
  }
}

/// How each call is encoded and checked: headers (metadata), token, payload, limits.
codec_options make_codec_options(const cli_args& a, engine_config& cfg) {
  codec_options co;
  co.headers = a.headers;
  if (const char* token = std::getenv("RINGRPC_TOKEN"); token != nullptr && cfg.where.scheme == "ringrpc") {
    co.bearer_token = token;  // as ringrpc-call: sent unless -H gives an authorization
  }
  std::shared_ptr<const message_template> message;
  make_payload(a, cfg, co, message);
  auto templates = make_request_templates(a.templates, cfg.where.scheme);
  if (message) {
    for (const request_template& t : message->texts()) templates->data->check(t, "--data", false);
    templates->message = std::move(message);
  }
  co.templates = std::move(templates);
  co.key_space = a.key_space;
  if (a.verify && cfg.where.scheme != "ringrpc") {
    throw std::invalid_argument("--verify goes with ringrpc:// and ringrpcs:// (echo:// always checks its bytes)");
  }
  co.verify_echo = a.verify;
  // An echoing target sends back what a call rendered: room for the largest rendering.
  std::size_t largest_payload = co.payload.size();
  if (co.templates->has_payload) {
    largest_payload = co.templates->payload.max_rendered_size(co.templates->data->longest_line());
  } else if (co.templates->message) {
    largest_payload = co.templates->message->max_size(co.templates->data->longest_line());
  }
  co.max_reply_bytes = reply_limit(a.max_body, cfg.where, largest_payload);
  cfg.call_timeout = parse_duration(a.call_timeout);
  co.timeout_us = static_cast<std::uint64_t>(cfg.call_timeout.count() / 1000);
  co.host_header = authority_of(cfg.where);
  co.stream = cfg.stream;
  co.stream_depth = cfg.depth;
  return co;
}

/// How long, how fast and how measured: duration or count, warm-up, rate steps, latency clock.
void set_schedule(const cli_args& a, engine_config& cfg) {
  if (!a.batch_window.empty()) cfg.reply_batch_window = parse_duration(a.batch_window);
  if (a.latency_clock != "kernel" && a.latency_clock != "user") {
    throw std::invalid_argument("--latency-clock is kernel or user, not '" + a.latency_clock + "'");
  }
  cfg.kernel_rx_stamps = a.latency_clock == "kernel";
  cfg.max_calls = a.count;
  // -d is the duration as in wrk, a bare number in seconds (-P is the depth).
  const bool duration_given = a.given_duration || !a.d_text.empty();
  const std::string& duration = a.d_text.empty() ? a.duration : a.d_text;
  cfg.duration = a.count != 0 && !duration_given ? std::chrono::nanoseconds(0) : parse_duration(duration);
  cfg.warmup = !a.warmup.empty() ? parse_duration(a.warmup)
                                 : (a.count != 0 ? std::chrono::nanoseconds(0) : std::chrono::nanoseconds(std::chrono::seconds(1)));
  cfg.connect_timeout = parse_duration(a.connect_timeout);
}

/// TLS, and what a fresh connection per call can and cannot go with.
void set_connections(const cli_args& a, engine_config& cfg) {
  if (cfg.where.tls) {
    // The layer is made by make_tls_layer once the count is final (--conn-ramp, --shard).
  } else if (!a.tls_cacert.empty() || !a.tls_cert.empty() || !a.tls_key.empty() || a.tls_insecure) {
    throw std::invalid_argument("--cacert, --cert, --key and --insecure are for TLS targets (https://, h2://, "
                                "ringrpcs://, rediss://, grpcs://)");
  }
  if (cfg.new_connection_per_call && cfg.depth != 1) {
    throw std::invalid_argument("--new-conn-per-call sends one call per connection: it needs -P 1, not -P " +
                                std::to_string(cfg.depth));
  }
  if (cfg.new_connection_per_call && (cfg.where.scheme == "h2c" || cfg.where.scheme == "grpc")) {
    // HTTP/2 is made to multiplex one long-lived connection; grpc:// likewise.
    throw std::invalid_argument("--new-conn-per-call is for ringrpc, echo, redis and http targets (and their "
                                "TLS schemes), not HTTP/2");
  }
}

/// --stream: one bidi stream per connection of a ringrpc:// or grpc:// method, -P messages in flight
/// on each (proto_ringrpc_stream.cpp, proto_grpc_stream.cpp). What it cannot go with is refused
/// here, before connecting.
void check_stream(const cli_args& a, const engine_config& cfg) {
  if (!a.stream) return;
  if (cfg.where.scheme != "ringrpc" && cfg.where.scheme != "grpc") {
    throw std::invalid_argument("--stream goes with ringrpc:// and grpc:// targets (and ringrpcs://, grpcs://) only");
  }
  if (cfg.new_connection_per_call) throw std::invalid_argument("--stream keeps one stream per connection: it cannot go with --new-conn-per-call");
  if (!a.mix.empty()) throw std::invalid_argument("--stream sends every message on one method's stream: it cannot go with --mix");
  if (a.typed()) throw std::invalid_argument("--stream sends raw messages: it cannot go with --method (typed JSON)");
}

/// --conn-ramp FROM:TO:DURATION: up (FROM < TO), TO connections (-c) and FROM of them from the
/// start; down (FROM > TO), FROM connections (-c) at the start and TO at the end.
void set_conn_ramp(const cli_args& a, engine_config& cfg) {
  if (a.conn_ramp.empty()) return;
  const std::string_view text = a.conn_ramp;
  const std::size_t p = text.find(':'), q = p == std::string_view::npos ? p : text.find(':', p + 1);
  unsigned from = 0, to = 0;
  const auto whole = [&](std::string_view part, unsigned& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc{} && end == part.data() + part.size() && !part.empty();
  };
  const std::string bad = "bad --conn-ramp '" + a.conn_ramp + "': ";
  if (q == std::string_view::npos || text.find(':', q + 1) != std::string_view::npos ||
      !whole(text.substr(0, p), from) || !whole(text.substr(p + 1, q - p - 1), to)) {
    throw std::invalid_argument(bad + "use FROM:TO:DURATION with whole numbers of connections, e.g. 1:64:30s");
  }
  if (from < 1 || to < 1 || from == to) {
    throw std::invalid_argument(bad + "FROM and TO are at least 1 and differ (up: FROM < TO; down: FROM > TO)");
  }
  try {
    cfg.conn_ramp_time = parse_duration(text.substr(q + 1));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(bad + e.what());
  }
  if (cfg.conn_ramp_time.count() <= 0) throw std::invalid_argument(bad + "the duration must be positive");
  if (cfg.duration.count() > 0 && cfg.conn_ramp_time > cfg.duration) {
    // Connections due after the run ended would never open, while the results said TO.
    throw std::invalid_argument(bad + "the ramp is longer than the run (-d); shorten it or run longer");
  }
  if (!cfg.steps.empty() || cfg.new_connection_per_call) {
    throw std::invalid_argument("--conn-ramp goes with the closed loop (not -R, --rate-steps, --rate-ramp or "
                                "--new-conn-per-call)");
  }
  // -c is the most connections the run holds: TO going up, FROM going down.
  const unsigned most = std::max(from, to);
  if (a.given_connections && cfg.connections != most) {
    throw std::invalid_argument(bad + "the larger of FROM and TO is the number of connections; -c " +
                                std::to_string(cfg.connections) + " says otherwise");
  }
  if (from > to && a.stream) throw std::invalid_argument(bad + "a ramp down does not go with --stream");
  cfg.connections = most;
  cfg.conn_ramp_from = from;
  cfg.conn_ramp_to = from > to ? to : 0;
}

/// --arrival and --seed: Poisson arrivals from a seed given, or one drawn (and recorded).
void set_arrival(const cli_args& a, engine_config& cfg) {
  if (a.arrival != "uniform" && a.arrival != "poisson") {
    throw std::invalid_argument("--arrival is uniform or poisson, not '" + a.arrival + "'");
  }
  cfg.poisson_arrivals = a.arrival == "poisson";
  if (cfg.poisson_arrivals && cfg.steps.empty()) {
    throw std::invalid_argument("--arrival poisson needs an open loop (-R, --rate-steps or --rate-ramp)");
  }
  if (!a.seed.empty() && !cfg.poisson_arrivals && !a.uses_random) {
    throw std::invalid_argument("--seed goes with --arrival poisson and templates with {random:N}");
  }
  if (a.seed.empty()) {
    // 53 bits: a JSON reader that keeps numbers as doubles (jq, JavaScript) reads it back exact,
    // so the recorded seed repeats the run.
    cfg.seed = ((std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()) & ((std::uint64_t{1} << 53) - 1);
    return;
  }
  const char* const end = a.seed.data() + a.seed.size();
  const auto [ptr, ec] = std::from_chars(a.seed.data(), end, cfg.seed);
  if (ec != std::errc{} || ptr != end) {
    throw std::invalid_argument("bad --seed '" + a.seed + "': use a whole number from 0 to 2^64-1");
  }
}

/// The open loop's steps (-R, --rate-steps or --rate-ramp), and the bounds every loop needs.
void set_rates(const cli_args& a, engine_config& cfg, const std::vector<threshold>& thresholds) {
  if (int{!a.rate.empty()} + int{!a.rate_steps.empty()} + int{!a.rate_ramps.empty()} > 1) {
    throw std::invalid_argument("use one of -R, --rate-steps and --rate-ramp");
  }
  if (!a.rate.empty()) cfg.steps.push_back({parse_rate(a.rate), cfg.duration.count()});
  if (!a.rate_steps.empty()) {
    const auto st = parse_duration(a.step_time).count();
    for (double r : parse_rate_list(a.rate_steps)) cfg.steps.push_back({r, st});
  }
  // Each --rate-ramp is one or more segments; all of them run in the order given.
  for (const auto& text : a.rate_ramps) {
    for (const auto& seg : parse_rate_ramps(text)) cfg.steps.push_back({seg.from, seg.duration.count(), seg.to});
  }
  if (!cfg.steps.empty() && a.count != 0) throw std::invalid_argument("-n works with the closed loop only");
  set_arrival(a, cfg);
  set_conn_ramp(a, cfg);
  if (cfg.connections == 0 || cfg.depth == 0 || cfg.threads == 0 || cfg.reply_batch == 0) {
    throw std::invalid_argument("-c, -P (depth), -t and --reply-batch must be at least 1");
  }
  for (const auto& t : thresholds) check_threshold_applies(t, !cfg.steps.empty());
}

/// --shard K/N: this host's share of the connections, the rates and the count.
std::optional<shard_spec> apply_shard(const cli_args& a, engine_config& cfg) {
  if (a.shard_text.empty()) return std::nullopt;
  const shard_spec shard = parse_shard(a.shard_text);
  const unsigned total = cfg.connections;
  cfg.connections = static_cast<unsigned>(shard_share(total, shard));
  if (cfg.connections == 0) {
    throw std::invalid_argument("--shard " + a.shard_text + ": -c " + std::to_string(total) +
                                " leaves this shard no connection; give at least -c " + std::to_string(shard.count));
  }
  if (cfg.conn_ramp_time.count() > 0) {
    cfg.conn_ramp_from = std::max<unsigned>(1, static_cast<unsigned>(shard_share(cfg.conn_ramp_from, shard)));
    if (cfg.conn_ramp_to != 0) cfg.conn_ramp_to = std::max<unsigned>(1, static_cast<unsigned>(shard_share(cfg.conn_ramp_to, shard)));
  }
  for (auto& st : cfg.steps) {
    st.rate = shard_rate(st.rate, shard);
    if (st.ramp()) st.rate_to = shard_rate(st.rate_to, shard);
  }
  if (cfg.max_calls != 0) {
    cfg.max_calls = shard_share(cfg.max_calls, shard);
    if (cfg.max_calls == 0) throw std::invalid_argument("--shard " + a.shard_text + ": -n leaves this shard no call");
  }
  return shard;
}

/// The result files, claimed before the run: a bad path fails now, not after it.
struct outputs {
  std::unique_ptr<output_file> json, hdr, plot, html;
  FILE* summary = stdout;
  // --live: written as the run goes, so opened as is (not committed); stdout is not closed.
  struct close_file {
    void operator()(FILE* f) const noexcept {
      if (f != stdout) std::fclose(f);
    }
  };
  std::unique_ptr<FILE, close_file> live;
};

outputs claim_outputs(const cli_args& a) {
  if (int{a.json_path == "-"} + int{a.live_path == "-"} + int{a.hdr_path == "-"} + int{a.plot_path == "-"} +
          int{a.html_path == "-"} > 1) {
    throw std::invalid_argument("only one output can go to stdout (-)");
  }
  if (a.hdr_path == "-" || a.plot_path == "-" || a.html_path == "-") {
    throw std::invalid_argument("only --json can go to stdout (-)");
  }
  outputs o;
  if (!a.json_path.empty()) o.json = std::make_unique<output_file>(a.json_path);
  if (!a.hdr_path.empty()) o.hdr = std::make_unique<output_file>(a.hdr_path);
  if (!a.plot_path.empty()) o.plot = std::make_unique<output_file>(a.plot_path);
  if (!a.html_path.empty()) o.html = std::make_unique<output_file>(a.html_path);
  if (o.json && o.json->is_stdout()) o.summary = stderr;
  if (a.live_path == "-") {
    o.live.reset(stdout);
    o.summary = stderr;
  } else if (!a.live_path.empty()) {
    o.live.reset(std::fopen(a.live_path.c_str(), "w"));
    if (o.live == nullptr) throw std::runtime_error("cannot write " + a.live_path + ": " + std::strerror(errno));
  }
  return o;
}

/// --start-at: sleeps in short steps so that Ctrl-C while waiting ends at once, with nothing run.
/// False when interrupted.
bool wait_for_start(const std::chrono::system_clock::time_point& start_at, std::chrono::nanoseconds wait,
                    const std::atomic<bool>& stop) {
  std::fprintf(stderr, "ringrpc-load: waiting %.1f s to start at %s\n", std::chrono::duration<double>(wait).count(),
               format_utc(start_at).c_str());
  while (std::chrono::system_clock::now() < start_at) {
    if (stop.load()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(start_at - std::chrono::system_clock::now()),
        std::chrono::milliseconds(50)));
  }
  return true;
}

/// The run's settings as the summary and the JSON's `config` show them.
void record_config(run_result& r, const cli_args& a, const engine_config& cfg, const codec_options& co,
                   const std::optional<shard_spec>& shard, const std::optional<std::chrono::system_clock::time_point>& start_at) {
  r.config["target"] = a.url;
  r.config["connections"] = cfg.connections;
  r.config["depth"] = cfg.depth;
  if (cfg.steps.empty()) r.config["reply_batch"] = cfg.reply_batch;
  r.config["threads"] = cfg.threads;
  // Under --template (or --data with placeholders) each call renders its own payload: the
  // template is recorded instead.
  if (a.templates.payload.empty() && !co.templates->message) r.config["payload_bytes"] = co.payload.size();
  if (a.typed()) r.config["method"] = cfg.where.path;
  r.config["loop"] = cfg.steps.empty() ? "closed" : "open";
  if (!a.mix.empty()) r.config["mix"] = a.mix;
  if (!a.rate.empty()) r.config["rate"] = shard ? shard_rate(parse_rate(a.rate), *shard) : parse_rate(a.rate);
  if (!a.rate_steps.empty()) r.config["rate_steps"] = parse_rate_list(a.rate_steps);
  if (!a.rate_ramps.empty()) r.config["rate_ramp"] = ramp_config(cfg);
  if (!cfg.steps.empty()) r.config["arrival"] = a.arrival;
  if (cfg.poisson_arrivals || a.uses_random) r.config["seed"] = cfg.seed;
  if (!a.templates.payload.empty()) r.config["template"] = a.templates.payload;
  if (co.templates->message) r.config["data"] = a.data;  // its placeholders make each call's request
  if (!a.templates.redis_key.empty()) r.config["redis_key"] = a.templates.redis_key;
  if (!a.templates.data_file.empty()) r.config["data_file"] = a.templates.data_file;
  if (cfg.conn_ramp_time.count() > 0) {
    r.config["conn_ramp"] = {{"from", cfg.conn_ramp_from}, {"to", cfg.conn_ramp_to != 0 ? cfg.conn_ramp_to : cfg.connections},
                             {"duration_s", static_cast<double>(cfg.conn_ramp_time.count()) / 1e9}};
  }
  if (a.count != 0) r.config["count"] = a.count;
  if (const double d = scheduled_seconds(cfg); d > 0) r.config["duration_s"] = d;
  if (!a.headers.empty()) r.config["headers"] = shown_headers(a.headers);
  if (!a.max_body.empty()) r.config["max_body"] = co.max_reply_bytes;
  if (shard) r.config["shard"] = a.shard_text;
  if (start_at) r.config["start_at"] = format_utc(*start_at);
  if (!a.proto_file.empty()) r.config["proto"] = a.proto_file;
  if (a.verify) r.config["verify"] = true;
  if (cfg.new_connection_per_call) r.config["new_conn_per_call"] = true;
  if (cfg.stream) r.config["stream"] = true;
}

/// The summary and the result files; the exit status the results call for.
int report(run_result& r, const cli_args& a, const std::vector<threshold>& thresholds,
           const std::vector<double>& percentiles, outputs& out, double started_epoch) {
  bool threshold_failed = false;
  for (const auto& t : thresholds) {
    r.verdicts.push_back(evaluate_threshold(t, r));
    threshold_failed = threshold_failed || r.verdicts.back().failed;
  }
  const std::string summary = format_summary(r, percentiles);
  std::fwrite(summary.data(), 1, summary.size(), out.summary);
  std::fflush(out.summary);
  if (out.json) {
    std::ostringstream j;
    write_json(r, percentiles, j);
    out.json->commit(j.str());
  }
  if (out.hdr) out.hdr->commit(hdr_log_text(r, started_epoch + r.warmup_s));
  if (out.plot) out.plot->commit(render_svg({plot_series_from(r, a.url)}));
  if (out.html) out.html->commit(render_html(r, percentiles));
  if (threshold_failed) return 4;
  return r.error_total() == 0 && r.streams_failed == 0 ? 0 : 3;
}

/// --live and --metrics-port: the per-second figures while the run goes (live_output.hpp), fed
/// from the seconds the workers hand over; null when neither is asked for.
std::unique_ptr<live_output> make_live_output(const cli_args& a, engine_config& cfg, FILE* lines) {
  if (a.metrics_port < -1 || a.metrics_port > 65535) throw std::invalid_argument("--metrics-port must be 0 .. 65535");
  if (a.metrics_port < 0 && a.metrics_addr != "127.0.0.1") throw std::invalid_argument("--metrics-addr goes with --metrics-port");
  if (lines == nullptr && a.metrics_port < 0) return nullptr;
  auto live = std::make_unique<live_output>(lines, cfg.steps);
  if (a.metrics_port >= 0) {
    live->serve_metrics(a.metrics_addr, static_cast<std::uint16_t>(a.metrics_port));
    std::fprintf(stderr, "ringrpc-load: metrics at http://%s:%u/metrics\n", a.metrics_addr.c_str(), live->metrics_port());
  }
  cfg.publish_seconds = true;
  cfg.on_finished = [l = live.get()](const std::vector<live_counters*>& counters) { l->collect_rest(counters); };
  return live;
}

/// A load run, from the checked command line to its exit status.
int run_load(cli_args& a, engine_config& cfg, const std::vector<double>& percentiles) {
  if (!a.d_text.empty() && a.given_duration) {
    throw std::invalid_argument("-d and --duration (-z) both give the duration; give one");
  }
  if (a.wrk_latency) {
    std::fprintf(stderr, "ringrpc-load: note: --latency (wrk) changes nothing: the percentiles are always "
                         "printed; choose them with -p\n");
  }
  std::vector<threshold> thresholds;
  for (const auto& f : a.fail_if) {
    for (auto& t : parse_thresholds(f)) thresholds.push_back(std::move(t));
  }
  check_payload_sources(a);
  resolve_target(a, cfg);
  check_stream(a, cfg);
  cfg.stream = a.stream;
  const codec_options co = make_codec_options(a, cfg);
  const auto proto = make_protocol(cfg.where, co);
  cfg.kinds = a.mix.empty() ? proto->default_kinds() : parse_mix(a.mix, cfg.where);
  check_path_templates(a.templates, cfg.kinds, *co.templates, cfg.where.scheme);
  a.uses_random = uses_random(cfg.kinds, *co.templates);
  set_schedule(a, cfg);
  set_connections(a, cfg);
  cfg.diagnose_first_reply = true;
  // A slow method must not pass for a silent server of another protocol.
  cfg.silence_limit = std::max<std::chrono::nanoseconds>(std::chrono::seconds(5), cfg.call_timeout + std::chrono::seconds(1));
  set_rates(a, cfg, thresholds);
  co.templates->data->set_seed(cfg.seed);
  const std::optional<shard_spec> shard = apply_shard(a, cfg);
  if (cfg.where.tls) {
    // Sized for the connections this host opens (its record buffers are kept per connection
    // when they are few), so after --conn-ramp and --shard have said how many.
    cfg.tls = make_tls_layer(cfg.where, a.tls_cacert, a.tls_cert, a.tls_key, a.tls_insecure, cfg.connections);
  }
  std::optional<std::chrono::system_clock::time_point> start_at;
  std::chrono::nanoseconds start_wait{0};
  if (!a.start_at_text.empty()) {
    start_at = parse_start_at(a.start_at_text);
    start_wait = wait_until_start(*start_at, std::chrono::system_clock::now());
  }
  outputs out = claim_outputs(a);
  const std::unique_ptr<live_output> live_out = make_live_output(a, cfg, out.live.get());

  std::unique_ptr<server_cost_meter> server_meter = make_server_meter(a.server_pid, a.server_metrics);
  cfg.stop_requested = &install_interrupt_handler();
  if (start_at && !wait_for_start(*start_at, start_wait, *cfg.stop_requested)) return 130;
  std::fprintf(stderr, "ringrpc-load %s: %u %s x depth %u on %u thread(s), %s%s\n", a.url.c_str(),
               cfg.connections, cfg.stream ? "stream(s), one per connection," : "connection(s)", cfg.depth, std::min(cfg.threads, cfg.connections),
               cfg.steps.empty() ? "closed loop" : "open loop",
               cfg.warmup.count() > 0 ? (", " + std::to_string(cfg.warmup.count() / 1'000'000) + " ms warm-up excluded").c_str() : "");
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::uint64_t last_ok = 0;
  const double started_epoch = epoch_now_s();
  if (server_meter) server_meter->start();
  run_result r = run_engine(cfg, *proto, [&](double elapsed, const std::vector<live_counters*>& live) {
    print_live(tty, elapsed, live, last_ok);
    if (live_out) live_out->collect(live);
    if (server_meter) server_meter->sample(elapsed);
  });
  if (live_out) live_out->finish(r);
  if (server_meter) {
    server_meter->finish();
    r.server = server_meter->result(r.warmup_s, r.measured_s, r.calls_ok + r.error_total());
  }
  if (tty) std::fprintf(stderr, "\n");
  if (!r.diagnosis.empty()) {
    std::fprintf(stderr, "ringrpc-load: %s\n", r.diagnosis.c_str());
    return 2;
  }
  if (!r.fail_fast.empty()) {
    std::fprintf(stderr, "ringrpc-load: %s\n", r.fail_fast.c_str());
    return 5;
  }
  record_config(r, a, cfg, co, shard, start_at);
  return report(r, a, thresholds, percentiles, out, started_epoch);
}

}  // namespace

int main(int argc, char** argv) {
  cli_args a;
  ringrpc::load::engine_config cfg;
  if (const auto rc = parse_command_line(argc, argv, a, cfg)) return *rc;
  ringrpc::tools::raise_open_file_limit();  // -c 10000 needs more than the usual soft 1,024
  ringrpc::tools::keep_large_buffers();     // large replies without a page fault per page
  try {
    const auto percentiles = a.percentiles_text.empty() ? default_percentiles() : parse_percentiles(a.percentiles_text);
    if (a.merge) return run_merge(a.merge_files, percentiles);
    if (a.plot) return run_plot(a.plot_files, a.plot_out);
    if (a.url.empty()) throw std::invalid_argument("no target URL (see --help)");
    return run_load(a, cfg, percentiles);
  } catch (const std::exception& e) {
    // std::system_error included: a socket or io_uring that cannot be had.
    std::fprintf(stderr, "ringrpc-load: %s\n", e.what());
    return 2;
  }
}

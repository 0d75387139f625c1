// ringrpc-load: a load generator for ringrpc, echo, redis and HTTP servers on io_uring.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <optional>
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
#include "output_file.hpp"
#include "protocol.hpp"
#include "report.hpp"
#include "ringrpc/version.hpp"
#include "server_cost.hpp"
#include "shard.hpp"
#include "sniff.hpp"
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
// (from --schema or the server's reflection endpoint, asked with the run's metadata). Returns the
// wire method name ("Greeter.SayHello" even when the service was given qualified).
std::string typed_payload(const target& t, const std::string& method, const std::string& json,
                          const std::string& schema_file, const std::vector<std::string>& includes,
                          std::chrono::nanoseconds connect_timeout, codec_options& options) {
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
    std::string text = json;
    if (!text.empty() && text[0] == '@') {
      std::ifstream in(text.substr(1), std::ios::binary);
      if (!in) throw std::invalid_argument("cannot read --data " + text);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringrpc-load: a load generator on io_uring. ringrpc-load [options] URL\n"
               "  URL: ringrpc://H:P/method echo://H:P redis://H:P http://H:P/path ([::1]:P)\n"
               "       h2c://H:P/path grpc://H:P/pkg.Service/Method etcd://H:P/service/method\n"
               "       over TLS: ringrpcs:// rediss:// https:// h2:// grpcs:// (TLS options)",
               "ringrpc-load"};
  app.require_subcommand(0, 1);
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version", "ringrpc-load " + std::string(ringrpc::version()));
  app.footer("Signals: SIGINT ends the run early with all its results (summary, --json,\n"
             "--hdr-log, --plot); a second SIGINT exits at once (130) and writes nothing.\n"
             "SIGTERM and others have their default effect.\n"
             "Exit status: 0 no error in the measured window (also --help, --version,\n"
             "merge, plot); 2 usage, a target unreachable at start or not speaking the\n"
             "URL's protocol, io_uring unusable, an output that cannot be written; 3 the run\n"
             "had errors; 4 a --fail-if condition held; 5 stopped early: every first answer\n"
             "was an error no retry changes (unknown_method, unauthenticated, http_404, ...);\n"
             "130 a second SIGINT.");
  std::string url, d_text, duration = "10s", warmup, size = "64", payload_file, rate, rate_steps, step_time = "5s",
              connect_timeout = "3s", call_timeout = "0", mix, percentiles_text, json_path, hdr_path, plot_path,
              typed_method, data, schema_file, proto_file, shard_text, start_at_text, max_body, batch_window,
              latency_clock = "kernel";
  std::vector<std::string> schema_includes, headers, fail_if;
  ringrpc::load::engine_config cfg;
  std::uint64_t count = 0, key_space = 100000;
  bool co_verify = false;
  app.add_option("url", url, "target URL");
  app.add_option("-t,--threads", cfg.threads, "threads, each with a ring")->capture_default_str();
  app.add_option("-c,--connections", cfg.connections, "connections in total")->capture_default_str();
  app.add_option("-d", d_text, "duration, as in wrk: 10s 2m; 30 = 30 s [10s]");
  app.add_option("-z,--duration", duration, "duration (us ms s m h; bare: s)")->capture_default_str();
  bool wrk_latency = false;
  app.add_flag("--latency", wrk_latency, "wrk's flag: percentiles always shown");
  app.add_option("-P,--depth", cfg.depth, "depth: calls in flight per connection")->capture_default_str();
  // --latency-clock and --reply-batch-window are named in --reply-batch's line and in
  // docs/load.md, to keep --help one screen.
  app.add_option("--reply-batch", cfg.reply_batch, "closed loop: wake per N replies; --latency-clock")
      ->capture_default_str();
  app.add_option("--latency-clock", latency_clock, "")->group("");
  app.add_option("--reply-batch-window", batch_window, "")->group("");
  app.add_option("-R,--rate", rate, "open loop: total calls/s (k, M)");
  app.add_option("--rate-steps", rate_steps, "open loop in steps: 10k,20k,40k");
  app.add_option("--step-time", step_time, "duration of each rate step")->capture_default_str();
  app.add_option("-n,--count", count, "stop after this many calls");
  app.add_option("--warmup", warmup, "excluded from results [1s]");
  app.add_option("-s,--size", size, "payload bytes (k, m)")->capture_default_str();
  app.add_option("--data", data, "--method/--proto: request JSON, or @FILE [{}]");
  app.add_option("--payload-file", payload_file, "payload read from this file");
  app.add_option("-H,--header", headers, "'Name: value' (repeat); ringrpc: metadata")->allow_extra_args(false);
  app.add_option("--max-body", max_body, "fail a reply larger than this [1m]");
  // --server-metrics is named in --server-pid's line, to keep --help one screen.
  std::string server_pid, server_metrics;
  app.add_option("--server-pid", server_pid, "target's CPU/call; or --server-metrics URL")->type_name("PID");
  app.add_option("--server-metrics", server_metrics, "")->group("");
  app.add_option("--mix", mix, "weighted kinds, e.g. GET:8,SET:1");
  app.add_option("--method", typed_method, "ringrpc: typed Service.Method, --data JSON");
  app.add_option("--schema", schema_file, "--method: .fbs/.bfbs instead of reflection");
  app.add_option("--proto", proto_file, "grpc: .proto file for --data");
  app.add_option("-I,--include", schema_includes, "include path for --schema/--proto")
      ->allow_extra_args(false);
  app.add_option("--key-space", key_space, "redis: keys key:0 .. key:N-1")->capture_default_str();
  app.add_option("--connect-timeout", connect_timeout, "give up connecting after")->capture_default_str();
  app.add_option("--timeout", call_timeout, "per-call timeout, 0 = none")->capture_default_str();
  app.add_option("-p,--percentiles", percentiles_text, "e.g. 50,99,99.9");
  app.add_option("--fail-if", fail_if, "exit 4 if: p99>2ms,errors>0.1%,rate<90%")->allow_extra_args(false);
  app.add_option("--json", json_path, "write results as JSON (- = stdout)");
  app.add_option("--hdr-log", hdr_path, "write per-second HdrHistogram log");
  app.add_option("--plot", plot_path, "write an SVG plot");
  app.add_option("--shard", shard_text, "host K of N: its share of -c -R -n");
  app.add_option("--start-at", start_at_text, "start at @UNIX_S or RFC 3339 UTC");
  // Neither wrk nor h2load has this: every call opens its own connection (TLS: a full
  // handshake), which we close after the reply; the summary gives connections/s.
  app.add_flag("--verify", co_verify, "ringrpc: error unless reply == request bytes");
  app.add_flag("--new-conn-per-call", cfg.new_connection_per_call, "every call on a fresh connection (TLS: handshake)");
  std::string tls_cacert, tls_cert, tls_key;
  bool tls_insecure = false;
  const std::string tls_group = "TLS (https h2 ringrpcs rediss grpcs)";
  app.add_option("--cacert", tls_cacert, "PEM CAs to verify the server [system]")->group(tls_group);
  app.add_flag("-k,--insecure", tls_insecure, "do not verify the server")->group(tls_group);
  app.add_option("--cert", tls_cert, "PEM client certificate (mutual TLS)")->group(tls_group);
  app.add_option("--key", tls_key, "PEM key of --cert")->group(tls_group);
  auto* merge = app.add_subcommand("merge", "merge --hdr-log files into one summary");
  std::vector<std::string> merge_files;
  merge->add_option("files", merge_files, "interval logs")->required();
  auto* plot = app.add_subcommand("plot", "overlay --json files in one SVG");
  std::vector<std::string> plot_files;
  std::string plot_out = "ringrpc-load.svg";
  plot->add_option("files", plot_files, "JSON results")->required();
  plot->add_option("-o,--output", plot_out, "SVG file")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as documented, with our prefix.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ringrpc-load: %s (see --help)\n", e.what());
    return 2;
  }

  try {
    const auto percentiles = percentiles_text.empty() ? default_percentiles() : parse_percentiles(percentiles_text);
    if (merge->parsed()) return run_merge(merge_files, percentiles);
    if (plot->parsed()) return run_plot(plot_files, plot_out);
    if (url.empty()) throw std::invalid_argument("no target URL (see --help)");

    // -d is the duration as in wrk, a bare number in seconds (-P is the depth).
    if (!d_text.empty()) {
      if (app.count("--duration")) throw std::invalid_argument("-d and --duration (-z) both give the duration; give one");
      duration = d_text;
    }
    const bool duration_given = app.count("--duration") != 0 || !d_text.empty();
    if (wrk_latency) {
      std::fprintf(stderr, "ringrpc-load: note: --latency (wrk) changes nothing: the percentiles are always "
                           "printed; choose them with -p\n");
    }

    std::vector<threshold> thresholds;
    for (const auto& f : fail_if) {
      for (auto& t : parse_thresholds(f)) thresholds.push_back(std::move(t));
    }

    const bool typed = !typed_method.empty();
    const auto scheme_sep = url.find("://");
    std::string url_scheme = url.substr(0, scheme_sep == std::string::npos ? 0 : scheme_sep);
    for (auto& ch : url_scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool grpc = url_scheme == "grpc";
    if (!proto_file.empty() && !grpc) throw std::invalid_argument("--proto goes with grpc:// targets");
    if (grpc && app.count("--schema")) throw std::invalid_argument("grpc:// takes its schema from --proto FILE, not --schema");
    if (grpc && app.count("--data") && proto_file.empty()) {
      throw std::invalid_argument("--data for grpc:// needs --proto FILE to convert the JSON; raw message bytes "
                                  "come from --payload-file");
    }
    if (grpc && !proto_file.empty() && (app.count("--size") || !payload_file.empty() || !mix.empty())) {
      throw std::invalid_argument("--proto makes the request from --data; it excludes -s, --payload-file and --mix");
    }
    if (!typed && !grpc && (app.count("--data") || app.count("--schema") || app.count("--include"))) {
      // As in ghz, --data is a request as JSON, converted with the method's schema.
      throw std::invalid_argument("--data, --schema and -I go with --method (--data is the request as JSON); "
                                  "raw payload bytes come from -s or --payload-file");
    }
    if (app.count("--size") && !payload_file.empty()) throw std::invalid_argument("give the payload once: -s or --payload-file");
    std::string url_with_method = url;
    if (typed) {
      if (app.count("--size") || !payload_file.empty() || !mix.empty()) {
        throw std::invalid_argument("--method makes the payload from --data; it excludes -s, --payload-file and --mix");
      }
      const auto sep = url.find("://");
      std::string scheme = url.substr(0, sep == std::string::npos ? 0 : sep);
      for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (scheme != "ringrpc") throw std::invalid_argument("--method works with ringrpc:// targets only");
      // The method may be left out of the URL: ringrpc://HOST:PORT --method Service.Method.
      if (url.find('/', sep + 3) == std::string::npos) url_with_method += "/" + typed_method;
    }
    cfg.endpoints = resolve_endpoints(url_with_method);
    cfg.where = cfg.endpoints.front();
    cfg.per_endpoint = is_registry_url(url);
    if (cfg.per_endpoint) {
      std::string listed;
      for (const auto& e : cfg.endpoints) listed.append(listed.empty() ? "" : ", ").append(authority_of(e));
      std::fprintf(stderr, "ringrpc-load: %s lists %zu member(s): %s\n", url.c_str(), cfg.endpoints.size(),
                   listed.c_str());
    }
    if (!headers.empty() && (cfg.where.scheme == "echo" || cfg.where.scheme == "redis")) {
      throw std::invalid_argument("-H goes with http://, h2c://, grpc:// and ringrpc:// targets");
    }
    codec_options co;
    co.headers = headers;
    if (const char* token = std::getenv("RINGRPC_TOKEN"); token != nullptr && cfg.where.scheme == "ringrpc") {
      co.bearer_token = token;  // as ringrpc-call: sent unless -H gives an authorization
    }
    if (typed) {
      if (cfg.where.path != typed_method) {
        throw std::invalid_argument("the URL names method '" + cfg.where.path + "' and --method '" + typed_method +
                                    "'; give it once");
      }
      cfg.where.path = typed_payload(cfg.where, typed_method, data.empty() ? std::string("{}") : data, schema_file,
                                     schema_includes, parse_duration(connect_timeout), co);
    } else if (grpc && !proto_file.empty()) {
      std::string text = data.empty() ? std::string("{}") : data;
      if (text[0] == '@') {
        std::ifstream in(text.substr(1), std::ios::binary);
        if (!in) throw std::invalid_argument("cannot read --data " + text);
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      const std::string bytes = grpc_request_from_json(proto_file, schema_includes, cfg.where.path.substr(1), text);
      co.payload.assign(reinterpret_cast<const std::byte*>(bytes.data()),
                        reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    } else if (!payload_file.empty()) {
      const std::string bytes = read_payload_file(payload_file);
      co.payload.assign(reinterpret_cast<const std::byte*>(bytes.data()),
                        reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    } else if (grpc && !app.count("--size")) {
      co.payload.clear();  // an empty message: valid for every request type
    } else {
      co.payload.assign(parse_size(size), std::byte{'x'});
    }
    co.key_space = key_space;
    if (co_verify && cfg.where.scheme != "ringrpc") {
      throw std::invalid_argument("--verify goes with ringrpc:// and ringrpcs:// (echo:// always checks its bytes)");
    }
    co.verify_echo = co_verify;
    co.max_reply_bytes = reply_limit(max_body, cfg.where, co.payload.size());
    cfg.call_timeout = parse_duration(call_timeout);
    if (!batch_window.empty()) cfg.reply_batch_window = parse_duration(batch_window);
    if (latency_clock != "kernel" && latency_clock != "user") {
      throw std::invalid_argument("--latency-clock is kernel or user, not '" + latency_clock + "'");
    }
    cfg.kernel_rx_stamps = latency_clock == "kernel";
    co.timeout_us = static_cast<std::uint64_t>(cfg.call_timeout.count() / 1000);
    co.host_header = authority_of(cfg.where);
    const auto proto = make_protocol(cfg.where, co);
    cfg.kinds = mix.empty() ? proto->default_kinds() : parse_mix(mix, cfg.where);
    cfg.max_calls = count;
    cfg.duration = count != 0 && !duration_given ? std::chrono::nanoseconds(0) : parse_duration(duration);
    cfg.warmup = !warmup.empty() ? parse_duration(warmup)
                                 : (count != 0 ? std::chrono::nanoseconds(0) : std::chrono::nanoseconds(std::chrono::seconds(1)));
    cfg.connect_timeout = parse_duration(connect_timeout);
    if (cfg.where.tls) {
      cfg.tls = make_tls_layer(cfg.where, tls_cacert, tls_cert, tls_key, tls_insecure, cfg.connections);
    } else if (!tls_cacert.empty() || !tls_cert.empty() || !tls_key.empty() || tls_insecure) {
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
    cfg.diagnose_first_reply = true;
    // A slow method must not pass for a silent server of another protocol.
    cfg.silence_limit = std::max<std::chrono::nanoseconds>(std::chrono::seconds(5),
                                                           cfg.call_timeout + std::chrono::seconds(1));
    if (!rate.empty() && !rate_steps.empty()) throw std::invalid_argument("use -R or --rate-steps, not both");
    if (!rate.empty()) cfg.steps.push_back({parse_rate(rate), cfg.duration.count()});
    if (!rate_steps.empty()) {
      const auto st = parse_duration(step_time).count();
      for (double r : parse_rate_list(rate_steps)) cfg.steps.push_back({r, st});
    }
    if (!cfg.steps.empty() && count != 0) throw std::invalid_argument("-n works with the closed loop only");
    if (cfg.connections == 0 || cfg.depth == 0 || cfg.threads == 0 || cfg.reply_batch == 0) {
      throw std::invalid_argument("-c, -P (depth), -t and --reply-batch must be at least 1");
    }
    for (const auto& t : thresholds) check_threshold_applies(t, !cfg.steps.empty());
    std::optional<shard_spec> shard;
    if (!shard_text.empty()) {
      shard = parse_shard(shard_text);
      const unsigned total = cfg.connections;
      cfg.connections = static_cast<unsigned>(shard_share(total, *shard));
      if (cfg.connections == 0) {
        throw std::invalid_argument("--shard " + shard_text + ": -c " + std::to_string(total) +
                                    " leaves this shard no connection; give at least -c " + std::to_string(shard->count));
      }
      for (auto& st : cfg.steps) st.rate = shard_rate(st.rate, *shard);
      if (cfg.max_calls != 0) {
        cfg.max_calls = shard_share(cfg.max_calls, *shard);
        if (cfg.max_calls == 0) throw std::invalid_argument("--shard " + shard_text + ": -n leaves this shard no call");
      }
    }
    std::chrono::nanoseconds start_wait{0};
    std::optional<std::chrono::system_clock::time_point> start_at;
    if (!start_at_text.empty()) {
      start_at = parse_start_at(start_at_text);
      start_wait = wait_until_start(*start_at, std::chrono::system_clock::now());
    }

    // Claim every output before the run: a bad path fails now, not after it.
    if (json_path == "-" && (hdr_path == "-" || plot_path == "-")) {
      throw std::invalid_argument("only one output can go to stdout (-)");
    }
    if (hdr_path == "-" || plot_path == "-") throw std::invalid_argument("only --json can go to stdout (-)");
    std::unique_ptr<output_file> json_out, hdr_out, plot_out_file;
    if (!json_path.empty()) json_out = std::make_unique<output_file>(json_path);
    if (!hdr_path.empty()) hdr_out = std::make_unique<output_file>(hdr_path);
    if (!plot_path.empty()) plot_out_file = std::make_unique<output_file>(plot_path);
    FILE* summary_stream = json_out && json_out->is_stdout() ? stderr : stdout;

    std::unique_ptr<server_cost_meter> server_meter = make_server_meter(server_pid, server_metrics);
    cfg.stop_requested = &install_interrupt_handler();
    if (start_at) {
      std::fprintf(stderr, "ringrpc-load: waiting %.1f s to start at %s\n",
                   std::chrono::duration<double>(start_wait).count(), format_utc(*start_at).c_str());
      // Sleep in short steps so Ctrl-C while waiting ends at once, with nothing run.
      while (std::chrono::system_clock::now() < *start_at) {
        if (cfg.stop_requested->load()) return 130;
        std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(*start_at - std::chrono::system_clock::now()),
            std::chrono::milliseconds(50)));
      }
    }
    std::fprintf(stderr, "ringrpc-load %s: %u connection(s) x depth %u on %u thread(s), %s%s\n", url.c_str(),
                 cfg.connections, cfg.depth, std::min(cfg.threads, cfg.connections),
                 cfg.steps.empty() ? "closed loop" : "open loop",
                 cfg.warmup.count() > 0 ? (", " + std::to_string(cfg.warmup.count() / 1'000'000) + " ms warm-up excluded").c_str() : "");
    const bool tty = isatty(STDERR_FILENO) != 0;
    std::uint64_t last_ok = 0;
    const double started_epoch = epoch_now_s();
    if (server_meter) server_meter->start();
    run_result r = run_engine(cfg, *proto, [&](double elapsed, const std::vector<live_counters*>& live) {
      print_live(tty, elapsed, live, last_ok);
      if (server_meter) server_meter->sample(elapsed);
    });
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

    r.config["target"] = url;
    r.config["connections"] = cfg.connections;
    r.config["depth"] = cfg.depth;
    if (cfg.steps.empty()) r.config["reply_batch"] = cfg.reply_batch;
    r.config["threads"] = cfg.threads;
    r.config["payload_bytes"] = co.payload.size();
    if (typed) r.config["method"] = cfg.where.path;
    r.config["loop"] = cfg.steps.empty() ? "closed" : "open";
    if (!mix.empty()) r.config["mix"] = mix;
    if (!rate.empty()) r.config["rate"] = shard ? shard_rate(parse_rate(rate), *shard) : parse_rate(rate);
    if (!rate_steps.empty()) r.config["rate_steps"] = parse_rate_list(rate_steps);
    if (count != 0) r.config["count"] = count;
    if (const double d = scheduled_seconds(cfg); d > 0) r.config["duration_s"] = d;
    if (!headers.empty()) r.config["headers"] = shown_headers(headers);
    if (!max_body.empty()) r.config["max_body"] = co.max_reply_bytes;
    if (shard) r.config["shard"] = shard_text;
    if (start_at) r.config["start_at"] = format_utc(*start_at);
    if (!proto_file.empty()) r.config["proto"] = proto_file;
    if (co_verify) r.config["verify"] = true;
    if (cfg.new_connection_per_call) r.config["new_conn_per_call"] = true;
    bool threshold_failed = false;
    for (const auto& t : thresholds) {
      r.verdicts.push_back(evaluate_threshold(t, r));
      threshold_failed = threshold_failed || r.verdicts.back().failed;
    }
    const std::string summary = format_summary(r, percentiles);
    std::fwrite(summary.data(), 1, summary.size(), summary_stream);
    std::fflush(summary_stream);

    if (json_out) {
      std::ostringstream j;
      write_json(r, percentiles, j);
      json_out->commit(j.str());
    }
    if (hdr_out) hdr_out->commit(hdr_log_text(r, started_epoch + r.warmup_s));
    if (plot_out_file) plot_out_file->commit(render_svg({plot_series_from(r, url)}));
    if (threshold_failed) return 4;
    return r.error_total() == 0 ? 0 : 3;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "ringrpc-load: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc-load: %s\n", e.what());
    return 2;
  }
}

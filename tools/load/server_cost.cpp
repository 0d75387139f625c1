#include "server_cost.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#if RINGRPC_LOAD_HAVE_CURL
#include <curl/curl.h>
#endif

#include "base/clock.hpp"
#include "report_internal.hpp"

namespace ringrpc::load {

namespace {

// A sample this close to the window's edge counts as taken at it: the tick that samples comes
// every second, up to a few tens of milliseconds late.
constexpr double edge_tolerance_s = 0.1;
// A metrics page larger than this is not a Prometheus page worth reading.
constexpr std::size_t max_page_bytes = 4u << 20;

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

#if RINGRPC_LOAD_HAVE_CURL
std::size_t collect(char* data, std::size_t size, std::size_t count, void* user) {
  auto* page = static_cast<std::string*>(user);
  const std::size_t n = size * count;
  if (page->size() + n > max_page_bytes) return 0;  // libcurl then fails the transfer
  page->append(data, n);
  return n;
}

std::string fetch_page(const std::string& url) {
  static std::once_flag once;  // curl_global_init is not thread-safe in every libcurl build
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> c(curl_easy_init(), curl_easy_cleanup);
  if (!c) throw std::runtime_error("libcurl could not start a transfer");
  std::string page;
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c.get(), CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(c.get(), CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &page);
  const CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK) throw std::runtime_error(url + ": " + curl_easy_strerror(rc));
  return page;
}
#endif

}  // namespace

std::uint64_t parse_proc_stat_ticks(std::string_view stat) {
  // "PID (COMM) STATE PPID ...": COMM may hold anything, ')' too, so fields count from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) throw std::runtime_error("not a /proc/PID/stat line");
  std::istringstream in{std::string(stat.substr(close + 1))};
  std::string field;
  std::uint64_t utime = 0, stime = 0;
  // After ')': state is field 3 of the line, utime 14 and stime 15.
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field)) throw std::runtime_error("a /proc/PID/stat line with too few fields");
    if (i == 14 || i == 15) {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
      if (ec != std::errc{} || end != field.data() + field.size()) {
        throw std::runtime_error("a /proc/PID/stat line whose CPU times are not numbers");
      }
      (i == 14 ? utime : stime) = v;
    }
  }
  return utime + stime;
}

double parse_process_cpu_seconds(std::string_view page) {
  constexpr std::string_view name = "process_cpu_seconds_total";
  double total = 0;
  bool found = false;
  while (!page.empty()) {
    const auto eol = page.find('\n');
    std::string_view line = page.substr(0, eol);
    page = eol == std::string_view::npos ? std::string_view{} : page.substr(eol + 1);
    if (!line.starts_with(name) || line.size() == name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;  // another metric whose name starts alike
    std::size_t at = name.size();
    if (next == '{') {
      at = line.find('}', at);
      if (at == std::string_view::npos) throw std::runtime_error("a process_cpu_seconds_total line without '}'");
      ++at;
    }
    line.remove_prefix(at);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const std::string value(line.substr(0, line.find(' ')));  // a timestamp may follow
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) {
      throw std::runtime_error("process_cpu_seconds_total has the value '" + value + "'");
    }
    total += v;
    found = true;
  }
  if (!found) throw std::runtime_error("the page has no process_cpu_seconds_total");
  return total;
}

cpu_reader pid_cpu_reader(long pid) {
  if (pid <= 0) throw std::invalid_argument("--server-pid must be a process id");
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const double tick_s = 1.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  cpu_reader reader = [path, tick_s] { return static_cast<double>(parse_proc_stat_ticks(read_small_file(path))) * tick_s; };
  try {
    reader();
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument("--server-pid " + std::to_string(pid) + ": " + e.what() +
                                " (a process on this machine, that this user may read)");
  }
  return reader;
}

cpu_reader metrics_cpu_reader(const std::string& url) {
#if RINGRPC_LOAD_HAVE_CURL
  cpu_reader reader = [url] { return parse_process_cpu_seconds(fetch_page(url)); };
  try {
    reader();
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--server-metrics: ") + e.what());
  }
  return reader;
#else
  throw std::invalid_argument("--server-metrics " + url +
                              ": this ringrpc-load was built without libcurl; use --server-pid for a local server");
#endif
}

server_cost_meter::server_cost_meter(std::string source, cpu_reader reader)
    : _source(std::move(source)), _reader(std::move(reader)) {}

void server_cost_meter::take(double t_s) {
  if (!_failure.empty()) return;
  try {
    _samples.push_back({t_s, _reader()});
  } catch (const std::exception& e) {
    _failure = e.what();
  }
}

void server_cost_meter::start() {
  _started_ns = detail::now_ns();
  take(0);
}

void server_cost_meter::sample(double run_t_s) {
  const double own_s = static_cast<double>(detail::now_ns() - _started_ns) / 1e9;
  if (_samples.size() == 1) _run_offset_s = std::max(0.0, own_s - run_t_s);  // the first tick's
  take(own_s);
}

void server_cost_meter::finish() { take(static_cast<double>(detail::now_ns() - _started_ns) / 1e9); }

server_cost server_cost_meter::result(double warmup_s, double measured_s, std::uint64_t calls) const {
  if (!_failure.empty()) {
    server_cost c;
    c.source = _source;
    c.note = "a sample failed: " + _failure;
    return c;
  }
  std::vector<point> in_run_clock = _samples;
  for (point& p : in_run_clock) p.t_s -= _run_offset_s;
  return compute(_source, in_run_clock, warmup_s, measured_s, calls);
}

server_cost server_cost_meter::compute(std::string source, const std::vector<point>& samples, double warmup_s,
                                       double measured_s, std::uint64_t calls) {
  server_cost c;
  c.source = std::move(source);
  const double from = warmup_s, to = warmup_s + measured_s;
  std::size_t first = samples.size(), last = samples.size();
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].t_s <= from + edge_tolerance_s) first = i;
    if (last == samples.size() && samples[i].t_s >= to - edge_tolerance_s) last = i;
  }
  if (first == samples.size() || last == samples.size() || last <= first) {
    c.note = "no samples around the measured window";
    return c;
  }
  c.window_s = samples[last].t_s - samples[first].t_s;
  c.cpu_s = std::max(0.0, samples[last].cpu_s - samples[first].cpu_s);
  c.cores = c.window_s > 0 ? c.cpu_s / c.window_s : 0;
  for (std::size_t i = first + 1; i <= last; ++i) {
    const double dt = samples[i].t_s - samples[i - 1].t_s;
    c.per_second_cores.push_back(dt > 0 ? std::max(0.0, samples[i].cpu_s - samples[i - 1].cpu_s) / dt : 0);
  }
  // Calls/s over the window the calls were counted in, applied to the cores of the (nearly
  // the same) window the CPU was sampled over.
  const double calls_per_s = measured_s > 0 ? static_cast<double>(calls) / measured_s : 0;
  if (calls_per_s <= 0) {
    c.note = "no call was answered in the measured window";
  } else if (c.cpu_s == 0 && calls >= serving_takes_cpu_calls) {
    // No server answers this many calls within one clock tick of CPU: the figure would be a
    // confident zero about a process that did not serve them.
    c.note = c.source + " spent no CPU time while " + std::to_string(calls) +
             " calls were answered: it is not the process that served them (timeout(1), sudo and "
             "the like run the server as a child: give the server's own PID)";
  } else {
    c.cpu_us_per_call = c.cores / calls_per_s * 1e6;
  }
  return c;
}

std::string format_server_cost(const server_cost& c) {
  using report_detail::strprintf;
  std::string out = strprintf("  %-20s %14s\n", "server cpu", c.source.c_str());
  if (!c.note.empty()) return out + "    " + c.note + "\n\n";
  out += strprintf("  %-20s %14.2f\n", "  cores", c.cores);
  out += strprintf("  %-20s %14.2f\n", "  per call (us)", c.cpu_us_per_call);
  return out + "\n";
}

nlohmann::json server_cost_json(const server_cost& c) {
  nlohmann::json j{{"source", c.source}};
  if (!c.note.empty()) {
    j["note"] = c.note;
    return j;
  }
  j["cpu_s"] = c.cpu_s;
  j["window_s"] = c.window_s;
  j["cores"] = c.cores;
  j["cpu_us_per_call"] = c.cpu_us_per_call;
  j["per_second_cores"] = c.per_second_cores;
  return j;
}

}  // namespace ringrpc::load

#include "ops/process_metrics.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "ringrpc/version.hpp"

namespace ringrpc::detail {

namespace {

// Fields of /proc/self/stat after the command name, which may hold spaces and parentheses:
// everything after the last ')'. Field 3 of proc(5) (state) is element 0 here.
bool read_stat_fields(std::vector<std::string>& out) {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 1));
  std::string f;
  while (rest >> f) out.push_back(f);
  return out.size() >= 22;  // up to rss
}

// The boot time in seconds since the epoch (/proc/stat btime): starttime is relative to it.
long long boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  long long value = 0;
  while (in >> key) {
    if (key == "btime" && (in >> value)) return value;
    in.ignore(4096, '\n');
  }
  return -1;
}

long long open_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  long long n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace

void fill_process_metrics(metrics_snapshot& m) {
  m.gauge("ringrpc_build_info", "Always 1; the version of the ringrpc library as a label.")
      .add(1, {{"version", std::string(ringrpc::version())}});

  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<std::string> stat;
  bool have_stat = false;
  try {
    have_stat = ticks > 0 && read_stat_fields(stat);
    if (have_stat) {
      for (const int i : {11, 12, 19, 20, 21}) (void)std::stod(stat[static_cast<std::size_t>(i)]);
    }
  } catch (const std::exception&) {
    have_stat = false;  // not the format proc(5) describes: leave the family out
  }
  if (have_stat) {
    // proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24 (1-based, whole line).
    const double cpu = (std::stod(stat[11]) + std::stod(stat[12])) / static_cast<double>(ticks);
    m.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.").add(cpu);
    if (const long long btime = boot_time(); btime >= 0) {
      m.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.")
          .add(static_cast<double>(btime) + std::stod(stat[19]) / static_cast<double>(ticks));
    }
    m.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").add(std::stod(stat[20]));
    if (page > 0) {
      m.gauge("process_resident_memory_bytes", "Resident memory size in bytes.")
          .add(std::stod(stat[21]) * static_cast<double>(page));
    }
  }
  if (const long long fds = open_fds(); fds >= 0) {
    m.gauge("process_open_fds", "Number of open file descriptors.").add(static_cast<double>(fds));
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    m.gauge("process_max_fds", "Maximum number of open file descriptors.").add(static_cast<double>(lim.rlim_cur));
  }
}

}  // namespace ringrpc::detail

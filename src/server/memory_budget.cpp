#include "server/memory_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace ringrpc::detail {

namespace {

// Reads a whole small text file (a /proc or /sys entry); empty when it cannot.
std::string read_small_file(const char* path) {
  std::string out;
  if (FILE* f = std::fopen(path, "re")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && out.size() < 64 * 1024) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// The tightest memory.max of this process's cgroup (v2) and its ancestors; 0 when none is set.
std::uint64_t cgroup_memory_max() {
  const std::string self = read_small_file("/proc/self/cgroup");
  const auto at = self.find("0::");
  if (at == std::string::npos) return 0;
  std::string path = self.substr(at + 3, self.find('\n', at) - at - 3);
  std::uint64_t tightest = 0;
  for (;;) {
    const std::string file = "/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/memory.max";
    const std::string v = read_small_file(file.c_str());
    if (!v.empty() && v.compare(0, 3, "max") != 0) {
      const std::uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
      if (n != 0 && (tightest == 0 || n < tightest)) tightest = n;
    }
    if (path.empty() || path == "/") break;
    const auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return tightest;
}

std::uint64_t mem_total() {
  const std::string info = read_small_file("/proc/meminfo");
  const auto at = info.find("MemTotal:");
  if (at == std::string::npos) return 0;
  return std::strtoull(info.c_str() + at + 9, nullptr, 10) * 1024;  // the file says kB
}

}  // namespace

std::size_t default_memory_budget() noexcept {
  try {
    std::uint64_t may_use = cgroup_memory_max();
    if (may_use == 0) may_use = mem_total();
    rlimit as{};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
      may_use = may_use == 0 ? as.rlim_cur : std::min<std::uint64_t>(may_use, as.rlim_cur);
    }
    if (may_use == 0) may_use = 4ull << 30;  // nothing readable: assume a small machine
    // Never below 64 MiB: a budget smaller than a few max-size frames refuses everything.
    return static_cast<std::size_t>(std::max<std::uint64_t>(may_use / 4, 64ull << 20));
  } catch (...) {
    return 1ull << 30;
  }
}

}  // namespace ringrpc::detail

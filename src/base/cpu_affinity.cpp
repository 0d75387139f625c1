#include "base/cpu_affinity.hpp"

#include <sched.h>

namespace ringrpc::detail {

unsigned usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

}  // namespace ringrpc::detail

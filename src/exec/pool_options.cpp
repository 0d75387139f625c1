// Pool kinds by name, and the validation of pool_options (ringrpc/thread_pool.hpp).

#include <stdexcept>
#include <string>

#include "base/cpu_affinity.hpp"
#include "exec/worker_pool_impl.hpp"

namespace ringrpc {

std::string_view to_string(pool_kind k) noexcept {
  switch (k) {
    case pool_kind::fixed: return "fixed";
    case pool_kind::cached: return "cached";
    case pool_kind::limited: return "limited";
    case pool_kind::eager: return "eager";
  }
  return "unknown";
}

bool parse_pool_kind(std::string_view name, pool_kind& out) noexcept {
  for (pool_kind k : {pool_kind::fixed, pool_kind::cached, pool_kind::limited, pool_kind::eager}) {
    if (name == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

}  // namespace ringrpc

namespace ringrpc::detail {

namespace {

[[noreturn]] void invalid(const std::string& pool, const std::string& what) {
  throw std::invalid_argument(cat("thread pool '", pool, "': ", what));
}

}  // namespace

pool_options validate_pool_options(const std::string& name, pool_options o,
                                   std::chrono::milliseconds report_interval) {
  if (name.empty()) throw std::invalid_argument("thread pool name must not be empty");
  switch (o.kind) {
    case pool_kind::fixed:
    case pool_kind::cached:
    case pool_kind::limited:
    case pool_kind::eager: break;
    default:
      invalid(name, cat("kind = ", static_cast<int>(o.kind),
                        " is not a pool kind; allowed: fixed, cached, limited, eager"));
  }
  if (o.threads > max_pool_threads) {
    invalid(name, cat("threads = ", o.threads,
                      " is out of range; allowed: 0 (one per usable CPU) or 1 to ", max_pool_threads));
  }
  if (o.threads == 0) o.threads = usable_cpus();
  if (o.kind != pool_kind::fixed && o.core_threads > o.threads) {
    invalid(name, cat("core_threads = ", o.core_threads, " exceeds threads = ", o.threads,
                      "; allowed: 0 to ", o.threads));
  }
  if (o.queue > max_bounded_queue) {
    invalid(name, cat("queue = ", o.queue,
                      " is out of range; allowed: < 0 (unbounded), 0 (hand-off) or 1 to ",
                      max_bounded_queue));
  }
  if ((o.kind == pool_kind::cached || o.kind == pool_kind::eager) && o.keep_alive.count() <= 0) {
    invalid(name, cat("keep_alive = ", static_cast<std::int64_t>(o.keep_alive.count()),
                      " ms; allowed: > 0 ms"));
  }
  if (report_interval.count() < 0) {
    invalid(name, cat("report_interval = ", static_cast<std::int64_t>(report_interval.count()),
                      " ms; allowed: >= 0 ms"));
  }
  return o;
}

}  // namespace ringrpc::detail

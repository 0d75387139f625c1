// A pool's state read without stopping it: stats(), and the overload report (describe()) built
// from the labels the workers publish as they start a task.

#include <algorithm>
#include <cstdio>
#include <thread>

#include "exec/worker_pool_impl.hpp"

namespace ringrpc::detail {

namespace {

std::int64_t coarse_resolution_ns() noexcept {
  static const std::int64_t res = [] {
    timespec ts{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0) return std::int64_t{4'000'000};
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }();
  return res;
}

std::string format_duration(std::int64_t ns) {
  char buf[32];
  const std::int64_t res = coarse_resolution_ns();
  if (ns < res) {
    std::snprintf(buf, sizeof buf, "< %.0f ms", std::max(1.0, static_cast<double>(res) / 1e6));
    return buf;
  }
  const double us = static_cast<double>(ns) / 1e3;
  if (us < 1000) {
    std::snprintf(buf, sizeof buf, "%.0f us", us);
  } else if (us < 10'000) {
    std::snprintf(buf, sizeof buf, "%.1f ms", us / 1e3);
  } else if (us < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.0f ms", us / 1e3);
  } else if (us < 10'000'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", us / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f s", us / 1e6);
  }
  return buf;
}

}  // namespace

unsigned thread_pool::impl::count_active() const noexcept {
  unsigned n = 0;
  for (unsigned i = 0; i < max_threads; ++i) {
    if (slots[i].started_ns.load(std::memory_order_relaxed) != 0) ++n;
  }
  return n;
}

pool_stats thread_pool::impl::stats() const {
  pool_stats s;
  s.name = name;
  s.kind = opts.kind;
  s.threads = threads.load(std::memory_order_relaxed);
  s.active = count_active();
  s.max_threads = max_threads;
  s.largest = largest.load(std::memory_order_relaxed);
  s.queued = queue.size();
  s.queue_capacity = opts.queue;
  for (unsigned i = 0; i < max_threads; ++i) s.completed += slots[i].completed.get();
  s.rejected = rejected.load(std::memory_order_relaxed);
  return s;
}

std::string thread_pool::impl::describe() const {
  const pool_stats st = stats();
  std::string out = cat("pool '", name, "' (", to_string(opts.kind), ")",
                        st.rejected != 0 ? " refused work: " : ": ", st.active, "/", st.threads,
                        " threads busy");
  if (st.threads != max_threads) out += cat(" (max ", max_threads, ")");
  out += ", ";
  if (hand_off) {
    out += "hand-off (no queue)";
  } else if (queue.unbounded()) {
    out += cat(st.queued, " queued (unbounded)");
  } else {
    out += cat(st.queued, "/", opts.queue, " queued");
  }
  out += cat(", ", st.rejected, " refused so far; busy:");
  constexpr unsigned max_listed = 32;
  unsigned listed = 0, more = 0;
  const std::int64_t now = task_stamp_ns();
  for (unsigned i = 0; i < max_threads; ++i) {
    const worker_slot& s = slots[i];
    const char* data = nullptr;
    std::size_t size = 0;
    std::int64_t started_at = 0;
    bool consistent = false;
    for (int attempt = 0; attempt < 64 && !consistent; ++attempt) {
      const std::uint32_t s1 = s.seq.load(std::memory_order_acquire);
      if (s1 & 1u) {
        std::this_thread::yield();
        continue;
      }
      data = s.label_data.load(std::memory_order_relaxed);
      size = s.label_size.load(std::memory_order_relaxed);
      started_at = s.started_ns.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      consistent = s.seq.load(std::memory_order_relaxed) == s1;
    }
    if (!consistent || started_at == 0) continue;
    if (listed == max_listed) {
      ++more;
      continue;
    }
    out += cat(listed == 0 ? " [" : ", [", i, "] ");
    if (size == 0) {
      out += "(unlabelled)";
    } else {
      out.append(data, size);
    }
    out += ' ';
    out += format_duration(std::max<std::int64_t>(0, now - started_at));
    ++listed;
  }
  if (listed == 0) out += " none";
  if (more != 0) out += cat(", and ", more, " more");
  return out;
}

pool_stats thread_pool::stats() const { return _impl->stats(); }

std::string thread_pool::describe() const { return _impl->describe(); }

}  // namespace ringrpc::detail

#include "server/server_metrics.hpp"

#include <algorithm>
#include <map>

namespace ringrpc::detail {

namespace {

std::atomic<std::uint64_t> next_generation{1};

struct local_cache {
  std::uint64_t generation = 0;
  thread_metrics* block = nullptr;
};
thread_local local_cache cache;

}  // namespace

thread_metrics::thread_metrics() : _other(std::make_unique<method_metrics>("(other)")) {}

method_metrics& thread_metrics::find(std::string_view name) noexcept {
  if (_last != nullptr && _last->name == name) return *_last;
  if (auto it = _index.find(name); it != _index.end()) return *(_last = it->second);
  if (const auto dot = name.find('.'); dot != std::string_view::npos) {
    const bool keep = _dotted < max_dotted_methods && name.size() <= max_name_bytes && is_utf8(name);
    if (!keep) {
      // Counted under the endpoint the router took from the prefix; the name itself is not kept.
      const std::string_view prefix = name.substr(0, dot);
      if (auto it = _index.find(prefix); it != _index.end()) return *it->second;
      if (prefix.size() > max_name_bytes || !is_utf8(prefix)) return *_other;
      return add(prefix);
    }
    method_metrics& m = add(name);
    if (&m != _other.get()) ++_dotted;
    return m;
  }
  return add(name);
}

method_metrics& thread_metrics::add(std::string_view name) noexcept {
  const std::size_t n = _published.load(std::memory_order_relaxed);
  if (n == max_methods) return *_other;
  try {
    _methods[n] = std::make_unique<method_metrics>(std::string(name));
    _index.emplace(std::string(name), _methods[n].get());
  } catch (...) {
    _methods[n].reset();
    return *_other;
  }
  _published.store(n + 1, std::memory_order_release);
  return *(_last = _methods[n].get());
}

void thread_metrics::completed(std::string_view method, status code) noexcept {
  // Only per method: the totals are their sum, made when read.
  const auto s = std::min<std::size_t>(static_cast<std::size_t>(code), status_count - 1);
  find(method).by_status[s].add();
}

void thread_metrics::timed(std::string_view method, std::int64_t queue_ns,
                           std::int64_t processing_ns) noexcept {
  const auto q = static_cast<std::uint64_t>(std::max<std::int64_t>(queue_ns, 0));
  const auto p = static_cast<std::uint64_t>(std::max<std::int64_t>(processing_ns, 0));
  queue_time.record(q);
  processing_time.record(p);
  find(method).processing.record(p);
}

void thread_metrics::stalled(std::string_view method, std::int64_t ns) noexcept {
  method_metrics& m = find(method);
  m.stalls.add();
  m.stall_ns.add(static_cast<std::uint64_t>(std::max<std::int64_t>(ns, 0)));
}

metrics_registry::metrics_registry() : _generation(next_generation.fetch_add(1)) {}

thread_metrics& metrics_registry::local() {
  if (cache.generation == _generation) return *cache.block;
  return slow_local();
}

thread_metrics& metrics_registry::slow_local() {
  // One block per (thread, registry). A thread that serves two servers in turn (a user thread
  // answering deferred replies) gets a block in each; the cache holds the last one used.
  thread_local std::vector<std::pair<std::uint64_t, thread_metrics*>> mine;
  for (auto& [gen, block] : mine) {
    if (gen == _generation) {
      cache = {gen, block};
      return *block;
    }
  }
  auto block = std::make_unique<thread_metrics>();
  thread_metrics* raw = block.get();
  {
    std::lock_guard lock(_mu);
    _blocks.push_back(std::move(block));
  }
  mine.emplace_back(_generation, raw);
  cache = {_generation, raw};
  return *raw;
}

call_metrics_snapshot metrics_registry::snapshot() const {
  call_metrics_snapshot s;
  std::map<std::string, call_metrics_snapshot::method> methods;
  std::lock_guard lock(_mu);
  for (const auto& b : _blocks) {
    b->queue_time.add_to(s.queue_time);
    b->processing_time.add_to(s.processing_time);
    auto merge = [&](const method_metrics& m) {
      auto& out = methods[m.name];
      out.name = m.name;
      for (std::size_t i = 0; i < status_count; ++i) {
        const std::uint64_t n = m.by_status[i].get();
        out.by_status[i] += n;
        s.by_status[i] += n;
      }
      m.processing.add_to(out.processing);
      out.stalls += m.stalls.get();
      out.stall_ns += m.stall_ns.get();
    };
    const std::size_t n = b->method_count();
    for (std::size_t i = 0; i < n; ++i) merge(b->method_at(i));
    bool any_other = false;
    for (const auto& c : b->other().by_status) any_other = any_other || c.get() != 0;
    any_other = any_other || b->other().stalls.get() != 0;
    if (any_other) merge(b->other());
  }
  for (auto& [name, m] : methods) s.methods.push_back(std::move(m));
  return s;
}

}  // namespace ringrpc::detail

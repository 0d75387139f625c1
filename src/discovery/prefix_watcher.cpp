#include "discovery/prefix_watcher.hpp"

#include <algorithm>

#include "base/thread_name.hpp"
#include "log/log.hpp"

namespace ringrpc::discovery::detail {

prefix_watcher::prefix_watcher(std::string base_url, std::string prefix,
                               std::function<void(const snapshot&)> on_change)
    : _etcd(std::move(base_url)), _prefix(std::move(prefix)), _on_change(std::move(on_change)) {}

prefix_watcher::~prefix_watcher() { stop(); }

void prefix_watcher::start() {
  _thread = std::thread([this] {
    ringrpc::detail::name_this_thread("rr-etcd-watch");
    run();
  });
}

void prefix_watcher::stop() noexcept {
  {
    std::lock_guard lock(_mu);
    _stop.store(true, std::memory_order_release);
  }
  _cv.notify_all();
  if (_thread.joinable() && _thread.get_id() != std::this_thread::get_id()) _thread.join();
}

bool prefix_watcher::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lock(_mu);
  return !_cv.wait_for(lock, d, [&] { return _stop.load(std::memory_order_acquire); });
}

void prefix_watcher::run() {
  constexpr std::chrono::milliseconds backoff_min{200}, backoff_max{5000};
  auto backoff = backoff_min;
  bool failing = false;
  while (!_stop.load(std::memory_order_acquire)) {
    auto listed = _etcd.range_prefix(_prefix);
    if (!listed) {
      _failures.fetch_add(1, std::memory_order_relaxed);
      if (!failing) log::warn("etcd_watch_failed", {{"prefix", _prefix}, {"msg", listed.error}, {"retry", "with backoff"}});
      failing = true;
      if (!sleep_for(backoff)) return;
      backoff = std::min(backoff * 2, backoff_max);
      continue;
    }
    if (failing) log::info("etcd_watch_resumed", {{"prefix", _prefix}});
    failing = false;
    backoff = backoff_min;
    _listings.fetch_add(1, std::memory_order_relaxed);
    snapshot copy;
    for (auto& kv : listed.value->kvs) copy.insert_or_assign(std::move(kv.key), std::move(kv.value));
    _on_change(copy);
    std::int64_t revision = listed.value->revision;

    bool compacted = false;
    bool bad_message = false;
    const std::string why = _etcd.watch(
        _prefix, revision + 1,
        [&](const parsed<watch_message>& m) {
          if (!m) {
            bad_message = true;
            log::warn("etcd_watch_bad_message", {{"prefix", _prefix}, {"msg", m.error}});
            return false;
          }
          if (m.value->canceled || m.value->compact_revision > 0) {
            compacted = m.value->compact_revision > 0;
            if (!compacted) log::warn("etcd_watch_cancelled", {{"prefix", _prefix}, {"msg", m.value->cancel_reason}});
            return false;
          }
          if (m.value->events.empty()) return true;  // created, progress notifications
          for (const auto& ev : m.value->events) {
            if (ev.is_delete) {
              copy.erase(ev.kv.key);
            } else {
              copy.insert_or_assign(ev.kv.key, ev.kv.value);
            }
          }
          revision = std::max(revision, m.value->revision);
          _on_change(copy);
          return true;
        },
        _stop);
    if (_stop.load(std::memory_order_acquire)) return;
    if (compacted) {
      // The revisions between the listing and now are gone: only a new listing is complete.
      _compactions.fetch_add(1, std::memory_order_relaxed);
      log::info("etcd_watch_compacted", {{"prefix", _prefix}, {"msg", "listing again"}});
      continue;
    }
    _failures.fetch_add(1, std::memory_order_relaxed);
    if (!bad_message) log::warn("etcd_watch_failed", {{"prefix", _prefix}, {"msg", why}, {"retry", "with backoff"}});
    failing = true;
    if (!sleep_for(backoff)) return;
    backoff = std::min(backoff * 2, backoff_max);
  }
}

}  // namespace ringrpc::discovery::detail

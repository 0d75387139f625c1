#include "channel/channel_core.hpp"

#include <algorithm>
#include <random>
#include <system_error>

#include "base/thread_name.hpp"
#include "log/log.hpp"

namespace ringrpc::detail {

namespace {
std::atomic<std::uint64_t> next_channel_id{1};
constexpr auto tick = std::chrono::milliseconds(20);
}  // namespace

channel_core::channel_core(std::shared_ptr<resolver> r, channel_options options)
    : _options(std::move(options)), _resolver(std::move(r)),
      _runtime(_options.runtime ? _options.runtime : client_runtime::create()),
      _target(_resolver->describe()), _id(next_channel_id.fetch_add(1)),
      _snap(std::make_unique<const member_snapshot>()),
      _budget(_options.retry_max_tokens, _options.retry_token_ratio) {
  if (_options.max_attempts == 0) _options.max_attempts = 1;
  if (!_options.interceptors.empty()) {
    _interceptors = std::make_shared<const client_interceptors>(_options.interceptors);
  }
}

channel_core::~channel_core() { close(); }

void channel_core::start() {
  _thread = std::thread([this] {
    name_this_thread("rr-channel");
    run();
  });
  _resolver->start([this](std::vector<member_address> members) {
    {
      std::lock_guard lock(_mu);
      _pending_members = std::move(members);
      _wake = true;
    }
    _membership_updates.fetch_add(1, std::memory_order_relaxed);
    _cv.notify_all();
  });
}

void channel_core::close() noexcept {
  if (_closed.exchange(true)) return;
  _resolver->stop();
  {
    std::lock_guard lock(_mu);
    _stop = true;
  }
  _cv.notify_all();
  if (_thread.joinable()) _thread.join();
  _snap.publish(std::make_unique<const member_snapshot>());
  // Closing fails what is pending with client_closed; those callbacks let go of their members.
  std::vector<std::shared_ptr<member_conn>> all;
  {
    std::lock_guard lock(_mu);
    for (auto& [label, e] : _entries) {
      if (e.conn) all.push_back(std::move(e.conn));
    }
    _entries.clear();
    for (auto& c : _retired) all.push_back(std::move(c));
    _retired.clear();
  }
  for (auto& c : all) c->conn.close();
  all.clear();
}

void channel_core::report_failed(member_conn& m) noexcept {
  if (m.failed.exchange(true, std::memory_order_acq_rel)) return;
  {
    std::lock_guard lock(_mu);
    _wake = true;
  }
  _cv.notify_all();
}

void channel_core::run() {
  std::unique_lock lock(_mu);
  while (!_stop) {
    _cv.wait_for(lock, tick, [&] { return _stop || _wake; });
    if (_stop) break;
    _wake = false;
    if (_pending_members) {
      auto members = std::move(*_pending_members);
      _pending_members.reset();
      apply_membership(std::move(members));
    }
    eject_failed();
    std::vector<std::shared_ptr<member_conn>> to_check;
    if (std::chrono::steady_clock::now() >= _next_health && _options.health_interval.count() > 0) {
      for (auto& [label, e] : _entries) {
        if (e.conn) to_check.push_back(e.conn);
      }
      _next_health = std::chrono::steady_clock::now() + _options.health_interval;
    }
    // Only the list holds these: no snapshot, no call.
    std::vector<std::shared_ptr<member_conn>> unused;
    for (auto it = _retired.begin(); it != _retired.end();) {
      if (it->use_count() == 1) {
        unused.push_back(std::move(*it));
        it = _retired.erase(it);
      } else {
        ++it;
      }
    }
    // Closing waits for the runtime thread, whose callbacks may take _mu (report_failed): so
    // closing, dialling and health calls happen without it.
    lock.unlock();
    for (auto& c : unused) c->conn.close();
    unused.clear();
    connect_due();
    check_health(to_check);
    lock.lock();
  }
}

void channel_core::publish() {
  auto snap = std::make_unique<member_snapshot>();
  for (auto& [label, e] : _entries) {
    if (e.conn && !e.conn->failed.load(std::memory_order_acquire)) snap->up.push_back(e.conn);
  }
  _snap.publish(std::move(snap));
}

void channel_core::retire(std::shared_ptr<member_conn> conn) {
  if (conn) _retired.push_back(std::move(conn));
}

void channel_core::apply_membership(std::vector<member_address> members) {
  std::map<std::string, member_address> wanted;
  for (auto& m : members) {
    std::string label = m.host + ":" + std::to_string(m.port);
    wanted.insert_or_assign(std::move(label), std::move(m));
  }
  bool changed = false;
  for (auto it = _entries.begin(); it != _entries.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    // Gone from the registry (deregistered or expired): no new calls; those in flight finish
    // on the old connection, which is closed once they have.
    log::info("channel_member_removed", {{"target", _target}, {"member", it->first}});
    _calls_removed.fetch_add(it->second.counters->calls.load(std::memory_order_relaxed), std::memory_order_relaxed);
    retire(std::move(it->second.conn));
    it = _entries.erase(it);
    changed = true;
  }
  for (auto& [label, addr] : wanted) {
    auto [it, added] = _entries.try_emplace(label);
    if (added) {
      it->second.address = addr;
      it->second.next_attempt = std::chrono::steady_clock::now();
      log::info("channel_member_added", {{"target", _target}, {"member", label}});
      _wake = true;
    } else {
      it->second.address.weight = addr.weight;
      it->second.address.zone = addr.zone;
    }
  }
  if (changed) publish();
}

void channel_core::eject_failed() {
  bool changed = false;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [label, e] : _entries) {
    if (!e.conn) continue;
    const bool failed = e.conn->failed.load(std::memory_order_acquire) || !e.conn->conn.connected() ||
                        e.conn->missed_checks.load(std::memory_order_relaxed) >= _options.eject_after_failures;
    if (!failed) continue;
    e.conn->failed.store(true, std::memory_order_release);
    e.counters->failures.fetch_add(1, std::memory_order_relaxed);
    _ejections.fetch_add(1, std::memory_order_relaxed);
    // A member that said it is stopping still accepts connections during its deregister
    // grace; redialling it at once would hand it calls again. Stay away for the longest
    // backoff: by then it is gone (or its ping says SHUTTING_DOWN again).
    e.backoff = e.conn->leaving.load(std::memory_order_acquire) ? _options.reconnect_backoff_max
                                                                : _options.reconnect_backoff_min;
    e.next_attempt = now + e.backoff;
    log::warn("channel_member_ejected", {{"target", _target}, {"member", label}, {"retry_in_ms", static_cast<std::int64_t>(e.backoff.count())}});
    retire(std::move(e.conn));
    changed = true;
  }
  if (changed) publish();
}

void channel_core::connect_due() {
  // Which members to dial, copied out so the dialling needs no lock.
  std::vector<std::pair<std::string, member_address>> due;
  {
    std::lock_guard lock(_mu);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [label, e] : _entries) {
      if (!e.conn && e.next_attempt <= now) due.emplace_back(label, e.address);
    }
  }
  for (auto& [label, addr] : due) {
    std::optional<client> c;
    std::string why;
    try {
      c.emplace(client::connect(addr.host, addr.port, _options.client, _runtime));
    } catch (const std::system_error& e) {
      why = e.what();
    }
    std::lock_guard lock(_mu);
    if (_stop) return;
    auto it = _entries.find(label);
    if (it == _entries.end()) continue;  // removed while dialling; `c` closes
    member_entry& e = it->second;
    if (c) {
      e.conn = std::make_shared<member_conn>(e.address, e.counters, std::move(*c));
      if (e.ever_connected) {
        _reconnects.fetch_add(1, std::memory_order_relaxed);
        log::info("channel_member_reconnected", {{"target", _target}, {"member", label}});
      }
      e.ever_connected = true;
      e.backoff = std::chrono::milliseconds(0);
      publish();
      continue;
    }
    e.counters->failures.fetch_add(1, std::memory_order_relaxed);
    e.backoff = e.backoff.count() == 0 ? _options.reconnect_backoff_min
                                       : std::min(e.backoff * 2, _options.reconnect_backoff_max);
    // Jitter (up to a quarter more) so members that failed together are not dialled in step.
    thread_local std::minstd_rand rng{std::random_device{}()};
    const auto jitter = std::chrono::milliseconds(rng() % (e.backoff.count() / 4 + 1));
    e.next_attempt = std::chrono::steady_clock::now() + e.backoff + jitter;
    log::debug("channel_connect_failed", {{"target", _target}, {"member", label}, {"msg", why}});
  }
}

void channel_core::check_health(const std::vector<std::shared_ptr<member_conn>>& conns) {
  for (const auto& m : conns) {
    if (m->check_in_flight.exchange(true)) continue;
    call_options o;
    o.timeout = _options.health_timeout;
    m->conn.call_async(
        _options.health_method, {},
        [this, m](const call_outcome& out) {
          // A stopping server's ping says SHUTTING_DOWN while it still serves (its deregister
          // grace): eject now, so calls move away before its listener closes. Ejecting retires
          // the connection gracefully: calls already on it finish there.
          if (out.error == call_error::server_status && out.code == status::shutting_down) {
            log::info("channel_member_leaving", {{"target", _target}, {"member", m->label}});
            m->leaving.store(true, std::memory_order_release);
            report_failed(*m);
            m->check_in_flight.store(false, std::memory_order_release);
            return;
          }
          // Any other answer from the server means it is alive and reading. The built-in ping
          // answers ok; a server too old to have it answers "unknown method", which then counts
          // as alive too (it proves only that the server reads, not that its threads run).
          const bool alive = out.error == call_error::none || out.error == call_error::server_status ||
                             out.error == call_error::client_busy;
          if (out.error == call_error::server_status && out.code == status::unknown_method &&
              _options.health_method == "ringrpc.ping" && !m->old_server_noted.exchange(true)) {
            log::info("channel_health_fallback",
                      {{"target", _target}, {"member", m->label},
                       {"msg", "member has no built-in ringrpc.ping (older server): any answer counts as alive"}});
          }
          if (alive) {
            m->missed_checks.store(0, std::memory_order_relaxed);
          } else if (out.error == call_error::connection_closed ||
                     m->missed_checks.fetch_add(1, std::memory_order_relaxed) + 1 >= _options.eject_after_failures) {
            if (out.error != call_error::client_closed) report_failed(*m);
          }
          m->check_in_flight.store(false, std::memory_order_release);
        },
        o);
  }
}

std::vector<channel_member_state> channel_core::members() const {
  std::vector<channel_member_state> out;
  std::lock_guard lock(_mu);
  for (const auto& [label, e] : _entries) {
    channel_member_state s;
    s.address = e.address;
    s.up = e.conn && !e.conn->failed.load(std::memory_order_acquire);
    s.outstanding = e.counters->outstanding.load(std::memory_order_relaxed);
    s.calls = e.counters->calls.load(std::memory_order_relaxed);
    s.failures = e.counters->failures.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

channel_stats channel_core::stats() const {
  channel_stats s;
  s.retries = _retries.load(std::memory_order_relaxed);
  s.retries_throttled = _retries_throttled.load(std::memory_order_relaxed);
  s.failed_not_idempotent = _failed_not_idempotent.load(std::memory_order_relaxed);
  s.no_member = _no_member.load(std::memory_order_relaxed);
  s.ejections = _ejections.load(std::memory_order_relaxed);
  s.reconnects = _reconnects.load(std::memory_order_relaxed);
  s.membership_updates = _membership_updates.load(std::memory_order_relaxed);
  s.retry_tokens = _budget.tokens();
  s.streams = _streams.load(std::memory_order_relaxed);
  const std::uint64_t call_retries = s.retries - std::min(s.retries, _stream_retries.load(std::memory_order_relaxed));
  const std::uint64_t call_no_member = s.no_member - std::min(s.no_member, _stream_no_member.load(std::memory_order_relaxed));
  std::uint64_t attempts = _calls_removed.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(_mu);
    for (const auto& [label, e] : _entries) attempts += e.counters->calls.load(std::memory_order_relaxed);
  }
  // Every attempt is a call or a retry; refusals with no member count as calls too. Stream
  // opens are not attempts (members' `calls`), so their retries and refusals are left out.
  s.calls = attempts - std::min(attempts, call_retries) + call_no_member;
  return s;
}

}  // namespace ringrpc::detail

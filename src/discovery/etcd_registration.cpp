#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "base/thread_name.hpp"
#include "discovery/etcd_client.hpp"
#include "log/log.hpp"
#include "ringrpc/discovery.hpp"

namespace ringrpc::discovery {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool wildcard(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]"; }

}  // namespace

struct etcd_registration::state {
  state(discovery_config c, std::string h) : cfg(std::move(c)), host(std::move(h)), etcd(cfg.etcd) {}

  discovery_config cfg;
  std::string host;
  detail::etcd_client etcd;
  std::string key;
  std::string value;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool deregistered = false;
  std::thread thread;
  std::int64_t lease = 0;  // owned by the thread while it runs, by before_stop after

  std::atomic<std::uint64_t> registrations{0};
  std::atomic<std::uint64_t> keepalive_failures{0};
  std::atomic<std::uint64_t> etcd_errors{0};
  std::atomic<bool> registered{false};

  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, d, [&] { return stop; });
  }

  bool register_once() {
    auto granted = etcd.grant(cfg.lease_ttl.count());
    if (!granted) return failed("lease grant", granted.error);
    lease = granted.value->id;
    auto put = etcd.put(key, value, lease);
    if (!put) {
      (void)etcd.revoke(lease);
      lease = 0;
      return failed("put", put.error);
    }
    const auto n = registrations.fetch_add(1, std::memory_order_relaxed) + 1;
    registered.store(true, std::memory_order_release);
    log::info("discovery_registered", {{"key", key}, {"lease_ttl_s", static_cast<std::int64_t>(cfg.lease_ttl.count())},
                                       {"registrations", n}});
    return true;
  }

  bool failed(std::string_view what, const std::string& why) {
    const auto n = etcd_errors.fetch_add(1, std::memory_order_relaxed) + 1;
    registered.store(false, std::memory_order_release);
    log::warn("discovery_etcd_error", {{"key", key}, {"op", what}, {"msg", why}, {"errors", n},
                                      {"serving", "on; retrying with backoff"}});
    return false;
  }

  void run() {
    constexpr std::chrono::milliseconds backoff_min{200}, backoff_max{5000};
    auto backoff = backoff_min;
    // Keepalives every third of the TTL: two may fail before the key expires.
    const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(300), cfg.lease_ttl / 3);
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (stop) return;
      }
      if (lease == 0) {
        if (register_once()) {
          backoff = backoff_min;
        } else if (!sleep_for(backoff)) {
          return;
        } else {
          backoff = std::min(backoff * 2, backoff_max);
        }
        continue;
      }
      if (!sleep_for(period)) return;
      auto kept = etcd.keepalive(lease);
      if (kept && *kept.value > 0) continue;
      keepalive_failures.fetch_add(1, std::memory_order_relaxed);
      if (kept) {
        // etcd answered but the lease is gone (expired while etcd was away, or restored from
        // an older snapshot): register again at once under a new one.
        registered.store(false, std::memory_order_release);
        log::warn("discovery_lease_lost", {{"key", key}, {"msg", "registering again"}});
        lease = 0;
        continue;
      }
      failed("keepalive", kept.error);
      // The lease may still be alive for a while: keep trying it; once its TTL has surely
      // passed, start over with a new lease.
      auto waited = std::chrono::milliseconds(0);
      while (waited < cfg.lease_ttl) {
        if (!sleep_for(backoff)) return;
        waited += backoff;
        backoff = std::min(backoff * 2, backoff_max);
        kept = etcd.keepalive(lease);
        if (kept) break;
        etcd_errors.fetch_add(1, std::memory_order_relaxed);
      }
      if (kept && *kept.value > 0) {
        registered.store(true, std::memory_order_release);
        log::info("discovery_keepalive_resumed", {{"key", key}});
        backoff = backoff_min;
        continue;
      }
      lease = 0;
    }
  }
};

etcd_registration::etcd_registration(discovery_config config, std::string server_host)
    : _s(std::make_unique<state>(std::move(config), std::move(server_host))) {
  if (_s->cfg.etcd.empty()) throw std::invalid_argument("discovery: no etcd URL ([discovery] etcd)");
  if (_s->cfg.service.empty()) throw std::invalid_argument("discovery: no service name ([discovery] service)");
}

etcd_registration::~etcd_registration() {
  {
    std::lock_guard lock(_s->mu);
    _s->stop = true;
  }
  _s->cv.notify_all();
  if (_s->thread.joinable()) _s->thread.join();
}

void etcd_registration::on_started(std::uint16_t port) {
  std::string address = _s->cfg.advertise;
  if (address.empty()) {
    if (wildcard(_s->host)) {
      throw std::invalid_argument("discovery: the server listens on " + _s->host +
                                  ", which clients cannot dial; set [discovery] advertise = \"HOST:PORT\"");
    }
    const bool v6 = _s->host.find(':') != std::string::npos;
    address = (v6 ? "[" + _s->host + "]" : _s->host) + ":" + std::to_string(port);
  }
  _s->key = _s->cfg.prefix + "/" + _s->cfg.service + "/" + address;
  member_record r;
  r.address = address;
  r.weight = _s->cfg.weight;
  r.zone = _s->cfg.zone;
  r.version = _s->cfg.version;
  r.tls = _s->cfg.tls;
  r.pid = ::getpid();
  r.started_at = utc_now();
  _s->value = encode_member_record(r);
  _s->thread = std::thread([s = _s.get()] {
    ringrpc::detail::name_this_thread("rr-etcd-reg");
    s->run();
  });
}

void etcd_registration::before_stop() noexcept {
  {
    std::lock_guard lock(_s->mu);
    if (_s->stop) return;
    _s->stop = true;
  }
  _s->cv.notify_all();
  if (_s->thread.joinable()) _s->thread.join();
  if (_s->key.empty()) return;  // never started
  if (_s->lease != 0) {
    auto removed = _s->etcd.remove(_s->key);
    (void)_s->etcd.revoke(_s->lease);
    _s->lease = 0;
    _s->registered.store(false, std::memory_order_release);
    if (removed) {
      log::info("discovery_deregistered", {{"key", _s->key}, {"grace_ms", static_cast<std::int64_t>(_s->cfg.deregister_grace.count())}});
    } else {
      log::warn("discovery_deregister_failed", {{"key", _s->key}, {"msg", removed.error}, {"then", "the lease expires it"}});
    }
  }
  // Clients watching the service drop this member within a round trip; calls they had already
  // sent, or send meanwhile, are served as usual.
  std::this_thread::sleep_for(_s->cfg.deregister_grace);
}

void etcd_registration::on_stopped() noexcept { before_stop(); }

registration_stats etcd_registration::stats() const {
  registration_stats st;
  st.registrations = _s->registrations.load(std::memory_order_relaxed);
  st.keepalive_failures = _s->keepalive_failures.load(std::memory_order_relaxed);
  st.etcd_errors = _s->etcd_errors.load(std::memory_order_relaxed);
  st.registered = _s->registered.load(std::memory_order_acquire);
  return st;
}

std::string etcd_registration::key() const { return _s->key; }

std::string etcd_registration::metrics_text() const {
  const registration_stats st = stats();
  // The service name is letters, digits, '_', '-' and '.' (checked with the configuration):
  // nothing to escape in a label value.
  const std::string label = "{service=\"" + _s->cfg.service + "\"} ";
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, std::uint64_t v) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    out.append(name).append(label).append(std::to_string(v)).append("\n");
  };
  metric("ringrpc_discovery_registrations_total", "counter",
         "Times this server wrote its key in etcd under a new lease (the first time included).", st.registrations);
  metric("ringrpc_discovery_etcd_errors_total", "counter", "Requests to etcd that failed.", st.etcd_errors);
  metric("ringrpc_discovery_keepalive_failures_total", "counter", "Lease keepalives that failed or found the lease gone.",
         st.keepalive_failures);
  metric("ringrpc_discovery_registered", "gauge", "1 while the key is believed to be in etcd.", st.registered ? 1 : 0);
  return out;
}

}  // namespace ringrpc::discovery

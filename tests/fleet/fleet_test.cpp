// A fleet on loopback: a real etcd started here, ringrpc-server processes registering in it,
// and a channel that watches the service. Registration, balancing, a member killed under load,
// a member drained with SIGTERM, and etcd lost and back.
//
// Arguments: the ringrpc-server binary and the etcd binary. Exits 77 when etcd cannot run.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "discovery/etcd_client.hpp"
#include "discovery/etcd_http.hpp"
#include "discovery/prefix_watcher.hpp"
#include "fleet_support.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/discovery.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"
#include "uring/uring_probe.hpp"

namespace {

std::string server_binary;
std::string work_dir;
fleet::etcd_peer* etcd = nullptr;

using namespace std::chrono_literals;

struct member_server {
  fleet::process proc;
  std::uint16_t port = 0;
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

std::unique_ptr<member_server> start_server(const std::string& service, int grace_ms = 300) {
  auto s = std::make_unique<member_server>();
  s->port = fleet::free_port();
  const std::string base = work_dir + "/" + service + "-" + std::to_string(s->port);
  {
    std::ofstream cfg(base + ".toml");
    cfg << "[server]\nhost = \"127.0.0.1\"\nport = " << s->port << "\nreaders = 1\nhandlers = 4\n"
        << "[discovery]\netcd = \"" << etcd->url() << "\"\nservice = \"" << service << "\"\n"
        << "lease_ttl_s = 2\nderegister_grace_ms = " << grace_ms << "\nzone = \"test\"\n";
  }
  s->proc = fleet::process({server_binary, "-c", base + ".toml"}, base + ".log");
  EXPECT_TRUE(s->proc.wait_for_output("discovery_registered", 10s)) << s->proc.output();
  return s;
}

std::vector<std::unique_ptr<member_server>> start_three(const std::string& service, int grace_ms = 300) {
  std::vector<std::unique_ptr<member_server>> out;
  for (int i = 0; i < 3; ++i) out.push_back(start_server(service, grace_ms));
  return out;
}

std::size_t registered_keys(const std::string& service) {
  auto r = ringrpc::discovery::detail::etcd_client(etcd->url()).range_prefix("/ringrpc/services/" + service + "/");
  return r ? r.value->kvs.size() : 0;
}

std::string target_of(const std::string& service) { return "etcd://" + etcd->hostport() + "/" + service; }

std::span<const std::byte> bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::map<std::string, std::uint64_t> calls_by_member(const ringrpc::channel& ch) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& m : ch.members()) out[m.address.host + ":" + std::to_string(m.address.port)] = m.calls;
  return out;
}

TEST(fleet, three_servers_register_and_round_robin_spreads_within_5_percent) {
  auto servers = start_three("rr");
  EXPECT_EQ(registered_keys("rr"), 3u);
  auto ch = ringrpc::discovery::open_channel(target_of("rr"));
  ASSERT_TRUE(ch.wait_for_members(3, 5s));
  constexpr int n = 3000;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(ch.call("echo", "x").ok());
  const auto by = calls_by_member(ch);
  ASSERT_EQ(by.size(), 3u);
  for (const auto& [m, c] : by) {
    EXPECT_GE(c, n / 3 * 95 / 100) << m;
    EXPECT_LE(c, n / 3 * 105 / 100) << m;
  }
  // The registered value follows the documented contract.
  auto r = ringrpc::discovery::detail::etcd_client(etcd->url()).range_prefix("/ringrpc/services/rr/");
  ASSERT_TRUE(r);
  for (const auto& kv : r.value->kvs) {
    auto rec = ringrpc::discovery::decode_member_record(kv.value);
    ASSERT_TRUE(rec) << kv.value;
    EXPECT_EQ(kv.key, "/ringrpc/services/rr/" + rec->address);
    EXPECT_EQ(rec->zone, "test");
    EXPECT_EQ(rec->weight, 1u);
    EXPECT_GT(rec->pid, 0);
  }
}

void expect_balanced_under_concurrency(ringrpc::balancing_policy policy, const std::string& service) {
  auto servers = start_three(service);
  ringrpc::channel_options opt;
  opt.policy = policy;
  auto ch = ringrpc::discovery::open_channel(target_of(service), opt);
  ASSERT_TRUE(ch.wait_for_members(3, 5s));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        std::vector<std::future<ringrpc::call_result>> batch;
        for (int k = 0; k < 4; ++k) batch.push_back(ch.call_future("sleep", bytes("300")));
        for (auto& f : batch) {
          if (f.wait_for(10s) != std::future_status::ready || !f.get().ok()) ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const auto by = calls_by_member(ch);
  ASSERT_EQ(by.size(), 3u);
  std::uint64_t total = 0;
  for (const auto& [m, c] : by) total += c;
  const double mean = static_cast<double>(total) / 3;
  for (const auto& [m, c] : by) {
    EXPECT_LE(static_cast<double>(c), 1.5 * mean) << ringrpc::to_string(policy) << " " << m;
    std::printf("%s %s: %llu calls (mean %.0f)\n", std::string(ringrpc::to_string(policy)).c_str(), m.c_str(),
                static_cast<unsigned long long>(c), mean);
  }
}

TEST(fleet, least_outstanding_keeps_every_member_under_1_5x_the_mean) {
  expect_balanced_under_concurrency(ringrpc::balancing_policy::least_outstanding, "lo");
}

TEST(fleet, power_of_two_choices_keeps_every_member_under_1_5x_the_mean) {
  expect_balanced_under_concurrency(ringrpc::balancing_policy::power_of_two_choices, "p2c");
}

struct tally {
  std::atomic<std::uint64_t> sent{0}, ok{0}, failed{0}, hung{0};
  std::mutex mu;
  std::vector<ringrpc::call_result> failures;
};

// Calls in batches of `window` from one thread until `stop`.
void load(ringrpc::channel& ch, bool idempotent, const std::atomic<bool>& stop, tally& t, const char* sleep_us,
          int window) {
  ringrpc::channel_call_options o;
  o.idempotent = idempotent;
  o.timeout = 3s;
  while (!stop.load()) {
    std::vector<std::future<ringrpc::call_result>> batch;
    for (int k = 0; k < window; ++k) batch.push_back(ch.call_future("sleep", bytes(sleep_us), o));
    t.sent += window;
    for (auto& f : batch) {
      if (f.wait_for(10s) != std::future_status::ready) {
        ++t.hung;
        continue;
      }
      auto r = f.get();
      if (r.ok()) {
        ++t.ok;
      } else {
        ++t.failed;
        std::lock_guard lock(t.mu);
        t.failures.push_back(std::move(r));
      }
    }
  }
}

TEST(fleet, sigkill_mid_load_ejects_retries_idempotent_and_fails_the_others_clearly) {
  auto servers = start_three("kill");
  ringrpc::channel_options opt;
  opt.retry_max_tokens = 100;  // many calls are in flight on the member killed at once
  auto ch = ringrpc::discovery::open_channel(target_of("kill"), opt);
  ASSERT_TRUE(ch.wait_for_members(3, 5s));
  std::atomic<bool> stop{false};
  tally idem, plain;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { load(ch, true, stop, idem, "20000", 8); });
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { load(ch, false, stop, plain, "20000", 8); });
  std::this_thread::sleep_for(500ms);
  servers[0]->proc.signal(SIGKILL);
  std::this_thread::sleep_for(1000ms);
  stop = true;
  for (auto& t : threads) t.join();
  const auto st = ch.stats();
  std::printf("SIGKILL: idempotent sent %llu ok %llu failed %llu; not idempotent sent %llu ok %llu failed %llu; "
              "retries %llu, throttled %llu, ejections %llu\n",
              (unsigned long long)idem.sent, (unsigned long long)idem.ok, (unsigned long long)idem.failed,
              (unsigned long long)plain.sent, (unsigned long long)plain.ok, (unsigned long long)plain.failed,
              (unsigned long long)st.retries, (unsigned long long)st.retries_throttled,
              (unsigned long long)st.ejections);
  EXPECT_EQ(idem.hung + plain.hung, 0u);
  EXPECT_EQ(idem.failed, 0u);
  for (const auto& f : idem.failures) ADD_FAILURE() << f.message;
  EXPECT_GE(st.retries, 1u);
  EXPECT_GE(plain.failed, 1u) << "no call that was not idempotent was in flight on the killed member";
  EXPECT_EQ(st.failed_not_idempotent, plain.failed);
  for (const auto& f : plain.failures) {
    EXPECT_EQ(f.error, ringrpc::call_error::connection_closed);
    EXPECT_NE(f.message.find("not marked idempotent"), std::string::npos) << f.message;
  }
  EXPECT_GE(st.ejections, 1u);
  for (const auto& m : ch.members()) {
    if (m.address.port == servers[0]->port) {
      EXPECT_FALSE(m.up);
    }
  }
}

TEST(fleet, sigterm_deregisters_first_and_no_call_fails) {
  auto servers = start_three("drain", 1000);
  auto ch = ringrpc::discovery::open_channel(target_of("drain"));
  ASSERT_TRUE(ch.wait_for_members(3, 5s));
  std::atomic<bool> stop{false};
  tally plain;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { load(ch, false, stop, plain, "1000", 4); });
  std::this_thread::sleep_for(500ms);
  servers[0]->proc.signal(SIGTERM);
  const int status = servers[0]->proc.wait_exit(10s);
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : threads) t.join();
  std::printf("SIGTERM: sent %llu ok %llu failed %llu\n", (unsigned long long)plain.sent,
              (unsigned long long)plain.ok, (unsigned long long)plain.failed);
  ASSERT_NE(status, -1) << "the drained server did not exit";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << servers[0]->proc.output();
  EXPECT_EQ(plain.failed, 0u);
  for (const auto& f : plain.failures) ADD_FAILURE() << ringrpc::to_string(f.error) << ": " << f.message;
  EXPECT_EQ(plain.hung, 0u);
  const std::string log = servers[0]->proc.output();
  const auto dereg = log.find("discovery_deregistered");
  const auto stopping = log.find("server_stopping");
  ASSERT_NE(dereg, std::string::npos) << log;
  ASSERT_NE(stopping, std::string::npos) << log;
  EXPECT_LT(dereg, stopping) << "deregistration must come before the stop";
  EXPECT_EQ(registered_keys("drain"), 2u);
  EXPECT_EQ(ch.members().size(), 2u);
}

TEST(fleet, etcd_lost_and_back_registrations_return) {
  auto servers = start_three("restart");
  auto ch = ringrpc::discovery::open_channel(target_of("restart"));
  ASSERT_TRUE(ch.wait_for_members(3, 5s));
  etcd->stop();
  // Serving goes on without etcd; the channel keeps the members it knows.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(ch.call("echo", "x").ok());
  std::this_thread::sleep_for(2500ms);  // past the lease TTL: the old leases are gone for good
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(ch.call("echo", "x").ok());
  for (auto& s : servers) EXPECT_TRUE(s->proc.running());
  // A fresh etcd (all data lost): each server registers again under a new lease.
  ASSERT_TRUE(etcd->start(true)) << etcd->why();
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (registered_keys("restart") < 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(registered_keys("restart"), 3u);
  EXPECT_TRUE(ch.wait_for_members(3, 15s));
  EXPECT_TRUE(ch.call("echo", "x").ok());
  for (auto& s : servers) {
    const auto log = s->proc.output();
    EXPECT_NE(log.find("discovery_etcd_error"), std::string::npos) << log;
    EXPECT_NE(log.find("registrations=2"), std::string::npos) << log;
  }
}

// The seam in the core, without ringrpc-server: an embedded server with the etcd registration
// registers on start, reports it on /metrics, and deregisters inside stop() before stopping.
TEST(fleet, an_embedded_server_registers_reports_metrics_and_deregisters_in_stop) {
  ringrpc::discovery_config d;
  d.etcd = etcd->url();
  d.service = "embedded";
  d.deregister_grace = 200ms;
  auto reg = std::make_shared<ringrpc::discovery::etcd_registration>(d, "127.0.0.1");
  ringrpc::server srv(ringrpc::test::threads(1, 1));
  ringrpc::add_builtin_methods(srv);
  srv.add_registration(reg);
  srv.start();
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!reg->stats().registered && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(registered_keys("embedded"), 1u);
  EXPECT_EQ(reg->key(), "/ringrpc/services/embedded/127.0.0.1:" + std::to_string(srv.port()));
  const std::string metrics = metrics_text(srv);
  EXPECT_NE(metrics.find("ringrpc_discovery_registered{service=\"embedded\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ringrpc_discovery_registrations_total{service=\"embedded\"} 1\n"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  srv.stop();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms) << "stop() waits out the deregistration grace";
  EXPECT_EQ(registered_keys("embedded"), 0u);
  EXPECT_FALSE(reg->stats().registered);
}

TEST(fleet, a_compacted_watch_says_so) {
  namespace d = ringrpc::discovery::detail;
  d::etcd_client c(etcd->url());
  ASSERT_TRUE(c.put("/compact/a", "1", 0));
  auto rev = c.put("/compact/a", "2", 0);
  ASSERT_TRUE(rev);
  const auto r = d::http_post(etcd->url() + "/v3/kv/compaction",
                              "{\"revision\":\"" + std::to_string(*rev.value) + "\"}", 2s);
  ASSERT_TRUE(r.error.empty()) << r.error;
  std::atomic<bool> stop{false};
  std::int64_t compacted = 0;
  c.watch("/compact/", 1, [&](const d::parsed<d::watch_message>& m) {
    if (m && m.value->compact_revision > 0) {
      compacted = m.value->compact_revision;
      return false;
    }
    return m.value.has_value();
  }, stop);
  EXPECT_EQ(compacted, *rev.value);
  // A watcher of the compacted prefix lists it, then follows it from the new revision.
  std::mutex mu;
  d::prefix_watcher::snapshot seen;
  d::prefix_watcher w(etcd->url(), "/compact/", [&](const d::prefix_watcher::snapshot& s) {
    std::lock_guard lock(mu);
    seen = s;
  });
  w.start();
  ASSERT_TRUE(c.put("/compact/b", "3", 0));
  const auto until = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (seen.size() == 2) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), until);
    std::this_thread::sleep_for(10ms);
  }
  w.stop();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: fleet_test RINGRPC_SERVER ETCD\n");
    return 2;
  }
  if (const auto why = ringrpc::detail::io_uring_unavailable_reason(); !why.empty()) {
    std::fprintf(stderr, "skipping: %s\n", why.c_str());
    return 77;
  }
  server_binary = argv[1];
  if (::access(argv[2], X_OK) != 0) {
    std::fprintf(stderr, "skipping: etcd (%s) is not installed (Debian: etcd-server)\n", argv[2]);
    return 77;
  }
  char tmpl[] = "/tmp/ringrpc-fleet-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 2;
  work_dir = tmpl;
  int rc = 0;
  {
    fleet::etcd_peer peer(argv[2], work_dir);
    if (!peer.start(true)) {
      std::fprintf(stderr, "skipping: etcd cannot run here: %s\n", peer.why().c_str());
      std::filesystem::remove_all(work_dir);
      return 77;
    }
    etcd = &peer;
    rc = RUN_ALL_TESTS();
    etcd = nullptr;
  }
  std::filesystem::remove_all(work_dir);
  return rc;
}

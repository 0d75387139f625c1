// Interceptors (ringrpc/interceptor.hpp) over real loopback: the order of a chain on server,
// client and channel, refusals, annotations a handler reads, a throwing interceptor that fails
// its call while the connection keeps serving, status and timing after completion, deferred
// answers, direct and pool endpoints.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/call_context.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/interceptor.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

std::span<const std::byte> bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// What every interceptor of a test writes, in order, under one lock.
struct journal {
  std::mutex mu;
  std::vector<std::string> lines;
  void add(std::string s) {
    std::lock_guard lock(mu);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu);
    return std::exchange(lines, {});
  }
};

/// A server interceptor that records before/after, and optionally refuses, throws or annotates.
struct recording_server_interceptor : server_interceptor {
  recording_server_interceptor(std::string n, journal& j) : name(std::move(n)), log(j) {}
  call_verdict before_call(call_context& call) override {
    log.add(name + ".before " + std::string(call.method()));
    if (auto v = call.metadata().find("refuse-at"); v && *v == name) {
      return call_verdict::refuse(status::permission_denied, name + " says no");
    }
    if (auto v = call.metadata().find("throw-at"); v && *v == name) throw std::runtime_error(name + " broke");
    if (has_deadline_seen.load() == 0) has_deadline_seen = call.has_deadline() ? 1 : 2;
    call.annotate("seen-by", name);
    call.annotate(name, "yes");
    return call_verdict::proceed();
  }
  void after_call(const server_call_summary& done) override {
    log.add(name + ".after " + std::string(done.method) + " " + std::string(to_string(done.code)) +
            (done.deferred ? " deferred" : ""));
    if (done.end < done.start || done.start < done.received) bad_timing = true;
    last_duration_ns = done.duration().count();
  }
  std::string name;
  journal& log;
  std::atomic<int> has_deadline_seen{0};
  std::atomic<bool> bad_timing{false};
  std::atomic<std::int64_t> last_duration_ns{-1};
};

class server_interceptor_test : public ::testing::Test {
 protected:
  void SetUp() override {
    outer = std::make_shared<recording_server_interceptor>("outer", log);
    inner = std::make_shared<recording_server_interceptor>("inner", log);
    server_options o = test::threads(1, 2);
    o.interceptors = {outer, inner};
    srv = std::make_unique<server>(o);
    // Replies with what the interceptors left for it, and records that it ran.
    srv->add_method("notes", [this](call_context& call) {
      log.add("handler");
      std::string s = std::string(call.annotation("seen-by").value_or("-")) + "," +
                      std::string(call.annotation("outer").value_or("-")) + "," +
                      std::string(call.annotation("inner").value_or("-"));
      call.reply(s);
    });
    srv->add_method("fails", [this](call_context& call) {
      log.add("handler");
      call.fail(status::bad_request, "nope");
    });
    srv->add_method("sleepy", [this](call_context& call) {
      log.add("handler");
      std::this_thread::sleep_for(20ms);
      call.reply("slept");
    });
    srv->add_method("later", [this](call_context& call) {
      log.add("handler");
      auto d = std::make_shared<deferred_reply>(call.defer());
      std::lock_guard lock(answerers_mu);
      answerers.emplace_back([d] {
        std::this_thread::sleep_for(10ms);
        d->reply(std::string_view("deferred answer"));
      });
    });
    endpoint_options direct;
    direct.policy = dispatch_policy::direct;
    struct direct_ep : endpoint {
      journal* log;
      void receive_and_reply(call_context& call) override {
        log->add("handler");
        call.reply(call.annotation("seen-by").value_or("-"));
      }
    };
    auto ep = std::make_shared<direct_ep>();
    ep->log = &log;
    srv->register_endpoint("direct", ep, direct);
    endpoint_options serial;
    serial.concurrency = endpoint_concurrency::serial;
    auto serial_ep = std::make_shared<direct_ep>();
    serial_ep->log = &log;
    srv->register_endpoint("serial", serial_ep, serial);
    srv->start();
    c = std::make_unique<client>(client::connect("127.0.0.1", srv->port()));
  }

  void TearDown() override {
    {
      // The answering threads finish before the server goes: the answer touches its shard.
      std::lock_guard lock(answerers_mu);
      for (auto& t : answerers) t.join();
    }
    c.reset();
    srv.reset();
  }

  call_result call(std::string_view method, std::vector<metadata_entry> md = {},
                   std::chrono::microseconds timeout = 0us) {
    call_options o;
    o.metadata = std::move(md);
    o.timeout = timeout;
    return c->call(method, bytes("x"), o);
  }

  journal log;
  std::mutex answerers_mu;
  std::vector<std::thread> answerers;
  std::shared_ptr<recording_server_interceptor> outer, inner;
  std::unique_ptr<server> srv;
  std::unique_ptr<client> c;
};

TEST_F(server_interceptor_test, chain_runs_in_order_around_the_handler_and_annotates) {
  const auto r = call("notes");
  ASSERT_TRUE(r.ok()) << r.message;
  // The inner interceptor ran last, so its "seen-by" replaced the outer one's.
  EXPECT_EQ(r.payload_string(), "inner,yes,yes");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before notes", "inner.before notes", "handler",
                                                  "inner.after notes ok", "outer.after notes ok"}));
}

TEST_F(server_interceptor_test, after_call_sees_status_and_timing) {
  auto r = call("fails");
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::bad_request);
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before fails", "inner.before fails", "handler",
                                                  "inner.after fails bad_request", "outer.after fails bad_request"}));
  r = call("sleepy");
  ASSERT_TRUE(r.ok());
  log.take();
  // The handler slept 20 ms between the chain's start and end.
  EXPECT_GE(outer->last_duration_ns.load(), std::chrono::nanoseconds(20ms).count());
  EXPECT_FALSE(outer->bad_timing.load());
  EXPECT_FALSE(inner->bad_timing.load());
}

TEST_F(server_interceptor_test, deadline_is_visible) {
  ASSERT_TRUE(call("notes", {}, 2s).ok());
  EXPECT_EQ(outer->has_deadline_seen.load(), 1);
}

TEST_F(server_interceptor_test, refusal_answers_the_caller_and_skips_the_rest) {
  const auto r = call("notes", {{"refuse-at", "outer"}});
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::permission_denied);
  EXPECT_EQ(r.message, "outer says no");
  // Neither the inner interceptor nor the handler ran; the refusing one's after_call did.
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before notes", "outer.after notes permission_denied"}));
}

TEST_F(server_interceptor_test, a_throwing_interceptor_fails_the_call_not_the_connection) {
  const auto r = call("notes", {{"throw-at", "inner"}});
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::internal);
  EXPECT_EQ(r.message, "server interceptor threw: inner broke");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before notes", "inner.before notes",
                                                  "inner.after notes internal", "outer.after notes internal"}));
  // The same connection goes on serving.
  EXPECT_TRUE(c->connected());
  const auto again = call("notes");
  ASSERT_TRUE(again.ok()) << again.message;
  EXPECT_EQ(again.payload_string(), "inner,yes,yes");
}

TEST_F(server_interceptor_test, runs_for_direct_endpoints_on_the_reader) {
  const auto r = call("direct");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "inner");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before direct", "inner.before direct", "handler",
                                                  "inner.after direct ok", "outer.after direct ok"}));
}

TEST_F(server_interceptor_test, runs_for_serial_endpoints) {
  const auto r = call("serial");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "inner");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before serial", "inner.before serial", "handler",
                                                  "inner.after serial ok", "outer.after serial ok"}));
}

TEST_F(server_interceptor_test, deferred_answers_are_seen_when_answered) {
  const auto r = call("later");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "deferred answer");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"outer.before later", "inner.before later", "handler",
                                                  "inner.after later ok deferred",
                                                  "outer.after later ok deferred"}));
}

TEST(server_interceptor_after, a_throwing_after_call_fails_the_call) {
  struct bad_after : server_interceptor {
    void after_call(const server_call_summary&) override { throw std::runtime_error("after broke"); }
  };
  server_options o = test::threads(1, 1);
  o.interceptors = {std::make_shared<bad_after>()};
  server srv(o);
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  for (int i = 0; i < 2; ++i) {
    const auto r = c.call("echo", "hi");
    EXPECT_EQ(r.code, status::internal);
    EXPECT_EQ(r.message, "server interceptor threw: after broke");
  }
  EXPECT_TRUE(c.connected());
}

TEST(server_interceptor_after, untimed_chains_report_the_receive_time) {
  struct untimed : server_interceptor {
    std::atomic<int> same{0}, calls{0};
    bool wants_timing() const noexcept override { return false; }
    void after_call(const server_call_summary& s) override {
      ++calls;
      if (s.start == s.received && s.end == s.received && s.received.time_since_epoch().count() > 0) ++same;
    }
  };
  auto in = std::make_shared<untimed>();
  server_options o = test::threads(1, 1);
  o.interceptors = {in};
  server srv(o);
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  ASSERT_TRUE(c.call("sleep", "2000").ok());
  EXPECT_EQ(in->calls.load(), 1);
  EXPECT_EQ(in->same.load(), 1);
}

TEST(server_interceptor_none, annotate_is_refused_without_interceptors) {
  server srv(test::threads(1, 1));
  srv.add_method("try", [](call_context& call) {
    const bool kept = call.annotate("k", "v");
    call.reply(kept || call.annotation("k") ? "kept" : "not kept");
  });
  srv.start();
  auto c = client::connect("127.0.0.1", srv.port());
  EXPECT_EQ(c.call("try", "").payload_string(), "not kept");
}

// An interceptor that asks another server before the handler runs (an auth lookup): its call is
// a child of the incoming one, so the other server's handler sees the caller's deadline.
struct asking_interceptor : server_interceptor {
  explicit asking_interceptor(std::uint16_t port) : lookup(client::connect("127.0.0.1", port)) {}
  call_verdict before_call(call_context&) override {
    const auto r = lookup.call("remaining", bytes(""));
    if (!r.ok()) return call_verdict::refuse(status::unavailable, "lookup failed: " + r.message);
    const std::string seen(r.payload_string());
    remaining_ns.store(seen == "none" ? -1 : std::stoll(seen));
    return call_verdict::proceed();
  }
  client lookup;
  // Written on the server's handler thread, read by the test after its call returns: the reply
  // travels through a socket, which orders nothing that ThreadSanitizer can see.
  std::atomic<std::int64_t> remaining_ns{0};
};

TEST(server_interceptor_calls, a_call_made_in_before_call_inherits_the_deadline) {
  server_options ob = test::threads(1, 1);
  server lookup_server(ob);
  lookup_server.add_method("remaining", [](call_context& call) {
    call.reply(call.has_deadline() ? std::to_string(call.remaining().count()) : "none");
  });
  lookup_server.start();
  auto asker = std::make_shared<asking_interceptor>(lookup_server.port());
  server_options oa = ob;
  oa.interceptors = {asker};
  server front(oa);
  front.add_method("work", [](call_context& call) { call.reply("done"); });
  front.start();
  auto c = client::connect("127.0.0.1", front.port());
  call_options o;
  o.timeout = 3s;
  ASSERT_TRUE(c.call("work", bytes("x"), o).ok());
  ASSERT_NE(asker->remaining_ns.load(), -1) << "the interceptor's call carried no deadline";
  const auto remaining = std::chrono::nanoseconds(asker->remaining_ns.load());
  EXPECT_GT(remaining, 0ns);
  EXPECT_LE(remaining, 3s) << "the deadline was reset, not inherited";
  // Without a deadline on the incoming call the child has its own: a sync call's default
  // (client_options::sync_call_timeout, 30 s), longer than the 3 s it inherited above.
  ASSERT_TRUE(c.call("work", bytes("x")).ok());
  ASSERT_NE(asker->remaining_ns.load(), -1);
  EXPECT_GT(std::chrono::nanoseconds(asker->remaining_ns.load()), 3s);
}

// --- client side

/// Records before/after; adds a metadata pair; may refuse or throw by method name.
struct recording_client_interceptor : client_interceptor {
  recording_client_interceptor(std::string n, journal& j) : name(std::move(n)), log(j) {}
  call_verdict before_call(client_call& call) override {
    log.add(name + ".before " + std::string(call.method) + (call.one_way ? " one-way" : ""));
    if (call.method == "refuse." + name) return call_verdict::refuse(status::unauthenticated, name + " refuses");
    if (call.method == "throw." + name) throw std::runtime_error(name + " broke");
    call.metadata.push_back({"x-" + name, "1"});
    last_timeout = call.timeout;
    return call_verdict::proceed();
  }
  void after_call(const client_call_summary& done) override {
    log.add(name + ".after " + std::string(done.method) + " " + std::string(to_string(done.outcome.error)) + " " +
            std::to_string(done.attempts));
    if (done.end < done.start) bad_timing = true;
    last_duration = done.duration();
  }
  std::string name;
  journal& log;
  std::chrono::microseconds last_timeout{-1};
  std::chrono::nanoseconds last_duration{-1};
  std::atomic<bool> bad_timing{false};
};

class client_interceptor_test : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = std::make_unique<server>(test::threads(1, 2));
    add_builtin_methods(*srv);
    // Replies with the metadata keys the call carried, in order.
    const auto keys = [](call_context& call) {
      std::string s;
      for (const auto& m : call.metadata()) (s += m.key) += ";";
      call.reply(s);
    };
    srv->add_method("keys", keys);
    srv->add_method("refuse.a", keys);
    srv->add_method("throw.b", keys);
    srv->add_method("oneway", [this](call_context& call) {
      std::string s;
      for (const auto& m : call.metadata()) (s += m.key) += ";";
      std::lock_guard lock(mu);
      one_way_keys = s;
    });
    srv->start();
  }

  journal log;
  std::unique_ptr<server> srv;
  std::mutex mu;
  std::string one_way_keys;
};

TEST_F(client_interceptor_test, chain_order_annotation_and_timing) {
  auto a = std::make_shared<recording_client_interceptor>("a", log);
  auto b = std::make_shared<recording_client_interceptor>("b", log);
  client_options co;
  co.interceptors = {a, b};
  co.default_timeout = 3s;
  auto c = client::connect("127.0.0.1", srv->port(), co);
  const auto r = c.call("keys", "");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "x-a;x-b;");  // both annotations reached the server, in order
  EXPECT_EQ(log.take(), (std::vector<std::string>{"a.before keys", "b.before keys", "b.after keys none 1",
                                                  "a.after keys none 1"}));
  EXPECT_EQ(a->last_timeout, std::chrono::microseconds(3s));
  // sleep 20 ms on the server: the interceptor's timing covers the round trip.
  ASSERT_TRUE(c.call("sleep", "20000").ok());
  EXPECT_GE(a->last_duration, 20ms);
  EXPECT_FALSE(a->bad_timing.load());
}

TEST_F(client_interceptor_test, refusal_and_throw_fail_only_that_call) {
  auto a = std::make_shared<recording_client_interceptor>("a", log);
  auto b = std::make_shared<recording_client_interceptor>("b", log);
  client_options co;
  co.interceptors = {a, b};
  auto c = client::connect("127.0.0.1", srv->port(), co);
  auto r = c.call("refuse.a", "");
  EXPECT_EQ(r.error, call_error::intercepted);
  EXPECT_EQ(r.code, status::unauthenticated);
  EXPECT_EQ(r.message, "a refuses");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"a.before refuse.a", "a.after refuse.a intercepted 0"}));
  r = c.call("throw.b", "");
  EXPECT_EQ(r.error, call_error::intercepted);
  EXPECT_EQ(r.code, status::internal);
  EXPECT_EQ(r.message, "client interceptor threw: b broke");
  log.take();
  // Nothing of either reached the server, and the connection serves on.
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::calls_received], 0u);
  r = c.call("keys", "");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::calls_received], 1u);
}

TEST_F(client_interceptor_test, a_throwing_after_call_fails_the_call) {
  struct bad_after : client_interceptor {
    void after_call(const client_call_summary&) override { throw std::runtime_error("after broke"); }
  };
  client_options co;
  co.interceptors = {std::make_shared<bad_after>()};
  auto c = client::connect("127.0.0.1", srv->port(), co);
  for (int i = 0; i < 2; ++i) {
    const auto r = c.call("echo", "hi");
    EXPECT_EQ(r.error, call_error::intercepted);
    EXPECT_EQ(r.code, status::internal);
    EXPECT_EQ(r.message, "client interceptor threw: after broke");
    EXPECT_TRUE(r.payload.empty());
  }
  EXPECT_TRUE(c.connected());
}

TEST_F(client_interceptor_test, one_way_messages_are_intercepted) {
  auto a = std::make_shared<recording_client_interceptor>("a", log);
  client_options co;
  co.interceptors = {a};
  auto c = client::connect("127.0.0.1", srv->port(), co);
  ASSERT_TRUE(c.send_one_way("oneway", bytes("")));
  EXPECT_FALSE(c.send_one_way("refuse.a", bytes("")));
  const auto until = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (!one_way_keys.empty()) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the one-way message never arrived";
    std::this_thread::sleep_for(2ms);
  }
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(one_way_keys, "x-a;");
  }
  EXPECT_EQ(log.take(), (std::vector<std::string>{"a.before oneway one-way", "a.after oneway none 1",
                                                  "a.before refuse.a one-way",
                                                  "a.after refuse.a intercepted 0"}));
}

TEST_F(client_interceptor_test, channel_interceptors_see_one_logical_call) {
  auto ch_in = std::make_shared<recording_client_interceptor>("ch", log);
  auto member_in = std::make_shared<recording_client_interceptor>("m", log);
  channel_options o;
  o.interceptors = {ch_in};
  o.client.interceptors = {member_in};
  o.health_interval = 60s;  // no health checks through the member interceptor during the test
  auto ch = channel::create("127.0.0.1:" + std::to_string(srv->port()), o);
  ASSERT_TRUE(ch.wait_for_members(1, 5s));
  channel_call_options cc;
  cc.metadata = {{"x-caller", "1"}};
  const auto r = ch.call("keys", bytes(""), cc);
  ASSERT_TRUE(r.ok()) << r.message;
  // The caller's pair, the channel interceptor's and the member client's, in that order.
  EXPECT_EQ(r.payload_string(), "x-caller;x-ch;x-m;");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"ch.before keys", "m.before keys", "m.after keys none 1",
                                                  "ch.after keys none 1"}));
  const auto refused = ch.call("refuse.ch", bytes(""));
  EXPECT_EQ(refused.error, call_error::intercepted);
  EXPECT_EQ(refused.message, "ch refuses");
  EXPECT_EQ(log.take(), (std::vector<std::string>{"ch.before refuse.ch", "ch.after refuse.ch intercepted 0"}));
}

TEST_F(client_interceptor_test, channel_retries_are_one_call_to_channel_interceptors) {
  // A second member whose "keys" always answers SERVER_BUSY: the channel moves such a call to
  // the other member (it did not run), so some calls take two attempts.
  server busy(test::threads(1, 1));
  busy.add_method("keys", [](call_context& call) { call.fail(status::server_busy, "try elsewhere"); });
  busy.start();

  struct counting : client_interceptor {
    std::atomic<int> before{0}, after{0}, max_attempts{0}, failed{0};
    call_verdict before_call(client_call&) override {
      ++before;
      return call_verdict::proceed();
    }
    void after_call(const client_call_summary& done) override {
      ++after;
      if (!done.outcome.ok()) ++failed;
      int seen = max_attempts.load();
      while (static_cast<int>(done.attempts) > seen && !max_attempts.compare_exchange_weak(seen, static_cast<int>(done.attempts))) {
      }
    }
  };
  auto logical = std::make_shared<counting>();
  auto per_attempt = std::make_shared<counting>();
  channel_options o;
  o.interceptors = {logical};
  o.client.interceptors = {per_attempt};
  o.health_interval = 60s;
  auto ch = channel::create("127.0.0.1:" + std::to_string(srv->port()) + ",127.0.0.1:" + std::to_string(busy.port()), o);
  ASSERT_TRUE(ch.wait_for_members(2, 5s));
  constexpr int calls = 6;
  for (int i = 0; i < calls; ++i) {
    channel_call_options cc;
    cc.idempotent = true;  // retried after it was sent: the channel keeps its payload
    const auto r = ch.call("keys", bytes(""), cc);
    ASSERT_TRUE(r.ok()) << r.message;
  }
  EXPECT_EQ(logical->before.load(), calls);
  EXPECT_EQ(logical->after.load(), calls);
  EXPECT_EQ(logical->failed.load(), 0);
  EXPECT_EQ(logical->max_attempts.load(), 2);  // round robin sent some to the busy member first
  // The member clients' interceptors saw every attempt, the refused ones included.
  const auto retries = static_cast<int>(ch.stats().retries);
  EXPECT_GT(retries, 0);
  EXPECT_EQ(per_attempt->before.load(), calls + retries);
  EXPECT_EQ(per_attempt->after.load(), calls + retries);
  EXPECT_EQ(per_attempt->failed.load(), retries);
}

}  // namespace
}  // namespace ringrpc::test

// The execution model over loopback: endpoints and their inbox guarantees, dispatch policies,
// pools, overload answers, deadlines, cancellation, deferred replies and the phased stop.

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::gate;
using test::within;

std::string thread_name() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

/// Records what the endpoint saw and checks Spark's lifecycle rules as it goes.
class recording_endpoint : public endpoint {
 public:
  std::atomic<bool> started{false}, stopped{false};
  std::atomic<int> active{0}, max_active{0}, handled{0}, errors{0}, after_stop{0};
  std::atomic<int> stop_saw_active{-1};
  std::mutex mu;
  std::vector<std::string> seen;  // payloads in handling order
  std::function<void(call_context&)> body;

  void on_start() override {
    EXPECT_EQ(handled.load(), 0);
    started = true;
  }
  void on_stop() override {
    stop_saw_active = active.load();
    stopped = true;
  }
  void receive_and_reply(call_context& call) override {
    if (!started || stopped) after_stop++;
    const int now = ++active;
    for (int m = max_active.load(); now > m && !max_active.compare_exchange_weak(m, now);) {
    }
    {
      std::lock_guard lock(mu);
      seen.emplace_back(reinterpret_cast<const char*>(call.payload().data()), call.payload().size());
    }
    struct leave {
      recording_endpoint* self;
      ~leave() {
        self->active--;
        self->handled++;
      }
    } guard{this};
    if (body) body(call);
    else call.reply(call.payload());
  }
  void on_error(std::string_view) override { errors++; }
  bool hears_connection_events() const override { return hears_events; }
  bool hears_events = true;
};

struct running_server {
  explicit running_server(server_options o = make_options()) : s(o) {}
  static server_options make_options() {
    server_options o = test::threads(1, 2);
    o.drain_timeout = 3s;
    return o;
  }
  server s;
};

// --- endpoints and inboxes

// stop() asks "is this thread on one of my pools?" without taking the dispatcher's lock:
// on_start runs under that lock, here on a worker of another server's pool (a handler of the
// first server starts the second). Before, the lookup took the lock again and start() never
// returned (the suite's timeout is the bound).
struct stops_at_start final : endpoint {
  server* self = nullptr;
  std::atomic<bool> stop_returned{false};
  void on_start() override {
    self->stop();
    stop_returned = true;
  }
  void receive_and_reply(call_context& c) override { c.reply(c.payload()); }
};

TEST(endpoints, on_start_may_call_stop_on_a_pool_worker) {
  server second(test::threads(1, 1));
  auto ep = std::make_shared<stops_at_start>();
  ep->self = &second;
  second.register_endpoint("early", ep);
  server first(test::threads(1, 1));
  first.add_method("start_second", [&](call_context& c) {
    second.start();
    c.reply(c.payload());
  });
  first.start();
  auto c = client::connect("127.0.0.1", first.port());
  const call_result r = c.call("start_second", "x");
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(ep->stop_returned.load());
  second.stop();
  first.stop();
}

TEST(endpoints, on_start_first_on_stop_last_and_alone) {
  running_server rs;
  auto ep = std::make_shared<recording_endpoint>();
  ep->body = [](call_context& c) {
    std::this_thread::sleep_for(200us);
    c.reply(c.payload());
  };
  rs.s.register_endpoint("rec", ep);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::atomic<int> answered{0}, ok{0}, shutting{0};
  for (int i = 0; i < 200; ++i) {
    c.call_async("rec.x", bytes_of("p"), [&](const call_outcome& o) {
      if (o.ok()) ok++;
      else if (o.code == status::shutting_down) shutting++;
      answered++;
      answered.notify_one();
    }, within(10s));
    if (i == 100) {
      EXPECT_TRUE(rs.s.unregister_endpoint("rec"));
    }
  }
  for (int v = answered.load(); v != 200; v = answered.load()) answered.wait(v);
  // Every call got exactly one answer: run, or refused because the endpoint was stopping.
  EXPECT_EQ(ok + shutting, 200);
  EXPECT_EQ(ok.load(), ep->handled.load());
  for (int i = 0; i < 2000 && !ep->stopped; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(ep->stopped);
  EXPECT_EQ(ep->stop_saw_active.load(), 0);
  EXPECT_EQ(ep->after_stop.load(), 0);
  const auto r = c.call("rec.x", "late", within(5s));
  EXPECT_EQ(r.code, status::shutting_down) << r.message;
  EXPECT_FALSE(rs.s.unregister_endpoint("rec"));
}

TEST(endpoints, serial_endpoint_runs_one_at_a_time_in_arrival_order) {
  running_server rs;
  pool_options p;
  p.threads = 4;
  rs.s.add_pool("wide", p);
  auto ep = std::make_shared<recording_endpoint>();
  ep->body = [](call_context& c) {
    std::this_thread::sleep_for(20us);
    c.reply(c.payload());
  };
  endpoint_options eo;
  eo.concurrency = endpoint_concurrency::serial;
  eo.pool = "wide";
  rs.s.register_endpoint("serial", ep, eo);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::vector<std::future<call_result>> fs;
  for (int i = 0; i < 500; ++i) fs.push_back(c.call_future("serial", bytes_of(std::to_string(i)), within(10s)));
  for (auto& f : fs) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(ep->max_active.load(), 1);
  std::lock_guard lock(ep->mu);
  ASSERT_EQ(ep->seen.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(ep->seen[i], std::to_string(i));
}

TEST(endpoints, concurrent_endpoint_runs_on_several_threads_at_once) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  running_server rs;
  pool_options p;
  p.threads = 3;
  rs.s.add_pool("three", p);
  auto ep = std::make_shared<recording_endpoint>();
  ep->body = [&](call_context& c) {
    g.wait();
    c.reply(c.payload());
  };
  endpoint_options eo;
  eo.pool = "three";
  rs.s.register_endpoint("conc", ep, eo);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::vector<std::future<call_result>> fs;
  for (int i = 0; i < 3; ++i) fs.push_back(c.call_future("conc", bytes_of("x"), within(10s)));
  g.wait_for_waiters(3);  // three handlers are inside at the same time
  g.open();
  for (auto& f : fs) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(ep->max_active.load(), 3);
}

// SPARK-32738: an error in a serial endpoint's handler once left its inbox marked busy, and the
// endpoint never ran again. Here every message after a throwing one still runs.
TEST(endpoints, handler_errors_go_to_on_error_and_never_wedge_the_inbox) {
  running_server rs;
  auto ep = std::make_shared<recording_endpoint>();
  ep->body = [](call_context& c) {
    const auto n = std::stoi(std::string(reinterpret_cast<const char*>(c.payload().data()), c.payload().size()));
    if (n % 3 == 0) throw std::runtime_error("boom " + std::to_string(n));
    if (n % 3 == 1) throw 42;  // not a std::exception
    c.reply(c.payload());
  };
  endpoint_options eo;
  eo.concurrency = endpoint_concurrency::serial;
  rs.s.register_endpoint("fragile", ep, eo);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::vector<std::future<call_result>> fs;
  for (int i = 0; i < 90; ++i) fs.push_back(c.call_future("fragile", bytes_of(std::to_string(i)), within(10s)));
  for (int i = 0; i < 90; ++i) {
    const auto r = fs[i].get();
    if (i % 3 == 2) {
      EXPECT_TRUE(r.ok()) << i;
    } else {
      EXPECT_EQ(r.code, status::internal) << i;
      if (i % 3 == 0) {
        EXPECT_EQ(r.message, "boom " + std::to_string(i));
      }
    }
  }
  EXPECT_EQ(ep->errors.load(), 60);
  EXPECT_TRUE(c.call("fragile", "2", within(5s)).ok());
}

TEST(endpoints, unknown_and_stopped_endpoints_get_an_error_and_are_counted) {
  running_server rs;
  rs.s.register_endpoint("gone", std::make_shared<recording_endpoint>());
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  auto r = c.call("nobody.here", "x", within(5s));
  EXPECT_EQ(r.code, status::unknown_method);
  EXPECT_NE(r.message.find("nobody.here"), std::string::npos);
  EXPECT_TRUE(c.call("gone.x", "x", within(5s)).ok());
  EXPECT_TRUE(rs.s.unregister_endpoint("gone"));
  r = c.call("gone.x", "x", within(5s));
  EXPECT_EQ(r.code, status::shutting_down);
  EXPECT_NE(r.message.find("'gone' is stopped"), std::string::npos) << r.message;
  const auto st = rs.s.stats();
  EXPECT_EQ(st[ringrpc::server_counter::calls_unknown], 1u);
  EXPECT_EQ(st[ringrpc::server_counter::calls_rejected_stopping], 1u);
  EXPECT_FALSE(rs.s.post("gone", bytes_of("x")));
}

TEST(endpoints, register_at_runtime_and_validation) {
  running_server rs;
  rs.s.start();
  EXPECT_THROW(rs.s.register_endpoint("a.b", std::make_shared<recording_endpoint>()), std::invalid_argument);
  EXPECT_THROW(rs.s.register_endpoint("", std::make_shared<recording_endpoint>()), std::invalid_argument);
  endpoint_options eo;
  eo.pool = "missing";
  EXPECT_THROW(rs.s.register_endpoint("x", std::make_shared<recording_endpoint>(), eo), std::invalid_argument);
  EXPECT_THROW(rs.s.add_pool("late", {}), std::logic_error);
  auto ep = std::make_shared<recording_endpoint>();
  rs.s.register_endpoint("late", ep);
  EXPECT_TRUE(ep->started);
  EXPECT_THROW(rs.s.register_endpoint("late", std::make_shared<recording_endpoint>()), std::invalid_argument);
  auto c = client::connect("127.0.0.1", rs.s.port());
  EXPECT_EQ(c.call("late.hello", "hi", within(5s)).payload_string(), "hi");
}

class message_endpoint : public endpoint {
 public:
  std::atomic<int> messages{0};
  std::promise<std::string> first;
  void receive(call_context& m) override {
    if (messages++ == 0) {
      first.set_value(std::string(reinterpret_cast<const char*>(m.payload().data()), m.payload().size()));
    }
  }
};

TEST(endpoints, post_and_post_to_all_reach_receive) {
  running_server rs;
  auto a = std::make_shared<message_endpoint>();
  auto b = std::make_shared<message_endpoint>();
  rs.s.register_endpoint("a", a);
  rs.s.register_endpoint("b", b);
  EXPECT_FALSE(rs.s.post("a", bytes_of("before start")));
  rs.s.start();
  auto fa = a->first.get_future();
  EXPECT_TRUE(rs.s.post("a", bytes_of("hello a")));
  EXPECT_EQ(fa.get(), "hello a");
  EXPECT_EQ(rs.s.post_to_all(bytes_of("all")), 2u);
  auto fb = b->first.get_future();
  EXPECT_EQ(fb.get(), "all");
  EXPECT_FALSE(rs.s.post("nobody", bytes_of("x")));
  // One-way messages from a client land in receive() too.
  auto c = client::connect("127.0.0.1", rs.s.port());
  c.send_one_way("a.note", bytes_of("one way"));
  for (int i = 0; i < 5000 && a->messages < 3; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(a->messages.load(), 3);
}

// --- deferred replies

TEST(deferred, answered_later_from_another_thread_and_dropped_handles_fail) {
  running_server rs;
  std::mutex mu;
  std::vector<deferred_reply> parked;
  rs.s.add_method("later", [&](call_context& c) {
    auto d = c.defer();
    if (c.payload().size() == 4) return;  // "drop": the handle dies here unanswered
    std::lock_guard lock(mu);
    parked.push_back(std::move(d));
  });
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  auto f1 = c.call_future("later", bytes_of("parked"), within(10s));
  auto f2 = c.call_future("later", bytes_of("drop"), within(10s));
  EXPECT_EQ(f2.get().code, status::internal);
  for (;;) {
    std::lock_guard lock(mu);
    if (!parked.empty()) break;
  }
  std::thread answerer([&] {
    std::lock_guard lock(mu);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(parked[0].payload().data()), 6), "parked");
    EXPECT_TRUE(parked[0].reply(bytes_of("done later")));
    EXPECT_FALSE(parked[0].reply(bytes_of("twice")));
  });
  answerer.join();
  EXPECT_EQ(f1.get().payload_string(), "done later");
}

TEST(deferred, stop_answers_unanswered_deferred_replies_shutting_down) {
  server_options o = running_server::make_options();
  o.drain_timeout = 200ms;
  server s(o);
  std::vector<deferred_reply> parked;
  std::mutex mu;
  s.add_method("never", [&](call_context& c) {
    std::lock_guard lock(mu);
    parked.push_back(c.defer());
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto f = c.call_future("never", bytes_of("x"), within(10s));
  for (;;) {
    std::lock_guard lock(mu);
    if (!parked.empty()) break;
  }
  s.stop();
  const auto r = f.get();
  EXPECT_EQ(r.code, status::shutting_down) << to_string(r.error) << " " << r.message;
  std::lock_guard lock(mu);
  EXPECT_FALSE(parked[0].reply(bytes_of("too late")));  // safe after stop
}

// --- dispatch policies

class where_endpoint : public endpoint {
 public:
  std::mutex mu;
  std::string call_thread, connected_thread;
  std::promise<void> disconnected;
  bool disconnected_set = false;
  std::vector<std::string> events;
  void receive_and_reply(call_context& c) override {
    std::lock_guard lock(mu);
    call_thread = thread_name();
    c.reply("ok");
  }
  void on_connected(const peer_info& p) override {
    std::lock_guard lock(mu);
    connected_thread = thread_name();
    events.push_back("connected " + p.address);
  }
  void on_disconnected(const peer_info& p) override {
    std::lock_guard lock(mu);
    events.push_back("disconnected " + p.address);
    if (!disconnected_set) {
      disconnected_set = true;
      disconnected.set_value();
    }
  }
};

struct placement {
  dispatch_policy policy;
  const char* call_on;       // thread name prefix expected for calls
  const char* connected_on;  // and for connection events
};

TEST(policies, each_policy_runs_events_where_the_table_says) {
  // Pool workers are named "rr-POOL/N" ("rr-POOL" for a pool of one thread; the pool name is
  // cut to fit 15 bytes), readers "rr-read/N".
  const placement table[] = {
      {dispatch_policy::all, "rr-default/", "rr-default/"},
      {dispatch_policy::direct, "rr-read/", "rr-read/"},
      {dispatch_policy::message, "rr-default/", "rr-read/"},
      {dispatch_policy::execution, "rr-default/", "rr-read/"},
      {dispatch_policy::connection, "rr-default/", "rr-conn-events"},
  };
  for (const auto& row : table) {
    SCOPED_TRACE(std::string(to_string(row.policy)));
    running_server rs;
    auto ep = std::make_shared<where_endpoint>();
    endpoint_options eo;
    eo.policy = row.policy;
    rs.s.register_endpoint("where", ep, eo);
    rs.s.start();
    auto done = ep->disconnected.get_future();
    {
      auto c = client::connect("127.0.0.1", rs.s.port());
      ASSERT_TRUE(c.call("where", "x", within(5s)).ok());
    }
    ASSERT_EQ(done.wait_for(5s), std::future_status::ready);
    std::lock_guard lock(ep->mu);
    EXPECT_EQ(ep->call_thread.rfind(row.call_on, 0), 0u) << ep->call_thread;
    EXPECT_EQ(ep->connected_thread.rfind(row.connected_on, 0), 0u) << ep->connected_thread;
    ASSERT_EQ(ep->events.size(), 2u);
    EXPECT_EQ(ep->events[0].rfind("connected 127.0.0.1:", 0), 0u);
    EXPECT_EQ(ep->events[1], "dis" + ep->events[0]);
  }
}

TEST(policies, slow_endpoint_with_its_own_pool_cannot_starve_another) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  running_server rs;
  std::atomic<int> slow_running{0};
  auto slow = std::make_shared<recording_endpoint>();
  slow->body = [&](call_context& c) {
    slow_running++;
    g.wait();
    c.reply("slow");
  };
  endpoint_options eo;
  pool_options own;
  own.threads = 1;
  own.queue = 100;
  eo.own_pool = own;
  rs.s.register_endpoint("slow", slow, eo);
  rs.s.register_endpoint("fast", std::make_shared<recording_endpoint>());
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::vector<std::future<call_result>> slow_calls;
  for (int i = 0; i < 20; ++i) slow_calls.push_back(c.call_future("slow", bytes_of("s"), within(20s)));
  g.wait_for_waiters(1);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(c.call("fast", "f", within(5s)).ok()) << i;
  EXPECT_EQ(slow_running.load(), 1);  // still stuck on its own single thread
  g.open();
  for (auto& f : slow_calls) EXPECT_TRUE(f.get().ok());
}

// --- overload: every refusal path answers at once

void expect_busy(const call_result& r) {
  EXPECT_EQ(r.error, call_error::server_status) << to_string(r.error);
  EXPECT_EQ(r.code, status::server_busy) << r.message;
  EXPECT_GT(r.retry_after_ms, 0u);
}

TEST(overload, full_default_pool_queue_answers_busy) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  server_options o = running_server::make_options();
  o.handlers = 1;
  o.handler_queue_size = 2;
  o.max_inflight_per_connection = 64;  // one connection fills the pool here, on purpose
  o.fair_share_calls = 1000;           // so its backlog shares the one queue (no fair share)
  server s(o);
  s.add_method("block", [&](call_context& c) {
    g.wait();
    c.reply("done");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  std::vector<std::future<call_result>> held;
  held.push_back(c.call_future("block", bytes_of("x"), within(20s)));
  g.wait_for_waiters(1);
  for (int i = 0; i < 2; ++i) held.push_back(c.call_future("block", bytes_of("x"), within(20s)));
  for (int i = 0; i < 5; ++i) {
    const auto r = c.call("block", "x", within(20s));
    expect_busy(r);
    EXPECT_NE(r.message.find("pool 'default'"), std::string::npos) << r.message;
  }
  g.open();
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
  const auto pools = s.pool_stats_all();
  bool found = false;
  for (const auto& p : pools) {
    if (p.name == "default") {
      found = true;
      EXPECT_EQ(p.rejected, 5u);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(s.stats()[ringrpc::server_counter::calls_rejected_busy], 5u);
}

TEST(overload, hand_off_pool_without_idle_thread_answers_busy) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  running_server rs;
  pool_options p;
  p.kind = pool_kind::cached;
  p.threads = 2;
  p.core_threads = 1;
  p.queue = 0;
  rs.s.add_pool("handoff", p);
  auto ep = std::make_shared<recording_endpoint>();
  ep->hears_events = false;  // an event on a pool thread would race the two calls for it
  ep->body = [&](call_context& c) {
    g.wait();
    c.reply("x");
  };
  endpoint_options eo;
  eo.pool = "handoff";
  rs.s.register_endpoint("h", ep, eo);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  auto f1 = c.call_future("h", bytes_of("1"), within(20s));
  auto f2 = c.call_future("h", bytes_of("2"), within(20s));
  g.wait_for_waiters(2);  // grew to its maximum of two
  expect_busy(c.call("h", "3", within(20s)));
  g.open();
  EXPECT_TRUE(f1.get().ok());
  EXPECT_TRUE(f2.get().ok());
}

TEST(overload, full_serial_inbox_answers_busy) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  running_server rs;
  auto ep = std::make_shared<recording_endpoint>();
  ep->body = [&](call_context& c) {
    g.wait();
    c.reply("x");
  };
  endpoint_options eo;
  eo.concurrency = endpoint_concurrency::serial;
  eo.inbox_capacity = 3;
  rs.s.register_endpoint("inbox", ep, eo);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  std::vector<std::future<call_result>> held;
  held.push_back(c.call_future("inbox", bytes_of("running"), within(20s)));
  g.wait_for_waiters(1);
  for (int i = 0; i < 3; ++i) held.push_back(c.call_future("inbox", bytes_of("queued"), within(20s)));
  // The running one left the inbox; three wait in it; the next is refused.
  for (;;) {
    const auto r = c.call("inbox", "over", within(20s));
    if (!r.ok()) {
      expect_busy(r);
      EXPECT_NE(r.message.find("inbox_capacity"), std::string::npos) << r.message;
      break;
    }
  }
  g.open();
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
}

// Dubbo's batch-loop flaw: when the pool refused the work that would drain a queue, only the
// triggering message got an error and the rest waited for their timeouts.
TEST(overload, serial_inbox_refused_by_its_pool_answers_every_queued_call) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  running_server rs;
  pool_options tiny;
  tiny.threads = 1;
  tiny.queue = 1;
  rs.s.add_pool("tiny", tiny);
  // Connection events would take the tiny pool's one queue slot (a real refusal, but a race
  // with the test's first call): these endpoints do not listen to them.
  auto blocker = std::make_shared<recording_endpoint>();
  blocker->hears_events = false;
  blocker->body = [&](call_context& c) {
    g.wait();
    c.reply("x");
  };
  endpoint_options bo;
  bo.pool = "tiny";
  rs.s.register_endpoint("blocker", blocker, bo);
  auto serial = std::make_shared<recording_endpoint>();
  serial->hears_events = false;
  endpoint_options so;
  so.pool = "tiny";
  so.concurrency = endpoint_concurrency::serial;
  rs.s.register_endpoint("serial", serial, so);
  rs.s.start();
  auto c = client::connect("127.0.0.1", rs.s.port());
  auto b1 = c.call_future("blocker", bytes_of("1"), within(20s));
  g.wait_for_waiters(1);
  auto b2 = c.call_future("blocker", bytes_of("2"), within(20s));  // fills the queue
  std::vector<std::future<call_result>> fs;
  for (int i = 0; i < 20; ++i) fs.push_back(c.call_future("serial", bytes_of("s"), within(20s)));
  int busy = 0;
  for (auto& f : fs) {
    const auto r = f.get();  // every one answered now, none waits for its timeout
    ASSERT_EQ(r.error, call_error::server_status) << to_string(r.error);
    EXPECT_EQ(r.code, status::server_busy);
    ++busy;
  }
  EXPECT_EQ(busy, 20);
  EXPECT_EQ(serial->handled.load(), 0);
  g.open();
  EXPECT_TRUE(b1.get().ok());
  EXPECT_TRUE(b2.get().ok());
  EXPECT_TRUE(c.call("serial", "after", within(5s)).ok());  // and the inbox still works
}

TEST(overload, shutdown_answers_shutting_down) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  server_options o = running_server::make_options();
  o.drain_timeout = 2s;
  server s(o);
  s.add_method("block", [&](call_context& c) {
    g.wait();
    c.reply("done");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto held = c.call_future("block", bytes_of("x"), within(20s));
  g.wait_for_waiters(1);
  const auto port = s.port();
  std::thread stopper([&] { s.stop(); });
  // The listener closes once stop() has begun draining; from then on a new call on an open
  // connection is refused at once.
  // Probed with plain sockets: a client runtime per probe would map and unmap a ring each time.
  for (int i = 0; i < 5000; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool refused = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0;
    ::close(fd);
    if (refused) break;
    std::this_thread::sleep_for(1ms);
  }
  const call_result r = c.call("block", "late", within(20s));
  EXPECT_EQ(r.code, status::shutting_down) << to_string(r.error) << " " << r.message;
  g.open();
  EXPECT_TRUE(held.get().ok());
  stopper.join();
}

// --- deadlines and cancellation

TEST(deadlines, expired_in_queue_is_not_run_and_remaining_is_visible) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  server_options o = running_server::make_options();
  o.handlers = 1;
  server s(o);
  std::atomic<int> ran{0};
  std::atomic<long long> remaining_us{0};
  s.add_method("block", [&](call_context& c) {
    g.wait();
    c.reply("x");
  });
  s.add_method("count", [&](call_context& c) {
    ran++;
    remaining_us = std::chrono::duration_cast<std::chrono::microseconds>(c.remaining()).count();
    c.reply("x");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto held = c.call_future("block", bytes_of("x"), within(20s));
  g.wait_for_waiters(1);
  // Sent with a 30 ms budget on a raw socket, so the client does not give up first.
  test::raw_socket raw(s.port());
  ASSERT_TRUE(raw.send_frame(test::request(7, "count", "x", 30'000)));
  std::this_thread::sleep_for(100ms);
  g.open();
  detail::frame_view f;
  std::vector<std::byte> storage;
  ASSERT_TRUE(raw.read_frame(f, storage));
  EXPECT_EQ(f.code, status::deadline_exceeded);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_TRUE(held.get().ok());
  ASSERT_TRUE(c.call("count", "x", within(5s)).ok());
  EXPECT_GT(remaining_us.load(), 0);
  EXPECT_LE(remaining_us.load(), 5'000'000);
}

TEST(cancellation, cancel_frame_and_vanished_client_set_the_flag) {
  running_server rs;
  std::atomic<int> saw_cancel{0};
  std::atomic<int> entered{0};
  rs.s.add_method("spin", [&](call_context& c) {
    entered++;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      if (c.cancelled()) {
        saw_cancel++;
        c.fail(status::cancelled, "gave up");
        return;
      }
      std::this_thread::sleep_for(100us);
    }
    c.reply("finished");
  });
  rs.s.start();
  {  // a cancel frame
    test::raw_socket raw(rs.s.port());
    ASSERT_TRUE(raw.send_frame(test::request(1, "spin", "x")));
    while (entered < 1) std::this_thread::sleep_for(1ms);
    detail::frame_view cancel;
    cancel.call_id = 1;
    cancel.kind = wire::Kind::Cancel;
    ASSERT_TRUE(raw.send_frame(cancel));
    detail::frame_view f;
    std::vector<std::byte> storage;
    ASSERT_TRUE(raw.read_frame(f, storage));
    EXPECT_EQ(f.call_id, 1u);
    EXPECT_EQ(f.code, status::cancelled);
  }
  EXPECT_EQ(saw_cancel.load(), 1);
  {  // a client that vanishes: its connection is reset (a plain FIN is a half-close, after
     // which calls in flight are still answered; see edges_test)
    test::raw_socket raw(rs.s.port());
    ASSERT_TRUE(raw.send_frame(test::request(2, "spin", "x")));
    while (entered < 2) std::this_thread::sleep_for(1ms);
    const linger reset{1, 0};
    ::setsockopt(raw.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  }
  for (int i = 0; i < 5000 && saw_cancel < 2; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(saw_cancel.load(), 2);
  EXPECT_EQ(rs.s.stats()[ringrpc::server_counter::cancel_requests], 1u);
}

// --- graceful stop under load

TEST(graceful_stop, every_call_gets_exactly_one_answer_under_load) {
  server_options o = running_server::make_options();
  o.handlers = 3;
  o.drain_timeout = 5s;
  server s(o);
  add_builtin_methods(s);
  auto rec = std::make_shared<recording_endpoint>();
  endpoint_options eo;
  eo.concurrency = endpoint_concurrency::serial;
  s.register_endpoint("rec", rec, eo);
  s.start();
  constexpr int clients = 4;
  std::atomic<bool> stop_sending{false};
  std::atomic<long> sent{0}, answered{0}, duplicates{0};
  std::vector<std::thread> threads;
  auto rt = client_runtime::create();
  std::vector<client> conns;
  for (int i = 0; i < clients; ++i) conns.push_back(client::connect("127.0.0.1", s.port(), {}, rt));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      int n = 0;
      while (!stop_sending) {
        auto seen = std::make_shared<std::atomic<int>>(0);
        const char* method = (n % 3 == 0) ? "rec" : (n % 3 == 1 ? "echo" : "sleep");
        sent++;
        conns[i].call_async(method, bytes_of(n % 3 == 2 ? "200" : "x"), [&, seen](const call_outcome&) {
          if ((*seen)++ != 0) duplicates++;
          answered++;
        }, within(30s));
        if (++n % 64 == 0) std::this_thread::sleep_for(200us);
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  s.stop();  // mid-way: clients are still sending
  stop_sending = true;
  for (auto& t : threads) t.join();
  // Everything sent before or during stop is answered (ok, SHUTTING_DOWN or connection closed
  // for what was still in the socket when it closed); nothing hangs.
  for (int i = 0; i < 10000 && answered.load() != sent.load(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(answered.load(), sent.load());
  EXPECT_EQ(duplicates.load(), 0);
  EXPECT_TRUE(rec->stopped);
  EXPECT_EQ(rec->stop_saw_active.load(), 0);
  EXPECT_EQ(rec->after_stop.load(), 0);
  for (auto& cn : conns) cn.close();
}

// --- connection events (issue 11: one caller cannot hurt the others)

/// Records every connection event with the thread it ran on. on_connected takes `connected_for`
/// (to give a later event of the same connection the chance to overtake it).
class event_log_endpoint : public endpoint {
 public:
  struct entry {
    std::uint64_t conn;
    std::string what;
    std::string thread;
  };
  std::chrono::microseconds connected_for{0};
  std::mutex mu;
  std::vector<entry> log;

  void receive_and_reply(call_context& c) override { c.reply("ok"); }
  void on_connected(const peer_info& p) override {
    std::this_thread::sleep_for(connected_for);
    add(p, "connected");
  }
  void on_disconnected(const peer_info& p) override { add(p, "disconnected"); }
  void on_network_error(const peer_info& p, std::string_view) override { add(p, "network_error"); }
  std::size_t size() {
    std::lock_guard lock(mu);
    return log.size();
  }

 private:
  void add(const peer_info& p, const char* what) {
    std::lock_guard lock(mu);
    log.push_back({p.connection_id, what, thread_name()});
  }
};

using test::eventually;

/// Every connection in `log` has exactly one connected, first, and exactly one disconnected,
/// last (network errors between); every event ran on a thread named `thread_prefix`.
void expect_ordered_events(event_log_endpoint& ep, std::size_t connections, const std::string& thread_prefix) {
  std::lock_guard lock(ep.mu);
  std::map<std::uint64_t, std::vector<std::string>> by_conn;
  for (const auto& e : ep.log) {
    by_conn[e.conn].push_back(e.what);
    EXPECT_EQ(e.thread.rfind("rr-read/", 0), std::string::npos)
        << e.what << " of connection " << e.conn << " ran on the reader " << e.thread;
    EXPECT_EQ(e.thread.rfind(thread_prefix, 0), 0u) << e.what << " ran on " << e.thread;
  }
  EXPECT_EQ(by_conn.size(), connections);
  for (const auto& [conn, seq] : by_conn) {
    ASSERT_GE(seq.size(), 2u) << "connection " << conn;
    EXPECT_EQ(seq.front(), "connected") << "connection " << conn << ": " << seq.front() << " came first";
    EXPECT_EQ(seq.back(), "disconnected") << "connection " << conn;
    EXPECT_EQ(std::count(seq.begin(), seq.end(), "connected"), 1) << "connection " << conn;
    EXPECT_EQ(std::count(seq.begin(), seq.end(), "disconnected"), 1) << "connection " << conn;
  }
}

TEST(connection_events, full_pool_runs_them_later_on_the_pool_in_order_never_on_the_reader) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  server_options o = running_server::make_options();
  o.max_inflight_per_connection = 64;
  o.fair_share_calls = 1000;  // the filler's backlog shares the one queue
  running_server rs(o);
  pool_options one;
  one.threads = 1;
  one.queue = 4;
  rs.s.add_pool("one", one);
  auto blocker = std::make_shared<recording_endpoint>();
  blocker->hears_events = false;
  blocker->body = [&](call_context& c) {
    g.wait();
    c.reply("x");
  };
  endpoint_options bo;
  bo.pool = "one";
  rs.s.register_endpoint("blocker", blocker, bo);
  auto events = std::make_shared<event_log_endpoint>();
  endpoint_options eo;
  eo.pool = "one";  // policy `all`: events run on the pool
  rs.s.register_endpoint("events", events, eo);
  rs.s.start();

  // The pool's one thread is held and its queue is full: a further call is refused.
  auto filler = client::connect("127.0.0.1", rs.s.port());
  ASSERT_TRUE(eventually([&] { return events->size() == 1; }));  // the filler's on_connected
  std::vector<std::future<call_result>> held;
  held.push_back(filler.call_future("blocker", bytes_of("x"), within(30s)));
  g.wait_for_waiters(1);
  for (int i = 0; i < 4; ++i) held.push_back(filler.call_future("blocker", bytes_of("x"), within(30s)));
  expect_busy(filler.call("blocker", "x", within(30s)));

  // Connections open and close while it stays full: their events wait for the pool.
  constexpr int connections = 20;
  for (int i = 0; i < connections; ++i) {
    auto c = client::connect("127.0.0.1", rs.s.port());
    expect_busy(c.call("blocker", "x", within(30s)));  // the connection is up on the server
  }
  ASSERT_TRUE(eventually([&] { return rs.s.stats()[ringrpc::server_counter::connections_open] == 1; }));
  EXPECT_EQ(events->size(), 1u) << "events ran although the pool's only thread is held";
  g.open();
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
  ASSERT_TRUE(eventually([&] { return events->size() == 1 + 2 * connections; })) << events->size();
  filler.close();
  ASSERT_TRUE(eventually([&] { return events->size() == 2 + 2 * connections; })) << events->size();
  expect_ordered_events(*events, connections + 1, "rr-one");
}

TEST(connection_events, one_connections_events_keep_their_order_on_a_multi_thread_pool) {
  server_options o = running_server::make_options();
  o.handlers = 4;
  running_server rs(o);
  auto events = std::make_shared<event_log_endpoint>();
  events->connected_for = 20ms;  // time for on_disconnected to overtake it on another thread
  rs.s.register_endpoint("events", events);
  rs.s.start();
  constexpr int connections = 8;
  for (int i = 0; i < connections; ++i) {
    auto c = client::connect("127.0.0.1", rs.s.port());
    ASSERT_TRUE(c.call("events", "x", within(5s)).ok());
  }
  ASSERT_TRUE(eventually([&] { return events->size() == 2 * connections; })) << events->size();
  expect_ordered_events(*events, connections, "rr-default/");
}

TEST(connection_events, connection_policy_and_serial_endpoints_deliver_them_in_order_off_the_reader) {
  gate g;  // declared first: it must outlive the server whose handlers wait at it
  server_options o = running_server::make_options();
  o.handlers = 1;
  o.handler_queue_size = 2;
  o.max_inflight_per_connection = 64;
  o.fair_share_calls = 1000;
  running_server rs(o);
  rs.s.add_method("block", [&](call_context& c) {
    g.wait();
    c.reply("x");
  });
  auto ordered = std::make_shared<event_log_endpoint>();
  endpoint_options po;
  po.policy = dispatch_policy::connection;
  rs.s.register_endpoint("ordered", ordered, po);
  auto serial = std::make_shared<event_log_endpoint>();
  endpoint_options so;
  so.concurrency = endpoint_concurrency::serial;
  rs.s.register_endpoint("serial", serial, so);
  rs.s.start();

  auto filler = client::connect("127.0.0.1", rs.s.port());
  ASSERT_TRUE(eventually([&] { return ordered->size() == 1 && serial->size() == 1; }));
  std::vector<std::future<call_result>> held;
  held.push_back(filler.call_future("block", bytes_of("x"), within(30s)));
  g.wait_for_waiters(1);
  for (int i = 0; i < 2; ++i) held.push_back(filler.call_future("block", bytes_of("x"), within(30s)));
  expect_busy(filler.call("block", "x", within(30s)));
  constexpr int connections = 10;
  for (int i = 0; i < connections; ++i) {
    auto c = client::connect("127.0.0.1", rs.s.port());
    expect_busy(c.call("block", "x", within(30s)));
  }
  ASSERT_TRUE(eventually([&] { return rs.s.stats()[ringrpc::server_counter::connections_open] == 1; }));
  // The ordered thread is free: its events ran already. The serial endpoint's wait for the pool.
  ASSERT_TRUE(eventually([&] { return ordered->size() == 1 + 2 * connections; })) << ordered->size();
  EXPECT_EQ(serial->size(), 1u);
  g.open();
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
  filler.close();
  ASSERT_TRUE(eventually([&] { return serial->size() == 2 + 2 * connections; })) << serial->size();
  ASSERT_TRUE(eventually([&] { return ordered->size() == 2 + 2 * connections; })) << ordered->size();
  expect_ordered_events(*ordered, connections + 1, "rr-conn-events");
  expect_ordered_events(*serial, connections + 1, "rr-default");  // one thread: no "/0"
}

}  // namespace
}  // namespace ringrpc

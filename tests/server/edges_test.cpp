// Every edge behaves as docs/protocol.md says: half-close, stale cancels, the reserved call id 0,
// huge timeouts, unknown kinds. A loopback server and raw sockets that send exact bytes.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include <atomic>
#include <system_error>
#include <thread>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "server/stop_clock.hpp"
#include "test_support.hpp"
#include "server/caller_shares.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::raw_socket;

class edges : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = test::builtin_server(test::threads(1, 2));
  }

  detail::frame_view read(raw_socket& s) {
    detail::frame_view v;
    storage.emplace_back();
    EXPECT_TRUE(s.read_frame(v, storage.back()));
    return v;
  }

  std::unique_ptr<server> srv;
  std::vector<std::vector<std::byte>> storage;
};

// Requests sent before shutdown(SHUT_WR) are answered; they used to come back Cancelled.
TEST_F(edges, requests_before_a_half_close_are_answered) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 20; ++id) ASSERT_TRUE(s.send_frame(test::request(id, "echo", "e")));
  for (std::uint64_t id = 21; id <= 24; ++id) {
    ASSERT_TRUE(s.send_frame(test::request(id, "sleep", "50000")));  // 50 ms each
  }
  ASSERT_EQ(::shutdown(s.fd(), SHUT_WR), 0);
  std::vector<bool> seen(25, false);
  for (int i = 0; i < 24; ++i) {
    const auto v = read(s);
    ASSERT_EQ(v.kind, wire::Kind::Reply) << "call " << v.call_id << ": " << to_string(v.code) << " "
                                         << v.message;
    ASSERT_GE(v.call_id, 1u);
    ASSERT_LE(v.call_id, 24u);
    EXPECT_FALSE(seen[v.call_id]) << "answered twice: " << v.call_id;
    seen[v.call_id] = true;
  }
  EXPECT_TRUE(s.wait_eof()) << "the server closes once everything is answered";
}

// A cancel for an id not in flight must not cancel a later call that reuses the id.
TEST_F(edges, a_stale_cancel_does_not_cancel_a_new_call) {
  raw_socket s(srv->port());
  detail::frame_view cancel;
  cancel.call_id = 77;
  cancel.kind = wire::Kind::Cancel;
  ASSERT_TRUE(s.send_frame(cancel));  // nothing named 77 is in flight
  ASSERT_TRUE(s.send_frame(test::request(77, "sleep", "20000")));
  const auto v = read(s);
  EXPECT_EQ(v.call_id, 77u);
  EXPECT_EQ(v.kind, wire::Kind::Reply) << to_string(v.code) << " " << v.message;
  // A cancel for a call in flight still cancels it.
  ASSERT_TRUE(s.send_frame(test::request(78, "sleep", "5000000")));  // 5 s
  std::this_thread::sleep_for(50ms);
  cancel.call_id = 78;
  ASSERT_TRUE(s.send_frame(cancel));
  const auto w = read(s);
  EXPECT_EQ(w.call_id, 78u);
  EXPECT_EQ(w.code, status::cancelled) << w.message;
}

// Id 0 is reserved for connection-level answers: a request with it gets BadRequest with id 0
// and the connection closes (a client could not tell that answer from a connection error).
// An empty 8-byte body decodes to exactly that and used to get UNKNOWN_METHOD with id 0.
TEST_F(edges, call_id_zero_is_refused_and_closes) {
  {
    raw_socket s(srv->port());
    ASSERT_TRUE(s.send_frame(test::request(0, "echo", "zero")));
    const auto v = read(s);
    EXPECT_EQ(v.call_id, 0u);
    EXPECT_EQ(v.code, status::bad_request);
    EXPECT_NE(v.message.find("call id 0 is reserved"), std::string_view::npos) << v.message;
    EXPECT_TRUE(s.wait_eof());
  }
  {
    raw_socket s(srv->port());
    // A frame with no field set at all: every field takes its default, call id 0 included.
    detail::frame_encoder enc;
    const auto empty = enc.encode(detail::frame_view{});
    ASSERT_LE(empty.size(), 4u + 16u);
    ASSERT_TRUE(s.send_all(empty));
    const auto v = read(s);
    EXPECT_EQ(v.call_id, 0u);
    EXPECT_EQ(v.code, status::bad_request) << v.message;
    EXPECT_TRUE(s.wait_eof());
  }
}

// timeout_us above 10^15 (31 years), UINT64_MAX included, means no deadline: the call runs.
TEST_F(edges, huge_timeouts_mean_no_deadline) {
  raw_socket s(srv->port());
  for (const std::uint64_t t : {std::uint64_t{1'000'000'000'000'001}, std::uint64_t{9'300'000'000'000'000},
                                ~std::uint64_t{0}}) {
    ASSERT_TRUE(s.send_frame(test::request(5, "echo", "t", t)));
    const auto v = read(s);
    EXPECT_EQ(v.kind, wire::Kind::Reply) << t << ": " << to_string(v.code) << " " << v.message;
  }
  // A budget that fits still works as one.
  ASSERT_TRUE(s.send_frame(test::request(6, "sleep", "200000", 1000)));  // 1 ms budget, 200 ms job
  std::this_thread::sleep_for(5ms);
  const auto v = read(s);
  EXPECT_TRUE(v.kind == wire::Kind::Reply || v.code == status::deadline_exceeded) << v.message;
}

// A kind past the schema's last is BadRequest "unknown frame kind" for that id; the
// connection stays open. The stream kinds (7..10) are served (streams_test.cpp).
TEST_F(edges, unknown_kind_is_bad_request_and_stays_open) {
  raw_socket s(srv->port());
  std::uint64_t id = 9;
  for (const int kind : {11, 12, 200}) {
    detail::frame_view f = test::request(++id, "echo", "k");
    f.kind = static_cast<wire::Kind>(kind);
    ASSERT_TRUE(s.send_frame(f));
    const auto v = read(s);
    EXPECT_EQ(v.call_id, id) << "kind " << kind;
    EXPECT_EQ(v.code, status::bad_request) << "kind " << kind;
    EXPECT_EQ(v.message, "unknown frame kind") << "kind " << kind;
  }
  ASSERT_TRUE(s.send_frame(test::request(++id, "echo", "still open")));
  EXPECT_EQ(read(s).kind, wire::Kind::Reply);
}

}  // namespace
}  // namespace ringrpc

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::within;

// stop() from a handler used to wait for that very handler forever. Now it stops on a thread
// of its own: the handler's own call is answered, and stop() elsewhere waits for the end.
TEST(stop_edges, stop_from_a_handler_stops_the_server) {
  server s(test::threads(1, 2));
  s.add_method("quit", [&](call_context& c) {
    s.stop();
    c.reply("bye");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  const auto r = c.call("quit", std::string_view("now"), within(10s));
  ASSERT_TRUE(r.ok()) << to_string(r.error) << " " << r.message;
  EXPECT_EQ(r.payload_string(), "bye");
  s.stop();  // returns once the stop the handler asked for has finished
  EXPECT_THROW(client::connect("127.0.0.1", s.port()), std::system_error);
}

// The stop's clock, moved by the test: reads are counted so the test knows when stop() has
// taken its deadline.
std::atomic<std::int64_t> fake_stop_ns{0};
std::atomic<int> fake_stop_reads{0};
std::chrono::steady_clock::time_point fake_stop_now() noexcept {
  fake_stop_reads.fetch_add(1);
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(fake_stop_ns.load()));
}

// A peer that sends calls and never reads their answers: at the drain's deadline stop() closes
// its connection within two abandon_grace (it used to wait a second more). On a clock the test
// holds 110 ms past the deadline, so the old second can never pass: the stop ends only if it
// keeps to the graces. The 20 s wait below only catches a hang.
TEST(stop_edges, the_drain_ends_at_its_timeout_though_a_peer_reads_nothing) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = 2000ms;
  server s(o);
  test::start_with_builtins(s);
  test::raw_socket deaf(s.port(), 4096);  // a small receive buffer it never reads
  const std::string big(100'000, 'x');
  for (std::uint64_t id = 1; id <= 30; ++id) ASSERT_TRUE(deaf.send_frame(test::request(id, "echo", big)));
  // Every call answered, the answers stuck behind a peer that does not read.
  for (int i = 0; i < 20'000 && s.stats()[ringrpc::server_counter::calls_received] < 30; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(s.stats()[ringrpc::server_counter::calls_received], 30u);
  const auto t0 = std::chrono::steady_clock::now().time_since_epoch();
  fake_stop_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0).count();
  fake_stop_reads = 0;
  detail::stop_clock.store(&fake_stop_now);
  struct restore {
    ~restore() { detail::stop_clock.store(&detail::steady_now); }
  } restore_clock;
  std::promise<void> stopped;
  auto done = stopped.get_future();
  std::thread stopper([&] {
    s.stop();
    stopped.set_value();
  });
  while (fake_stop_reads.load() == 0) std::this_thread::sleep_for(1ms);  // the deadline is taken
  // Two graces: a handler may still be running an echo at the deadline, and its call's answer
  // then gets a second one to be written.
  fake_stop_ns += std::chrono::nanoseconds(o.drain_timeout + 2 * detail::abandon_grace + 10ms).count();
  const bool ended = done.wait_for(20s) == std::future_status::ready;
  if (!ended) fake_stop_ns += std::chrono::nanoseconds(1h).count();  // let it end, then fail
  stopper.join();
  EXPECT_TRUE(ended) << "stop() waited past drain_timeout + 2 abandon_grace for answers nobody reads";
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_open], 0u);
}

// After drain_timeout, stop() answers everything but the calls whose handlers still run user
// code, and waits only for those (they cannot be abandoned safely).
TEST(stop_edges, after_the_drain_timeout_only_running_handlers_are_waited_for) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = 100ms;
  server s(o);
  std::atomic<bool> stubborn_running{false}, stubborn_done{false};
  std::atomic<int> entered{0};
  s.add_method("stubborn", [&](call_context& c) {
    entered++;
    stubborn_running = true;
    std::this_thread::sleep_for(1500ms);  // ignores cancelled() on purpose
    stubborn_done = true;
    c.reply("late");
  });
  test::start_with_builtins(s);
  auto c = client::connect("127.0.0.1", s.port());
  auto stubborn = c.call_future("stubborn", bytes_of("x"), within(20s));
  while (!stubborn_running) std::this_thread::sleep_for(1ms);
  // The pool's only thread is taken: this one waits in its queue.
  auto queued = c.call_future("stubborn", bytes_of("q"), within(20s));
  std::this_thread::sleep_for(20ms);
  std::atomic<bool> stop_returned{false};
  std::thread stopper([&] {
    s.stop();
    stop_returned = true;
  });
  const auto q = queued.get();
  EXPECT_FALSE(stubborn_done.load()) << "the queued call waited for the stubborn handler";
  EXPECT_EQ(q.code, status::shutting_down) << to_string(q.error) << " " << q.message;
  EXPECT_FALSE(stop_returned.load());
  stopper.join();
  EXPECT_TRUE(stubborn_done.load()) << "stop() returned while a handler still ran";
  (void)stubborn.get();
  EXPECT_EQ(entered.load(), 1) << "the queued call ran instead of being answered";
}

// Starts s.stop() on a thread of its own with the stop clock held by the test, and moves that
// clock `past` the drain's deadline once stop() has taken it. The clock stays there: whatever
// stop() then waits for on it (abandon_grace included) must come by itself.
class held_stop {
 public:
  held_stop(server& s, std::chrono::nanoseconds past) {
    fake_stop_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
    fake_stop_reads = 0;
    detail::stop_clock.store(&fake_stop_now);
    _stopper = std::thread([&s, this] {
      s.stop();
      _stopped.set_value();
    });
    while (fake_stop_reads.load() == 0) std::this_thread::sleep_for(1ms);  // the deadline is taken
    fake_stop_ns += std::chrono::nanoseconds(s.options().drain_timeout + past).count();
  }
  /// True if stop() returned within `hang` (a bound that only catches a hang).
  bool ended_within(std::chrono::seconds hang) {
    return _done.wait_for(hang) == std::future_status::ready;
  }
  ~held_stop() {
    if (_done.wait_for(0s) != std::future_status::ready) {
      fake_stop_ns += std::chrono::nanoseconds(1h).count();  // let it end
    }
    _stopper.join();
    detail::stop_clock.store(&detail::steady_now);
  }

 private:
  std::promise<void> _stopped;
  std::future<void> _done = _stopped.get_future();
  std::thread _stopper;
};

// A handler that ignores cancelled() and does not return: when the drain gives up, its call is
// answered shutting_down on its behalf before the connection closes (it used to be closed with
// no answer), and the handler's own answer, once it returns, goes nowhere. The clock is held
// between the two graces (answering, then writing), so the answer must come by itself.
TEST(stop_edges, a_call_whose_handler_ignores_the_stop_is_answered_for_it) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = 100ms;
  server s(o);
  std::atomic<bool> entered{false}, let_go{false};
  s.add_method("stuck", [&](call_context& c) {
    entered = true;
    for (int i = 0; i < 30'000 && !let_go; ++i) std::this_thread::sleep_for(1ms);
    c.reply("late");
  });
  s.start();
  test::raw_socket peer(s.port(), 0, 20'000ms);
  ASSERT_TRUE(peer.send_frame(test::request(7, "stuck", "x")));
  while (!entered) std::this_thread::sleep_for(1ms);
  {
    held_stop stop(s, detail::abandon_grace + 10ms);
    detail::frame_view v;
    std::vector<std::byte> storage;
    const bool answered = peer.read_frame(v, storage);
    const bool handler_still_ran = !let_go.load();
    let_go = true;
    ASSERT_TRUE(answered) << "the connection closed without an answer for the running call";
    EXPECT_TRUE(handler_still_ran);
    EXPECT_EQ(v.call_id, 7u);
    EXPECT_EQ(v.kind, wire::Kind::Error);
    EXPECT_EQ(v.code, status::shutting_down) << v.message;
    EXPECT_NE(v.message.find("ignored cancellation"), std::string_view::npos) << v.message;
    EXPECT_TRUE(stop.ended_within(20s));
  }
  EXPECT_TRUE(peer.wait_eof()) << "a second answer (the handler's late one) came after the first";
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_open], 0u);
}

// A handler that sees cancelled() when the drain gives up answers for itself, and that answer
// is written before the connection closes: on a clock held short of deadline + abandon_grace
// the stop waits for it (it used to close the connection at once, the answer lost).
TEST(stop_edges, a_handler_that_sees_the_stop_answers_before_the_close) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = 100ms;
  server s(o);
  std::atomic<bool> entered{false};
  s.add_method("polite", [&](call_context& c) {
    entered = true;
    for (int i = 0; i < 30'000; ++i) {
      if (c.cancelled()) {
        c.fail(status::cancelled, "saw the stop");
        return;
      }
      std::this_thread::sleep_for(1ms);
    }
    c.reply("never cancelled");
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto f = c.call_future("polite", bytes_of("x"), within(30s));
  while (!entered) std::this_thread::sleep_for(1ms);
  held_stop stop(s, 1ms);
  const auto r = f.get();
  EXPECT_EQ(r.code, status::cancelled) << to_string(r.error) << " " << r.message;
  EXPECT_EQ(r.message, "saw the stop");
  EXPECT_TRUE(stop.ended_within(20s));
}

}  // namespace
}  // namespace ringrpc

namespace ringrpc {
namespace {

// One host cannot take every slot: past max_connections_per_address its connections get the
// reason in an error frame (call id 0) and are closed; others and later ones still get in.
TEST(per_address, connections_per_address_are_capped) {
  server_options o = test::threads(1, 1);
  o.max_connections_per_address = 3;
  server s(o);
  test::start_with_builtins(s);
  std::vector<std::unique_ptr<test::raw_socket>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<test::raw_socket>(s.port()));
    ASSERT_TRUE(held.back()->send_frame(test::request(1, "echo", "in")));
    detail::frame_view v;
    std::vector<std::byte> storage;
    ASSERT_TRUE(held.back()->read_frame(v, storage));
    EXPECT_EQ(v.kind, wire::Kind::Reply);
  }
  {
    test::raw_socket fourth(s.port());
    detail::frame_view v;
    std::vector<std::byte> storage;
    ASSERT_TRUE(fourth.read_frame(v, storage));
    EXPECT_EQ(v.call_id, 0u);
    EXPECT_EQ(v.code, status::server_busy);
    EXPECT_NE(v.message.find("max_connections_per_address (3) open from 127.0.0.1"), std::string_view::npos)
        << v.message;
    EXPECT_TRUE(fourth.wait_eof());
  }
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_refused_per_address], 1u);
  held.pop_back();  // one closes: room for another
  bool admitted = false;
  for (int i = 0; i < 500 && !admitted; ++i) {
    test::raw_socket again(s.port());
    if (!again.send_frame(test::request(2, "echo", "again"))) continue;
    detail::frame_view v;
    std::vector<std::byte> storage;
    admitted = again.read_frame(v, storage) && v.kind == wire::Kind::Reply;
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(admitted);
}

// Past accept_rate_per_address new connections a second, a connect-close loop is refused.
TEST(per_address, accept_rate_per_address_limits_a_connect_loop) {
  server_options o = test::threads(1, 1);
  o.accept_rate_per_address = 5;
  server s(o);
  test::start_with_builtins(s);
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    test::raw_socket sock(s.port(), 0, std::chrono::milliseconds(2000));
    if (!sock.send_frame(test::request(1, "echo", "x"))) {
      ++refused;
      continue;
    }
    detail::frame_view v;
    std::vector<std::byte> storage;
    if (sock.read_frame(v, storage) && v.call_id == 0 && v.code == status::server_busy) {
      EXPECT_NE(v.message.find("accept_rate_per_address"), std::string_view::npos) << v.message;
      ++refused;
    }
  }
  // 40 connects in far less than the 7 s that 5 a second (plus a burst of 5) would need.
  EXPECT_GE(refused, 20) << "refused " << refused << " of 40";
  EXPECT_EQ(s.stats()[ringrpc::server_counter::connections_refused_per_address], static_cast<std::uint64_t>(refused));
}

}  // namespace
}  // namespace ringrpc

namespace ringrpc {
namespace {

// Fair share through the whole server: one handler; a greedy connection queues ten calls, then a
// polite one sends one. The polite call runs within the next few, not after the backlog.
// The fair-share tests' "step" method: each call waits for a ticket, then records its payload,
// so `ran()` is the order the one worker took the calls in. Declared before the server.
struct ticketed_steps {
  std::mutex mu;
  std::condition_variable cv;
  int tickets = 0;  // how many calls may finish
  std::vector<std::string> order;

  void add_to(server& s) {
    s.add_method("step", [this](call_context& c) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return tickets > 0; });
      --tickets;
      order.emplace_back(reinterpret_cast<const char*>(c.payload().data()), c.payload().size());
      c.reply("ok");
    });
  }
  void hand_out(int n) {
    {
      std::lock_guard lock(mu);
      tickets = n;
    }
    cv.notify_all();
  }
  std::vector<std::string> ran() {
    std::lock_guard lock(mu);
    return order;
  }
};

// Whether the server's one worker is running a call with `queued` more waiting.
bool holds(server& s, unsigned queued) {
  const pool_stats p = s.pool_stats_all()[0];
  return p.active == 1 && p.queued == queued;
}

// holds(), polled for up to 2 s.
bool comes_to_hold(server& s, unsigned queued) {
  for (int i = 0; i < 2000 && !holds(s, queued); ++i) std::this_thread::sleep_for(1ms);
  return holds(s, queued);
}

TEST(fair_share, a_polite_call_runs_ahead_of_a_greedy_backlog) {
  ticketed_steps steps;
  server s(test::threads(1, 1));
  steps.add_to(s);
  s.start();
  auto greedy = client::connect("127.0.0.1", s.port());
  auto polite = client::connect("127.0.0.1", s.port());
  std::vector<std::future<call_result>> calls;
  for (int i = 0; i < 10; ++i) calls.push_back(greedy.call_future("step", bytes_of("g"), within(20s)));
  // Wait until the server holds them all (one running, nine queued): until the worker has taken
  // its first call, all ten are queued.
  ASSERT_TRUE(comes_to_hold(s, 9));
  calls.push_back(polite.call_future("step", bytes_of("p"), within(20s)));
  for (int i = 0; i < 2000 && s.pool_stats_all()[0].queued < 10; ++i) std::this_thread::sleep_for(1ms);
  steps.hand_out(11);
  for (auto& f : calls) EXPECT_TRUE(f.get().ok());
  const auto order = steps.ran();
  ASSERT_EQ(order.size(), 11u);
  const auto at = std::find(order.begin(), order.end(), "p") - order.begin();
  EXPECT_LE(at, 3) << "the polite call ran " << at + 1 << "th of 11";
}

// Five connections from 127.0.0.1 with two calls each, every connection within a share of two,
// then one call from 127.0.0.2, against one worker held at a gate. Returns where the lone host's
// call ran (0-based) among the eleven.
std::ptrdiff_t lone_host_position(fair_share_caller by) {
  server_options o = test::threads(1, 1);
  o.fair_share_by = by;
  ticketed_steps steps;
  server s(o);
  steps.add_to(s);
  s.start();
  std::vector<std::unique_ptr<test::raw_socket>> busy_host;
  for (int conn = 0; conn < 5; ++conn) {
    busy_host.push_back(std::make_unique<test::raw_socket>(s.port(), 0, 20s, "127.0.0.1"));
    for (std::uint64_t id = 1; id <= 2; ++id) {
      EXPECT_TRUE(busy_host.back()->send_frame(test::request(id, "step", "busy")));
    }
    // In order, so the service order below is the same every run.
    comes_to_hold(s, static_cast<unsigned>(conn * 2 + 1));
  }
  EXPECT_TRUE(holds(s, 9));
  test::raw_socket lone_host(s.port(), 0, 20s, "127.0.0.2");
  EXPECT_TRUE(lone_host.send_frame(test::request(1, "step", "lone")));
  EXPECT_TRUE(comes_to_hold(s, 10));
  steps.hand_out(11);
  std::vector<std::byte> storage;
  detail::frame_view reply;
  EXPECT_TRUE(lone_host.read_frame(reply, storage));
  for (auto& sock : busy_host) {
    for (int n = 0; n < 2; ++n) EXPECT_TRUE(sock->read_frame(reply, storage));
  }
  const auto order = steps.ran();
  EXPECT_EQ(order.size(), 11u);
  return std::find(order.begin(), order.end(), "lone") - order.begin();
}

// Fair share by cost, through the whole server: one handler. A slow caller (its `nap` calls take
// 60 ms) queues six calls; four quick callers have two `step` calls each queued within their
// share. Counting calls, every fourth pop took the slow backlog: two or three naps before the
// last quick call. By cost, at most one nap goes ahead (it makes the worker owe three times
// its time to the others); the rest wait until nothing else does, and all run.
TEST(fair_share, a_slow_callers_backlog_takes_its_share_of_handler_time_not_of_calls) {
  server s(test::threads(1, 1));
  std::mutex mu;
  std::condition_variable cv;
  bool held = true;
  std::vector<std::string> order;
  auto record = [&](call_context& c) {
    std::lock_guard lock(mu);
    order.emplace_back(reinterpret_cast<const char*>(c.payload().data()), c.payload().size());
  };
  s.add_method("hold", [&](call_context& c) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !held; });
    c.reply("ok");
  });
  s.add_method("nap", [&](call_context& c) {
    record(c);
    std::this_thread::sleep_for(60ms);  // what makes it slow; no assertion reads a clock
    c.reply("ok");
  });
  s.add_method("step", [&](call_context& c) {
    record(c);
    c.reply("ok");
  });
  s.start();
  auto slow = client::connect("127.0.0.1", s.port());
  // The server learns what the slow caller's calls cost from those it ran: it times one call
  // in eight per worker (then every call of a connection found slow).
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(slow.call("nap", "warm", call_options{}).ok());
  {
    std::lock_guard lock(mu);
    order.clear();
  }
  auto holder = client::connect("127.0.0.1", s.port());
  auto hold = holder.call_future("hold", bytes_of(""), within(20s));
  ASSERT_TRUE(comes_to_hold(s, 0));
  std::vector<client> quick;
  std::vector<std::future<call_result>> calls;
  for (int q = 0; q < 4; ++q) {
    quick.push_back(client::connect("127.0.0.1", s.port()));
    for (int i = 0; i < 2; ++i) calls.push_back(quick.back().call_future("step", bytes_of("q"), within(20s)));
  }
  ASSERT_TRUE(comes_to_hold(s, 8));
  for (int i = 0; i < 6; ++i) calls.push_back(slow.call_future("nap", bytes_of("n"), within(20s)));
  ASSERT_TRUE(comes_to_hold(s, 14));
  {
    std::lock_guard lock(mu);
    held = false;
  }
  cv.notify_all();
  EXPECT_TRUE(hold.get().ok());
  for (auto& f : calls) EXPECT_TRUE(f.get().ok());
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), 14u);
  const auto last_quick = std::find(order.rbegin(), order.rend(), "q").base() - order.begin();
  const auto naps_first = std::count(order.begin(), order.begin() + last_quick, "n");
  EXPECT_LE(naps_first, 1) << "order: " << ::testing::PrintToString(order);
}

// What a call weighs, and how the estimate follows a connection's calls (ticks of 100 us).
TEST(fair_share, a_call_weighs_one_unit_plus_one_per_5_ms_of_its_connections_recent_cost) {
  using detail::call_units;
  using detail::next_recent_cost;
  EXPECT_EQ(call_units(0), 1u);
  EXPECT_EQ(call_units(49), 1u);  // 4.9 ms
  EXPECT_EQ(call_units(50), 2u);
  EXPECT_EQ(call_units(1'000), 21u);  // 100 ms
  EXPECT_EQ(call_units(UINT16_MAX), detail::max_call_units);  // 5 s and more weigh the same
  // A quarter of the way each call: a connection that turns slow weighs more within a call or
  // two, and one slow call among quick ones moves it a quarter.
  std::uint16_t r = 0;
  r = next_recent_cost(r, 100'000'000);  // 100 ms
  EXPECT_EQ(r, 250u);
  r = next_recent_cost(r, 100'000'000);
  EXPECT_EQ(r, 437u);
  EXPECT_EQ(next_recent_cost(400, 0), 300u);
  EXPECT_EQ(next_recent_cost(0, -5), 0u) << "a clock that steps back counts as nothing";
  EXPECT_EQ(next_recent_cost(0, INT64_MAX), UINT16_MAX / 4) << "a sample saturates at 6.5 s";
  EXPECT_EQ(next_recent_cost(UINT16_MAX, INT64_MAX), UINT16_MAX);
}

TEST(fair_share, by_connection_a_host_with_many_connections_gets_many_shares) {
  // Each of the busy host's connections is within its share: the lone host waits behind all.
  EXPECT_EQ(lone_host_position(fair_share_caller::connection), 10);
}

TEST(fair_share, by_address_a_host_gets_one_share_however_many_connections_it_opens) {
  // The busy host's ten calls count as one caller's: eight of them wait over its share.
  const auto at = lone_host_position(fair_share_caller::address);
  EXPECT_LE(at, 3) << "the lone host's call ran " << at + 1 << "th of 11";
}

}  // namespace
}  // namespace ringrpc

#include "uring/uring_probe.hpp"

namespace ringrpc {
namespace {

// Starting a server or client probes io_uring with throw-away rings. Torn down on the caller's
// thread, a ring leaves that thread with pending task work, and its next blocking receive with
// a timeout failed with EINTR, with no signal sent. The probe now runs on a thread of its own.
TEST(probe, the_callers_thread_gets_no_spurious_eintr) {
  for (int round = 0; round < 5; ++round) {
    (void)detail::probe_io_uring();
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    timeval tv{0, 100'000};
    ::setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char b = 0;
    const ssize_t n = ::recv(sv[0], &b, 1, 0);
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    EXPECT_EQ(n, -1);
    EXPECT_TRUE(err == EAGAIN || err == EWOULDBLOCK) << "round " << round << ": " << std::strerror(err);
  }
}

}  // namespace
}  // namespace ringrpc

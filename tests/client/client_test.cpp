// The client library's typed errors, futures, callbacks and deadlines.

#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>
#include <unordered_map>

#include "client/inflight_table.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using test::within;
using namespace std::chrono_literals;

using test::sanitized;

std::unique_ptr<server> echo_server(unsigned handlers = 2) {
  return test::builtin_server(test::threads(1, handlers));
}

TEST(client, refused_connection_is_a_typed_error) {
  std::uint16_t port = 0;
  {
    auto s = echo_server();
    port = s->port();
  }  // stopped: nothing listens there now
  try {
    client::connect("127.0.0.1", port);
    FAIL() << "connect succeeded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ECONNREFUSED);
  }
}

TEST(client, future_and_callback_forms) {
  auto s = echo_server();
  auto c = client::connect("127.0.0.1", s->port());
  auto f = c.call_future("echo", bytes_of("future"));
  EXPECT_EQ(f.get().payload_string(), "future");
  std::promise<std::string> p;
  c.call_async("echo", bytes_of("callback"), [&](const call_outcome& o) {
    p.set_value(std::string(reinterpret_cast<const char*>(o.payload.data()), o.payload.size()));
  });
  EXPECT_EQ(p.get_future().get(), "callback");
}

TEST(client, local_deadline_fires_even_if_server_is_slow) {
  auto s = echo_server();
  auto c = client::connect("127.0.0.1", s->port());
  call_options o;
  o.timeout = std::chrono::milliseconds(30);
  // A 20 s sleep (it ends when the timeout's Cancel reaches it): a timeout cannot be the reply
  // come late. The bound only catches a hang; a busy machine may take any part of it.
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = c.call("sleep", bytes_of("20000000"), o);
  EXPECT_EQ(r.error, call_error::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  // The late reply is dropped; the connection stays usable.
  EXPECT_TRUE(c.call("echo", bytes_of("after")).ok());
}

TEST(client, an_answer_read_after_the_deadline_is_a_timeout) {
  // Both answers come in one write, so the client reads them in one turn; the first one's
  // callback holds the client's loop past the second call's deadline. The second answer was on
  // time at the socket, but the client sees it only after its deadline: the caller must get the
  // timeout (a loop that wakes late finds the timer and the answer together; it used to hand
  // over whichever answer it read first, e.g. the server's own deadline_exceeded).
  test::scripted_server peer;
  auto c = client::connect("127.0.0.1", peer.port());
  peer.accept();
  std::promise<void> held;
  c.call_async("hold", bytes_of("x"), [&](const call_outcome&) {
    std::this_thread::sleep_for(300ms);
    held.set_value();
  });
  auto late = c.call_future("late", bytes_of("y"), within(100ms));
  const std::uint64_t first = peer.read_request();
  const std::uint64_t second = peer.read_request();
  ASSERT_NE(first, 0u);
  ASSERT_NE(second, 0u);
  detail::frame_encoder enc;
  detail::frame_view answer;
  answer.kind = wire::Kind::Reply;
  answer.payload = bytes_of("answer");
  answer.call_id = first;
  const auto one = enc.encode(answer);
  std::vector<std::byte> both(one.begin(), one.end());
  answer.call_id = second;
  const auto two = enc.encode(answer);
  both.insert(both.end(), two.begin(), two.end());
  ASSERT_TRUE(peer.send(both));
  held.get_future().get();
  const auto r = late.get();
  EXPECT_EQ(r.error, call_error::timeout) << to_string(r.error) << " " << r.message;
}

TEST(client, server_stopping_mid_call_fails_calls_cleanly) {
  auto s = echo_server();
  auto c = client::connect("127.0.0.1", s->port());
  auto f = c.call_future("sleep", bytes_of("50000"));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s->stop();
  const auto r = f.get();
  EXPECT_TRUE(r.ok() || r.code == status::shutting_down) << to_string(r.error);
  const auto after = c.call("echo", bytes_of("x"));
  EXPECT_EQ(after.error, call_error::connection_closed);
  EXPECT_FALSE(c.connected());
}

TEST(client, connection_closed_mid_call_is_reported) {
  // A listener that accepts and closes immediately after reading one frame.
  test::raw_socket* unused = nullptr;
  (void)unused;
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof(a);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread peer([&] {
    const int fd = ::accept(lfd, nullptr, nullptr);
    char buf[256];
    (void)::recv(fd, buf, sizeof(buf), 0);
    ::close(fd);
  });
  auto c = client::connect("127.0.0.1", ntohs(a.sin_port));
  const auto r = c.call("echo", bytes_of("x"));
  peer.join();
  ::close(lfd);
  EXPECT_EQ(r.error, call_error::connection_closed);
}

TEST(client, close_fails_pending_calls_with_client_closed) {
  auto s = echo_server(1);
  auto c = client::connect("127.0.0.1", s->port());
  auto f = c.call_future("sleep", bytes_of("200000"));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  c.close();
  EXPECT_EQ(f.get().error, call_error::client_closed);
  EXPECT_EQ(c.call("echo", bytes_of("x")).error, call_error::client_closed);
}

TEST(client, synchronous_call_from_callback_is_refused) {
  auto s = echo_server();
  auto c = client::connect("127.0.0.1", s->port());
  std::promise<bool> threw;
  c.call_async("echo", bytes_of("x"), [&](const call_outcome&) {
    try {
      c.call("echo", bytes_of("y"));
      threw.set_value(false);
    } catch (const std::logic_error&) {
      threw.set_value(true);
    }
  });
  EXPECT_TRUE(threw.get_future().get());
}

TEST(client, many_threads_share_one_client) {
  auto s = echo_server();
  auto c = client::connect("127.0.0.1", s->port());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string p = std::to_string(t) + ":" + std::to_string(i);
        const auto r = c.call("echo", bytes_of(p));
        if (r.ok() && r.payload_string() == p) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 800);
}

// ---------------------------------------------------------------------------------------------
// The in-flight table: bounded by the calls in it, whatever their ids.

struct item {
  std::uint64_t id;
};

TEST(inflight_table, one_stuck_id_among_a_million_later_ones_does_not_grow_it) {
  detail::inflight_table<item> t(1 << 20);
  item stuck{1};
  t.insert(&stuck);
  std::vector<item> live(8);
  // Eight calls in flight at a time, ids marching past the stuck one a million times over:
  // the table indexed by low id bits doubled at every wrap-around (to 2^20 slots here).
  for (std::uint64_t id = 2; id < 1'000'002; ++id) {
    item& it = live[id % live.size()];
    if (it.id != 0) {
      ASSERT_EQ(t.take(it.id), &it);
    }
    it.id = id;
    t.insert(&it);
    ASSERT_EQ(t.find(1), &stuck);
  }
  EXPECT_EQ(t.size(), 9u);
  EXPECT_EQ(t.capacity(), detail::inflight_table<item>::min_slots);
}

TEST(inflight_table, grows_with_the_count_and_shrinks_back) {
  detail::inflight_table<item> t(1 << 20);
  std::vector<item> items(10000);
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].id = 7 + i * 3;
    t.insert(&items[i]);
  }
  EXPECT_LE(t.capacity(), 4 * items.size());
  for (auto& it : items) ASSERT_EQ(t.take(it.id), &it);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.capacity(), detail::inflight_table<item>::min_slots) << "memory of a burst is given back";
}

TEST(inflight_table, agrees_with_a_map_under_random_traffic) {
  detail::inflight_table<item> t(1 << 20);
  std::unordered_map<std::uint64_t, std::unique_ptr<item>> ref;
  std::mt19937_64 rng(42);
  std::uint64_t next = 1;
  for (int step = 0; step < 200000; ++step) {
    const auto r = rng() % 100;
    if (r < 52 || ref.empty()) {
      // Mostly sequential ids with occasional jumps, like many threads sharing one counter.
      next += (rng() % 16 == 0) ? rng() % 100000 : 1;
      auto it = std::make_unique<item>(item{next});
      t.insert(it.get());
      ref.emplace(next, std::move(it));
    } else {
      auto victim = ref.begin();
      std::advance(victim, static_cast<long>(rng() % std::min<std::size_t>(ref.size(), 8)));
      ASSERT_EQ(t.take(victim->first), victim->second.get());
      ASSERT_EQ(t.take(victim->first), nullptr);
      ref.erase(victim);
    }
    if (step % 97 == 0) {
      for (const auto& [id, p] : ref) ASSERT_EQ(t.find(id), p.get());
      ASSERT_EQ(t.find(next + 1), nullptr);
    }
    ASSERT_EQ(t.size(), ref.size());
  }
  std::size_t drained = 0;
  t.drain([&](item* it) {
    ASSERT_EQ(ref.at(it->id).get(), it);
    ++drained;
  });
  EXPECT_EQ(drained, ref.size());
  EXPECT_EQ(t.size(), 0u);
}

TEST(inflight_table, holds_at_most_max_items_and_never_grows_past_their_bound) {
  constexpr std::size_t max = 100;
  detail::inflight_table<item> t(max);
  std::vector<item> items(max + 1);
  for (std::size_t i = 0; i < max; ++i) {
    items[i].id = 1 + i * 1000;
    ASSERT_TRUE(t.insert(&items[i]));
  }
  items[max].id = 999'999'999;
  EXPECT_FALSE(t.insert(&items[max])) << "the cap follows max_pending_calls";
  EXPECT_EQ(t.find(items[max].id), nullptr);
  EXPECT_EQ(t.size(), max);
  EXPECT_LE(t.capacity(), std::bit_ceil(2 * max));
}

// ---------------------------------------------------------------------------------------------
// Limits on what one connection may have queued or in flight.

TEST(client, calls_beyond_max_pending_calls_fail_at_once_with_client_busy) {
  auto s = echo_server(4);
  client_options co;
  co.max_pending_calls = 3;
  auto c = client::connect("127.0.0.1", s->port(), co);
  std::vector<std::future<call_result>> held;
  // 2 s sleeps: still running when the fourth call is made, however busy the machine.
  for (int i = 0; i < 3; ++i) held.push_back(c.call_future("sleep", bytes_of("2000000"), within(10s)));
  const auto r = c.call("echo", bytes_of("one too many"), within(10s));
  // Refused at once, not queued: a queued echo would have waited for a sleep and succeeded.
  EXPECT_EQ(r.error, call_error::client_busy);
  EXPECT_EQ(held[0].wait_for(0s), std::future_status::timeout) << "the held calls ended too soon to test";
  EXPECT_NE(r.message.find("max_pending_calls"), std::string::npos) << r.message;
  EXPECT_EQ(to_string(r.error), "client_busy");
  EXPECT_FALSE(c.send_one_way("echo", bytes_of("one-ways count too")));
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
  // The room comes back as calls finish; sequential calls never trip over their predecessor.
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(c.call("echo", bytes_of("again"), within(10s)).ok()) << i;
  EXPECT_TRUE(c.send_one_way("echo", bytes_of("fits again")));
}

TEST(client, max_pending_bytes_refuses_requests_while_the_bytes_are_taken) {
  auto s = echo_server(2);
  client_options co;
  co.max_pending_bytes = 4096;
  auto c = client::connect("127.0.0.1", s->port(), co);
  // One request larger than the cap still goes when nothing else is pending.
  const std::string big = "200000 " + std::string(10000, 'x');
  auto first = c.call_future("sleep", bytes_of(big), within(10s));
  const auto r = c.call("echo", bytes_of("small"), within(10s));
  EXPECT_EQ(r.error, call_error::client_busy);
  EXPECT_NE(r.message.find("max_pending_bytes"), std::string::npos) << r.message;
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(c.call("echo", bytes_of("small"), within(10s)).ok());
}

// A server that does not read: without a cap every call would queue in the client for good.
TEST(client, a_server_that_stops_reading_costs_at_most_the_cap) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof(a);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  client_options co;
  co.max_pending_calls = 64;
  auto c = client::connect("127.0.0.1", ntohs(a.sin_port), co);
  const int peer = ::accept(lfd, nullptr, nullptr);  // accepted, never read
  const std::string payload(64 * 1024, 'p');
  std::atomic<int> busy{0}, other{0};
  for (int i = 0; i < 2000; ++i) {
    c.call_async("echo", bytes_of(payload), [&](const call_outcome& o) {
      (o.error == call_error::client_busy ? busy : other)++;
    }, within(30s));
  }
  EXPECT_EQ(busy.load(), 2000 - 64) << "64 queued, the rest refused";
  c.close();
  EXPECT_EQ(other.load(), 64) << "the queued ones fail with client_closed";
  ::close(peer);
  ::close(lfd);
}

// ---------------------------------------------------------------------------------------------
// Cancel frames.

TEST(client, a_local_timeout_cancels_the_call_on_the_server) {
  // One handler: while it waits, nothing else runs. It waits for its cancellation and nothing
  // else, up to 20 s: the built-in sleep also ends at the call's deadline, which the server
  // counts from the request's arrival, and on a busy machine its answer could reach the client
  // before the client's own timer fired (server_status, no Cancel sent).
  auto s = std::make_unique<server>(test::threads(1, 1));
  add_builtin_methods(*s);
  s->add_method("await_cancel", [](call_context& ctx) {
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!ctx.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    ctx.fail(status::cancelled, "cancelled");
  });
  s->start();
  auto c = client::connect("127.0.0.1", s->port());
  const auto before = s->stats()[ringrpc::server_counter::cancel_requests];
  const auto r = c.call("await_cancel", bytes_of("20 s at most"), within(50ms));
  EXPECT_EQ(r.error, call_error::timeout) << to_string(r.error) << " " << r.message;
  for (int i = 0; i < 500 && s->stats()[ringrpc::server_counter::cancel_requests] == before; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(s->stats()[ringrpc::server_counter::cancel_requests], before + 1);
  // The handler gave up its only thread: the next call runs within its own deadline, long
  // before the 20 s sleep would have ended.
  const auto after = c.call("echo", bytes_of("free again"), within(5s));
  EXPECT_TRUE(after.ok()) << to_string(after.error) << " " << after.message;
}

TEST(client, cancel_of_a_call_still_queued_on_the_server_keeps_it_from_running) {
  auto s = echo_server(1);
  auto c = client::connect("127.0.0.1", s->port());
  auto blocker = c.call_future("sleep", bytes_of("300000"), within(10s));
  std::this_thread::sleep_for(20ms);  // the blocker holds the only handler
  const auto r = c.call("sleep", bytes_of("20000000"), within(50ms));  // queued behind it
  EXPECT_EQ(r.error, call_error::timeout);
  EXPECT_TRUE(blocker.get().ok());
  // Behind a 20 s sleep on the only handler, this call would miss its deadline.
  EXPECT_TRUE(c.call("echo", bytes_of("next"), within(5s)).ok()) << "the cancelled 20 s sleep ran";
  EXPECT_GE(s->stats()[ringrpc::server_counter::cancel_requests], 1u);
}

// ---------------------------------------------------------------------------------------------
// Memory follows the bytes received.

// Bytes the allocator has handed out and not got back (all arenas, mmapped chunks included).
std::size_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

using test::scripted_server;

// One call answered, so that what a test measures next finds the pools, the thread's arena and
// the encoder warm.
void warm_up(client& c, scripted_server& srv) {
  auto f = c.call_future("x", bytes_of("warm"), within(10s));
  srv.reply(srv.read_request(), bytes_of("ok"));
  ASSERT_TRUE(f.get().ok());
}

TEST(client, a_huge_reply_leaves_no_buffer_behind) {
  if (sanitized) GTEST_SKIP() << "sanitizer allocators do not report through mallinfo2";
  scripted_server srv;
  auto rt = client_runtime::create();
  client_options co;
  co.max_frame_bytes = 64u << 20;
  auto c = client::connect("127.0.0.1", srv.port(), co, rt);
  srv.accept();
  ASSERT_NO_FATAL_FAILURE(warm_up(c, srv));
  const std::size_t before = heap_in_use();
  {
    auto f = c.call_future("x", bytes_of("big"), within(10s));
    const auto id = srv.read_request();
    {
      std::vector<std::byte> big(24u << 20, std::byte{'b'});
      ASSERT_TRUE(srv.reply(id, big));
    }
    const auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.payload.size(), 24u << 20);
  }
  // Another reply after it, so that the loop has finished with the big one.
  auto f = c.call_future("x", bytes_of("small"), within(10s));
  srv.reply(srv.read_request(), bytes_of("ok"));
  ASSERT_TRUE(f.get().ok());
  const std::size_t after = heap_in_use();
  EXPECT_LT(after, before + (1u << 20)) << "kept " << (after - before) / 1024 << " KiB after a 24 MiB reply";
}

TEST(client, a_claimed_frame_costs_only_the_bytes_that_arrived) {
  if (sanitized) GTEST_SKIP() << "sanitizer allocators do not report through mallinfo2";
  scripted_server srv;
  auto c = client::connect("127.0.0.1", srv.port());
  srv.accept();
  ASSERT_NO_FATAL_FAILURE(warm_up(c, srv));
  const std::size_t before = heap_in_use();
  auto f = c.call_future("x", bytes_of("claim"), within(5s));
  ASSERT_NE(srv.read_request(), 0u);
  // A length prefix claiming 16 MiB, then 100 bytes of it, then nothing.
  std::vector<std::byte> claim(4 + 100, std::byte{0});
  const std::uint32_t body = 16u << 20;
  std::memcpy(claim.data(), &body, 4);
  ASSERT_TRUE(srv.send(claim));
  std::this_thread::sleep_for(200ms);  // the client has read them by now
  const std::size_t during = heap_in_use();
  c.close();
  const std::size_t grown = during > before ? during - before : 0;
  // The old frame_assembler reserved the claimed 16 MiB here on a 100-byte read.
  EXPECT_LT(grown, 256u * 1024) << "grew " << grown / 1024 << " KiB for a 16 MiB claim";
}

// ---------------------------------------------------------------------------------------------
// A busy client must keep reading replies.
//
// With DEFER_TASKRUN the kernel posts receive completions only when the loop enters the ring
// asking for events. Before ring::submit() asked for them, a loop that always had new work at
// the end of a turn never slept, and in turns with nothing to submit it never entered the
// kernel at all: replies that had arrived stayed unread until their calls timed out. Here the
// endless work is a caller that retries, from its callback, calls to a peer that stopped
// reading (so nothing of it can be submitted), each callback doing ~100 us of work; meanwhile
// another thread floods a second connection of the same runtime with calls that the server
// answers at once and that have generous deadlines.
TEST(client, replies_are_read_while_a_retry_storm_keeps_the_loop_busy) {
  auto s = echo_server(2);
  scripted_server stalled;  // accepts, never reads
  auto rt = client_runtime::create();
  client_options storm_options;
  storm_options.max_pending_calls = 1u << 20;  // the storm must not end on client_busy
  storm_options.max_pending_bytes = std::size_t{1} << 30;
  auto stormy = client::connect("127.0.0.1", stalled.port(), storm_options, rt);
  stalled.accept();
  auto good = client::connect("127.0.0.1", s->port(), {}, rt);
  // Fill the stalled peer's socket buffers: the connection's write then stays in flight.
  const std::string filler(16u << 20, 'f');
  stormy.call_async("fill", bytes_of(filler), [](const call_outcome&) {}, within(60s));
  std::this_thread::sleep_for(200ms);

  std::atomic<bool> stop{false};
  std::atomic<long> storm_calls{0};
  std::atomic<int> storm_chains{1};
  std::function<void(call_error)> retry = [&](call_error last) {
    // client_busy runs the callback inline: retrying then would recurse, so the chain ends.
    if (stop.load() || last == call_error::client_busy || storm_calls.fetch_add(1) > 200'000) {
      storm_chains = 0;
      storm_chains.notify_all();
      return;
    }
    stormy.call_async("x", bytes_of("x"), [&](const call_outcome& o) { retry(o.error); }, within(1us));
    // The callback's own work, after the retry: by the loop's next look its deadline is past.
    const auto until = std::chrono::steady_clock::now() + 100us;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  good.call_async("echo", bytes_of("start"), [&](const call_outcome&) { retry(call_error::none); });
  while (storm_calls.load() < 100) std::this_thread::sleep_for(1ms);  // the storm is on

  constexpr int n = 2000;
  std::atomic<int> done{0}, ok{0}, timeouts{0};
  std::thread flood([&] {
    for (int i = 0; i < n; ++i) {
      good.call_async("echo", bytes_of("flood"), [&](const call_outcome& o) {
        if (o.ok()) ++ok;
        if (o.error == call_error::timeout) ++timeouts;
        ++done;
        done.notify_all();
      }, within(sanitized ? 20s : 3s));
    }
  });
  flood.join();
  for (int v = done.load(); v < n; v = done.load()) done.wait(v);
  stop = true;
  for (int v = storm_chains.load(); v != 0; v = storm_chains.load()) storm_chains.wait(v);
  EXPECT_EQ(ok.load(), n) << timeouts.load() << " calls timed out although the server answers echo at once";
  EXPECT_GT(storm_calls.load(), 100);
  stormy.close();
}

}  // namespace
}  // namespace ringrpc

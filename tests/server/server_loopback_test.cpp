// The server pipeline over real loopback sockets with the real client.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;

server_options small_options(unsigned readers = 2, unsigned handlers = 2) {
  server_options o = test::threads(readers, handlers);
  return o;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

TEST(server_loopback, echo_round_trip) {
  server srv(small_options());
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  const auto r = c.call("echo", std::string_view("hello ringrpc"));
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "hello ringrpc");
  const auto empty = c.call("echo", std::string_view());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty.payload.empty());
}

TEST(server_loopback, many_connections_pipelined_byte_exact) {
  server srv(small_options(2, 2));
  test::start_with_builtins(srv);
  constexpr int connections = 16;
  constexpr int calls_per_connection = 1500;
  auto rt = client_runtime::create();
  std::vector<client> clients;
  for (int i = 0; i < connections; ++i) clients.push_back(client::connect("127.0.0.1", srv.port(), {}, rt));

  std::atomic<int> done{0}, bad{0};
  std::vector<std::string> payloads;
  for (int i = 0; i < 64; ++i) payloads.push_back(pattern(static_cast<std::size_t>(i * 97 % 5000), static_cast<unsigned>(i)));
  // Each connection keeps `depth` calls in flight and sends the next as one completes, with
  // the payload chosen by the call's sequence number so every reply can be checked.
  constexpr int depth = 32;
  struct lane {
    client* c;
    std::atomic<int> next{0};
  };
  std::vector<std::unique_ptr<lane>> lanes;
  for (auto& c : clients) {
    lanes.push_back(std::make_unique<lane>());
    lanes.back()->c = &c;
  }
  std::function<void(lane*)> issue = [&](lane* l) {
    const int k = l->next.fetch_add(1);
    if (k >= calls_per_connection) return;
    const std::string& p = payloads[static_cast<std::size_t>(k % 64)];
    l->c->call_async("echo", bytes_of(p), [&, l, &p = p](const call_outcome& o) {
      if (!o.ok() || std::string_view(reinterpret_cast<const char*>(o.payload.data()), o.payload.size()) != p) ++bad;
      issue(l);
      ++done;  // last: once the count is complete the test may free the lanes
    });
  };
  for (auto& l : lanes) {
    for (int d = 0; d < depth; ++d) issue(l.get());
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done.load() < connections * calls_per_connection && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(done.load(), connections * calls_per_connection);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::calls_rejected_busy], 0u);
}

// One handler and one queue (fair share off: a connection past its share has its later calls
// queued apart, which may overtake its earlier ones; see docs/execution.md).
TEST(server_loopback, replies_keep_request_order_with_one_handler) {
  server_options o = small_options(1, 1);
  o.handler_queue_size = 4096;  // every call fits: a SERVER_BUSY answer would overtake the queue
  o.fair_share_calls = 1u << 20;
  server srv(o);
  test::start_with_builtins(srv);
  test::raw_socket s(srv.port());
  constexpr int n = 2000;
  std::vector<std::byte> batch;
  detail::frame_encoder enc;
  for (int i = 1; i <= n; ++i) {
    const std::string p = std::to_string(i);
    auto f = enc.encode(test::request(static_cast<std::uint64_t>(i), "echo", p));
    batch.insert(batch.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(s.send_all(batch));
  std::vector<std::byte> storage;
  for (int i = 1; i <= n; ++i) {
    detail::frame_view v;
    ASSERT_TRUE(s.read_frame(v, storage)) << "reply " << i;
    ASSERT_EQ(v.call_id, static_cast<std::uint64_t>(i));
    ASSERT_EQ(std::string_view(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()), std::to_string(i));
  }
}

// A slow reader with a tiny receive window and a tiny server send buffer forces the kernel to
// take each 1 MiB reply in pieces: the unwritten tail must go back to the head of the queue
// and the bytes must arrive intact and in order.
TEST(server_loopback, partial_writes_requeue_at_head_and_stay_byte_exact) {
  server_options o = small_options(1, 2);
  o.socket_send_buffer_bytes = 4096;
  server srv(o);
  test::start_with_builtins(srv);
  test::raw_socket s(srv.port(), 4096);
  constexpr int replies = 4;
  std::vector<std::string> payloads;
  for (int i = 0; i < replies; ++i) payloads.push_back(pattern(1u << 20, 100u + static_cast<unsigned>(i)));
  for (int i = 0; i < replies; ++i) {
    ASSERT_TRUE(s.send_frame(test::request(static_cast<std::uint64_t>(i + 1), "echo", payloads[static_cast<std::size_t>(i)])));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the server hit a full socket
  std::vector<std::byte> storage;
  std::vector<bool> seen(replies, false);
  for (int i = 0; i < replies; ++i) {
    detail::frame_view v;
    ASSERT_TRUE(s.read_frame(v, storage));
    ASSERT_GE(v.call_id, 1u);
    ASSERT_LE(v.call_id, static_cast<std::uint64_t>(replies));
    const auto& want = payloads[v.call_id - 1];
    ASSERT_EQ(v.payload.size(), want.size());
    EXPECT_EQ(std::memcmp(v.payload.data(), want.data(), want.size()), 0);
    seen[v.call_id - 1] = true;
  }
  for (bool b : seen) EXPECT_TRUE(b);
  EXPECT_GT(srv.stats()[ringrpc::server_counter::partial_writes], 0u) << "the head-requeue path never ran";
}

TEST(server_loopback, stop_answers_every_accepted_call) {
  server_options o = small_options(1, 4);
  server srv(o);
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  std::vector<std::future<call_result>> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(c.call_future("sleep", bytes_of("100000")));
  while (srv.stats()[ringrpc::server_counter::calls_received] < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  srv.stop();
  for (auto& f : futures) {
    const auto r = f.get();
    EXPECT_TRUE(r.ok() || (r.error == call_error::server_status && r.code == status::shutting_down))
        << to_string(r.error) << " " << r.message;
  }
  EXPECT_FALSE(c.call("echo", std::string_view("x")).ok());
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::connections_open], 0u);
}

TEST(server_loopback, handler_exception_becomes_internal_error) {
  server srv(small_options(1, 1));
  srv.add_method("throws", [](call_context&) { throw std::runtime_error("boom"); });
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  const auto r = c.call("throws", std::string_view());
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::internal);
  EXPECT_EQ(r.message, "boom");
  EXPECT_TRUE(c.call("echo", std::string_view("still fine")).ok());
}

TEST(server_loopback, full_call_queue_answers_server_busy_at_once) {
  server_options o = small_options(1, 1);
  o.handler_queue_size = 1;  // capacity rounds up to 2
  o.max_inflight_per_connection = 64;  // one connection fills the queue here, on purpose
  server srv(o);
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  std::vector<std::future<call_result>> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(c.call_future("sleep", bytes_of("20000")));
  int busy = 0, ok = 0;
  for (auto& f : futures) {
    const auto r = f.get();
    if (r.ok()) ++ok;
    if (r.code == status::server_busy) {
      ++busy;
      EXPECT_GT(r.retry_after_ms, 0u);
    }
  }
  EXPECT_GT(busy, 0);
  EXPECT_GT(ok, 0);
  EXPECT_EQ(busy + ok, 20);
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::calls_rejected_busy], static_cast<std::uint64_t>(busy));
}

TEST(server_loopback, server_enforces_deadline_before_running) {
  server srv(small_options(1, 1));
  std::atomic<int> ran{0};
  srv.add_method("count", [&](call_context& ctx) { ++ran; ctx.reply(std::string_view()); });
  test::start_with_builtins(srv);
  test::raw_socket s(srv.port());
  // The first call occupies the only handler for 100 ms; the second has a 10 ms budget.
  ASSERT_TRUE(s.send_frame(test::request(1, "sleep", "100000")));
  ASSERT_TRUE(s.send_frame(test::request(2, "count", "", 10'000)));
  std::vector<std::byte> storage;
  detail::frame_view v;
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.call_id, 1u);
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.call_id, 2u);
  EXPECT_EQ(v.kind, wire::Kind::Error);
  EXPECT_EQ(v.code, status::deadline_exceeded);
  EXPECT_EQ(ran.load(), 0);
}

TEST(server_loopback, ping_gets_pong_and_one_way_gets_nothing) {
  server srv(small_options(1, 1));
  std::atomic<int> got{0};
  srv.add_method("note", [&](call_context&) { ++got; });
  test::start_with_builtins(srv);
  test::raw_socket s(srv.port());
  detail::frame_view one_way = test::request(7, "note", "x");
  one_way.kind = wire::Kind::OneWay;
  ASSERT_TRUE(s.send_frame(one_way));
  detail::frame_view ping;
  ping.call_id = 9;
  ping.kind = wire::Kind::Ping;
  ASSERT_TRUE(s.send_frame(ping));
  std::vector<std::byte> storage;
  detail::frame_view v;
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.kind, wire::Kind::Pong);
  EXPECT_EQ(v.call_id, 9u);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(got.load(), 1);
}

TEST(server_loopback, start_fails_clearly_when_port_is_taken) {
  server a(small_options(1, 1));
  test::start_with_builtins(a);
  server_options o = small_options(1, 1);
  o.port = a.port();
  server b(o);
  try {
    b.start();
    FAIL() << "second bind succeeded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EADDRINUSE);
    EXPECT_NE(std::string(e.what()).find("bind"), std::string::npos);
  }
}

}  // namespace
}  // namespace ringrpc

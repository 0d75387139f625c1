// Memory follows the bytes peers send: claimed lengths reserve nothing, a server-wide budget
// holds, per-connection byte caps hold, peers that stall are shed, and running out of memory
// fails a call or a connection, never the server. Loopback server, raw sockets and real clients.

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::raw_socket;
using test::sanitized;
using test::within;

std::size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

using test::eventually;

std::vector<std::byte> prefix_claiming(std::uint32_t body) {
  std::vector<std::byte> p(4);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(body >> (8 * i));
  return p;
}

server_options base_options() {
  server_options o = test::threads(1, 2);
  return o;
}

// Raises the soft fd limit to the hard one, so a test can hold a few hundred sockets.
void allow_many_fds() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

// The old assembler resized its buffer to the claimed length as soon as a prefix arrived: 16 MiB
// of RSS per connection here. Now a connection costs what it sent, plus a small buffer.
TEST(memory_follows_bytes, claimed_frames_cost_what_was_sent) {
  allow_many_fds();
  server_options o = base_options();
  server srv(o);
  test::start_with_builtins(srv);
  // Warm the path first (threads, buffers, the pools' first allocations).
  {
    auto c = client::connect("127.0.0.1", srv.port());
    ASSERT_TRUE(c.call("echo", std::string_view("warm")).ok());
  }
  constexpr int peers = 128;  // small: the old code would take 2 GiB here
  std::vector<std::byte> claim = prefix_claiming(16u << 20);
  claim.resize(104, std::byte{0x42});  // the prefix and 100 bytes of the body
  const std::size_t before = rss_bytes();
  std::vector<std::unique_ptr<raw_socket>> socks;
  for (int i = 0; i < peers; ++i) {
    socks.push_back(std::make_unique<raw_socket>(srv.port()));
    ASSERT_TRUE(socks.back()->send_all(claim));
  }
  ASSERT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::bytes_in] >= peers * claim.size(); }));
  const std::size_t after = rss_bytes();
  const std::size_t per_peer = after > before ? (after - before) / peers : 0;
  EXPECT_LE(per_peer, 16u * 1024) << "RSS grew by " << (after - before) << " bytes for " << peers
                                  << " peers claiming 16 MiB each";
  EXPECT_LT(srv.stats()[ringrpc::server_counter::buffered_bytes], 16u << 20);
  socks.clear();
  ASSERT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::connections_open] == 0; }));
}

// Past max_buffered_bytes new calls get SERVER_BUSY naming the knob, the connections holding
// the most stop being read, and once they let go the server answers again.
TEST(memory_budget, exhausted_budget_refuses_calls_then_recovers) {
  server_options o = base_options();
  o.max_buffered_bytes = 4u << 20;
  server srv(o);
  test::start_with_builtins(srv);
  auto c = client::connect("127.0.0.1", srv.port());
  ASSERT_TRUE(c.call("echo", std::string_view("before")).ok());

  // Three peers each send 1.5 MiB of a 2 MiB frame and stop: 4.5 MiB held, over the budget.
  const std::vector<std::byte> part = [] {
    auto p = prefix_claiming(2u << 20);
    p.resize(4 + (3u << 19), std::byte{0x17});
    return p;
  }();
  std::vector<std::unique_ptr<raw_socket>> hogs;
  for (int i = 0; i < 3; ++i) {
    hogs.push_back(std::make_unique<raw_socket>(srv.port()));
    ASSERT_TRUE(hogs.back()->send_all(part));
  }
  ASSERT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::buffered_bytes] >= o.max_buffered_bytes; }))
      << "held " << srv.stats()[ringrpc::server_counter::buffered_bytes];
  call_result r;
  ASSERT_TRUE(eventually([&] {
    r = c.call("echo", std::string_view("during"), within(5s));
    return r.code == status::server_busy;
  })) << to_string(r.error) << " " << r.message;
  EXPECT_NE(r.message.find("max_buffered_bytes"), std::string::npos) << r.message;
  EXPECT_GT(r.retry_after_ms, 0u);
  const auto st = srv.stats();
  EXPECT_GE(st[ringrpc::server_counter::calls_rejected_memory], 1u);
  EXPECT_GE(st[ringrpc::server_counter::budget_pauses], 1u);
  EXPECT_EQ(st[ringrpc::server_counter::buffered_bytes_limit], o.max_buffered_bytes);
  const std::string page = metrics_text(srv);
  EXPECT_NE(page.find("ringrpc_buffered_bytes_limit 4194304"), std::string::npos);
  EXPECT_NE(page.find("ringrpc_calls_rejected_memory_total"), std::string::npos);

  hogs.clear();  // they let go: the budget frees and calls are answered again
  ASSERT_TRUE(eventually([&] { return c.call("echo", std::string_view("after"), within(5s)).ok(); }));
  EXPECT_LT(srv.stats()[ringrpc::server_counter::buffered_bytes], 1u << 20);
}

// A connection cannot have more than max_inflight_bytes_per_connection of requests admitted:
// reading pauses at the cap (the count cap alone let 4096 calls x 16 MiB in).
TEST(memory_budget, inflight_bytes_per_connection_is_a_cap) {
  server_options o = base_options();
  o.max_inflight_bytes_per_connection = 256 * 1024;
  server srv(o);
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};
  pool_options wide;
  wide.threads = 16;
  wide.queue = 64;
  srv.add_pool("wide", wide);
  endpoint_options eo;
  eo.pool = "wide";
  struct gate_endpoint final : endpoint {
    std::function<void(call_context&)> fn;
    void receive_and_reply(call_context& c) override { fn(c); }
  };
  auto ep = std::make_shared<gate_endpoint>();
  ep->fn = [&](call_context& c) {
    entered.fetch_add(1);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
    c.reply("done");
  };
  srv.register_endpoint("gate", ep, eo);
  srv.start();
  auto c = client::connect("127.0.0.1", srv.port());
  const std::string big(64 * 1024, 'b');
  std::vector<std::future<call_result>> calls;
  for (int i = 0; i < 12; ++i) calls.push_back(c.call_future("gate", bytes_of(big), within(20s)));
  ASSERT_TRUE(eventually([&] { return entered.load() >= 4; }));
  std::this_thread::sleep_for(200ms);  // give any call past the cap time to (wrongly) arrive
  EXPECT_LE(entered.load(), 5) << "request bytes in flight went past the per-connection cap";
  EXPECT_GE(srv.stats()[ringrpc::server_counter::reads_paused], 1u);
  {
    std::lock_guard lock(mu);
    open = true;
  }
  cv.notify_all();
  for (auto& f : calls) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(entered.load(), 12);
}

// A peer that sends calls and never reads the replies is shed after write_stall_timeout; its
// calls are cancelled and the memory goes back.
TEST(stalled_peers, a_peer_that_never_reads_is_shed) {
  server_options o = base_options();
  o.write_stall_timeout = 300ms;
  o.max_queued_reply_bytes = 64 * 1024;
  o.socket_send_buffer_bytes = 16 * 1024;  // so the kernel cannot absorb every reply
  server srv(o);
  test::start_with_builtins(srv);
  raw_socket s(srv.port(), /*rcvbuf=*/4096);
  const std::string payload(32 * 1024, 'p');
  for (std::uint64_t id = 1; id <= 64; ++id) {
    if (!s.send_frame(test::request(id, "echo", payload))) break;  // the server stopped reading
  }
  ASSERT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::connections_write_stalled] == 1; }))
      << "write-stalled: " << srv.stats()[ringrpc::server_counter::connections_write_stalled];
  EXPECT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::connections_open] == 0; }));
  EXPECT_TRUE(eventually([&] { return srv.stats()[ringrpc::server_counter::buffered_bytes] < 256 * 1024; }))
      << srv.stats()[ringrpc::server_counter::buffered_bytes];
  auto c = client::connect("127.0.0.1", srv.port());
  EXPECT_TRUE(c.call("echo", std::string_view("others are fine")).ok());
  EXPECT_NE(metrics_text(srv).find("ringrpc_connections_shed_total{reason=\"write_stall\"} 1"),
            std::string::npos);
}

// Part of a frame and then silence: the connection is closed after frame_stall_timeout.
TEST(stalled_peers, a_slow_drip_frame_is_shed) {
  server_options o = base_options();
  o.frame_stall_timeout = 300ms;
  server srv(o);
  test::start_with_builtins(srv);
  raw_socket s(srv.port(), 0, 10s);
  auto part = prefix_claiming(1000);
  part.resize(4 + 10, std::byte{1});
  ASSERT_TRUE(s.send_all(part));
  EXPECT_TRUE(s.wait_eof());
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::connections_frame_stalled], 1u);
  // A connection that sends nothing at all is not a stalled frame (idle_timeout's business).
  raw_socket quiet(srv.port());
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::connections_frame_stalled], 1u);
  EXPECT_EQ(srv.stats()[ringrpc::server_counter::connections_open], 1u);
}

// Out of memory: with the address space capped, big frames from many peers make allocations
// fail. Each failure costs one call or one connection; the server keeps serving. Not under
// sanitizers: their runtimes reserve more address space than such a cap allows.
TEST(out_of_memory, allocation_failures_fail_calls_not_the_server) {
  if (sanitized) GTEST_SKIP() << "address-space caps do not work under sanitizers";
  server_options o = base_options();
  o.max_buffered_bytes = std::size_t{1} << 40;  // no budget: let the allocations fail instead
  o.max_frame_bytes = 32u << 20;
  server srv(o);
  test::start_with_builtins(srv);
  auto healthy = client::connect("127.0.0.1", srv.port());
  ASSERT_TRUE(healthy.call("echo", std::string_view("before")).ok());

  constexpr int peers = 24;
  constexpr std::uint32_t body = 24u << 20;
  // One frame's bytes, made before the cap; the prefix claims `body` and the body is garbage,
  // which is answered BAD_REQUEST once whole — the allocations on the way are what matter.
  std::vector<std::byte> frame = prefix_claiming(body);
  frame.resize(4 + body, std::byte{0x33});
  std::vector<std::unique_ptr<raw_socket>> socks;
  for (int i = 0; i < peers; ++i) socks.push_back(std::make_unique<raw_socket>(srv.port(), 0, 2s));
  // The senders exist before the cap: their stacks must not count against it.
  std::atomic<bool> go{false};
  std::vector<std::thread> senders;
  for (auto& s : socks) {
    senders.emplace_back([&frame, &go, sock = s.get()] {
      while (!go.load()) std::this_thread::sleep_for(1ms);
      (void)sock->send_all(frame);
    });
  }

  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &old), 0);
  std::size_t vm_pages = 0;
  {
    std::ifstream statm("/proc/self/statm");
    statm >> vm_pages;
  }
  const std::size_t vm = vm_pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  rlimit capped = old;
  capped.rlim_cur = vm + (256u << 20);  // room for ~10 of the 24 frames at most
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &capped), 0);
  go.store(true);
  for (auto& t : senders) t.join();
  const bool failed_some = eventually([&] { return srv.stats()[ringrpc::server_counter::out_of_memory] > 0; }, 10s);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_TRUE(failed_some) << "no allocation failed: the test did not test anything";
  socks.clear();
  const auto r = healthy.call("echo", std::string_view("after"), within(10s));
  EXPECT_TRUE(r.ok()) << to_string(r.error) << " " << r.message;
  auto fresh = client::connect("127.0.0.1", srv.port());
  EXPECT_TRUE(fresh.call("echo", std::string_view("new")).ok());
}

}  // namespace
}  // namespace ringrpc

// Regressions for stop() and pause/resume races found in review: each of these once hung or
// lost replies.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;

// With a tiny in-flight cap every call pauses the connection; a resume that overtakes the
// cancelled receive once left the connection unread forever.
TEST(backpressure, pause_and_resume_never_strand_a_connection) {
  for (unsigned inflight : {1u, 2u, 8u}) {
    server_options o = test::threads(1, 2);
    o.max_inflight_per_connection = inflight;
    server s(o);
    test::start_with_builtins(s);
    auto c = client::connect("127.0.0.1", s.port());
    std::atomic<int> ok{0}, failed{0};
    for (int round = 0; round < 150; ++round) {
      std::atomic<int> left{64};
      for (int i = 0; i < 64; ++i) {
        call_options co;
        co.timeout = std::chrono::seconds(5);
        c.call_async("echo", bytes_of("hello"), [&](const call_outcome& out) {
          (out.ok() ? ok : failed)++;
          left--;
          left.notify_one();
        }, co);
      }
      for (int v = left.load(); v != 0; v = left.load()) left.wait(v);
      ASSERT_EQ(failed.load(), 0) << "inflight cap " << inflight << ", round " << round;
    }
    EXPECT_EQ(ok.load(), 150 * 64);
    EXPECT_GT(s.stats()[ringrpc::server_counter::reads_paused], 0u);
  }
}

// A peer that half-closes and never reads keeps the responder's write pending; stop() must
// still finish.
TEST(shutdown, stop_finishes_with_a_half_closed_peer_that_never_reads) {
  server_options o = test::threads(1, 2);
  o.socket_send_buffer_bytes = 4096;
  o.drain_timeout = std::chrono::milliseconds(300);
  server s(o);
  test::start_with_builtins(s);
  test::raw_socket sock(s.port(), 4096);
  const std::string big(100000, 'x');
  for (std::uint64_t i = 1; i <= 10; ++i) ASSERT_TRUE(sock.send_frame(test::request(i, "echo", big)));
  ::shutdown(sock.fd(), SHUT_WR);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto stopped = std::async(std::launch::async, [&] { s.stop(); });
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "stop() hangs";
}

// Calls still queued when the drain timeout passes are answered SHUTTING_DOWN, not dropped.
TEST(shutdown, calls_queued_past_the_drain_timeout_get_shutting_down) {
  server_options o = test::threads(1, 1);
  o.drain_timeout = std::chrono::milliseconds(200);
  server s(o);
  test::start_with_builtins(s);
  auto c = client::connect("127.0.0.1", s.port());
  std::vector<std::future<call_result>> f;
  f.push_back(c.call_future("sleep", bytes_of("1000000")));
  for (int i = 0; i < 3; ++i) f.push_back(c.call_future("echo", bytes_of("x")));
  while (s.stats()[ringrpc::server_counter::calls_received] < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.stop();
  int shutting_down = 0;
  for (auto& x : f) {
    const auto r = x.get();
    if (r.error == call_error::server_status && r.code == status::shutting_down) ++shutting_down;
  }
  EXPECT_GE(shutting_down, 3);  // the queued echoes; the running sleep may finish or not
}

// The last handle of a private runtime dropped inside its own callback.
TEST(client_lifetime, client_destroyed_inside_its_own_callback) {
  server s(test::threads(1, 1));
  test::start_with_builtins(s);
  auto c = std::make_unique<client>(client::connect("127.0.0.1", s.port()));
  std::promise<void> done;
  std::promise<void> issued;  // the contract: no call may still be returning when it is closed
  auto issued_f = issued.get_future().share();
  client* raw = c.release();
  raw->call_async("echo", bytes_of("x"), [raw, &done, issued_f](const call_outcome&) {
    issued_f.wait();
    delete raw;  // closes the client and drops the runtime's last handle on its own thread
    done.set_value();
  });
  issued.set_value();
  EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace ringrpc

// Malformed and hostile input: each case gets its defined outcome, and the server and its other
// connections keep working.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using test::raw_socket;

class bad_input : public ::testing::Test {
 protected:
  void SetUp() override {
    server_options o = test::threads(2, 2);
    o.max_frame_bytes = 1 << 20;
    o.max_queued_reply_bytes = 256 * 1024;
    o.max_inflight_per_connection = 64;
    srv = test::builtin_server(o);
    healthy.emplace(client::connect("127.0.0.1", srv->port()));
  }

  // The other connection, and a brand-new one, still get answers.
  void expect_server_healthy() {
    const auto r = healthy->call("echo", std::string_view("alive"));
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.payload_string(), "alive");
    auto fresh = client::connect("127.0.0.1", srv->port());
    EXPECT_TRUE(fresh.call("echo", std::string_view("new")).ok());
  }

  std::unique_ptr<server> srv;
  std::optional<client> healthy;
};

TEST_F(bad_input, oversized_length_prefix_gets_frame_too_large_then_close) {
  raw_socket s(srv->port());
  const std::byte huge[4] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}, std::byte{0x7f}};
  ASSERT_TRUE(s.send_all(huge));
  std::vector<std::byte> storage;
  detail::frame_view v;
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.kind, wire::Kind::Error);
  EXPECT_EQ(v.code, status::frame_too_large);
  EXPECT_NE(v.message.find("max_frame_bytes"), std::string_view::npos);
  EXPECT_TRUE(s.wait_eof());
  expect_server_healthy();
}

TEST_F(bad_input, corrupt_body_with_readable_id_gets_bad_request) {
  raw_socket s(srv->port());
  detail::frame_encoder enc;
  const std::string payload(64, 'p');
  auto f = enc.encode(test::request(42, "echo", payload));
  std::vector<std::byte> frame(f.begin(), f.end());
  // Make the payload vector claim far more bytes than the frame holds.
  auto it = std::search(frame.begin(), frame.end(), reinterpret_cast<const std::byte*>(payload.data()),
                        reinterpret_cast<const std::byte*>(payload.data()) + payload.size());
  ASSERT_NE(it, frame.end());
  const auto len_at = static_cast<std::size_t>(it - frame.begin()) - 4;
  frame[len_at + 2] = std::byte{0x7f};
  ASSERT_TRUE(s.send_all(frame));
  std::vector<std::byte> storage;
  detail::frame_view v;
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.call_id, 42u);
  EXPECT_EQ(v.code, status::bad_request);
  // The connection survives a frame it could still delimit.
  ASSERT_TRUE(s.send_frame(test::request(43, "echo", "ok")));
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.call_id, 43u);
  EXPECT_EQ(v.code, status::ok);
  expect_server_healthy();
}

TEST_F(bad_input, garbage_without_readable_id_closes_only_that_connection) {
  raw_socket s(srv->port());
  std::vector<std::byte> junk(4 + 32, std::byte{0xee});
  junk[0] = std::byte{32};
  junk[1] = junk[2] = junk[3] = std::byte{0};
  ASSERT_TRUE(s.send_all(junk));
  EXPECT_TRUE(s.wait_eof());
  expect_server_healthy();
  EXPECT_GE(srv->stats()[ringrpc::server_counter::bad_frames], 1u);
}

TEST_F(bad_input, unknown_method_gets_unknown_method) {
  const auto r = healthy->call("no.such.method", std::string_view("x"));
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::unknown_method);
  EXPECT_NE(r.message.find("no.such.method"), std::string::npos);
  expect_server_healthy();
}

TEST_F(bad_input, truncated_frame_then_eof_is_counted_and_harmless) {
  const auto before = srv->stats()[ringrpc::server_counter::bad_frames];
  {
    raw_socket s(srv->port());
    detail::frame_encoder enc;
    auto f = enc.encode(test::request(1, "echo", "truncated"));
    ASSERT_TRUE(s.send_all(f.first(f.size() - 5)));
    ::shutdown(s.fd(), SHUT_WR);
    EXPECT_TRUE(s.wait_eof());
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (srv->stats()[ringrpc::server_counter::bad_frames] == before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::bad_frames], before + 1);
  expect_server_healthy();
}

TEST_F(bad_input, connect_and_send_nothing) {
  std::vector<std::unique_ptr<raw_socket>> idle;
  for (int i = 0; i < 50; ++i) idle.push_back(std::make_unique<raw_socket>(srv->port()));
  expect_server_healthy();
  idle.clear();
  expect_server_healthy();
}

TEST_F(bad_input, client_that_never_reads_is_paused_not_buffered_forever) {
  raw_socket s(srv->port(), 4096);
  const std::string payload(64 * 1024, 'z');
  detail::frame_encoder enc;
  // Send far more replies' worth than the reply cap (256 KiB) and never read; the sends
  // eventually block once the server stops reading, so do it from a thread with a deadline.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t id = 1; id <= 400 && !stop.load(); ++id) {
      auto f = enc.encode(test::request(id, "echo", payload));
      timeval tv{0, 200'000};
      ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (!s.send_all(f)) break;
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (srv->stats()[ringrpc::server_counter::reads_paused] == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  writer.join();
  EXPECT_GT(srv->stats()[ringrpc::server_counter::reads_paused], 0u);
  // Received calls are bounded by what the caps allow, not by what the client sent.
  EXPECT_LT(srv->stats()[ringrpc::server_counter::calls_received], 400u);
  expect_server_healthy();
}

TEST_F(bad_input, client_vanishing_with_calls_in_flight) {
  {
    auto c = client::connect("127.0.0.1", srv->port());
    for (int i = 0; i < 10; ++i) c.call_async("sleep", bytes_of("50000"), [](const call_outcome&) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }  // closed with the calls still running
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (srv->stats()[ringrpc::server_counter::connections_open] > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::connections_open], 1u);  // only `healthy` is left
  expect_server_healthy();
}

TEST_F(bad_input, client_frames_of_server_kinds_are_rejected) {
  raw_socket s(srv->port());
  detail::frame_view f;
  f.call_id = 5;
  f.kind = wire::Kind::Reply;
  ASSERT_TRUE(s.send_frame(f));
  std::vector<std::byte> storage;
  detail::frame_view v;
  ASSERT_TRUE(s.read_frame(v, storage));
  EXPECT_EQ(v.call_id, 5u);
  EXPECT_EQ(v.code, status::bad_request);
}

}  // namespace
}  // namespace ringrpc

// The client library's typed errors, futures, callbacks and deadlines.

#include <gtest/gtest.h>
#include <netinet/in.h>

#include <atomic>
#include <thread>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;

std::unique_ptr<server> echo_server(unsigned handlers = 2) {
  server_options o;
  o.readers = 1;
  o.handlers = handlers;
  auto s = std::make_unique<server>(o);
  add_builtin_methods(*s);
  s->start();
  return s;
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
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = c.call("sleep", bytes_of("500000"), o);
  EXPECT_EQ(r.error, call_error::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(450));
  // The late reply is dropped; the connection stays usable.
  EXPECT_TRUE(c.call("echo", bytes_of("after")).ok());
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

}  // namespace
}  // namespace ringrpc

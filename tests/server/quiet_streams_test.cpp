// Quiet streams (docs/operations.md, "Streams"): a stream may say nothing for longer than the
// idle timeout and stays open, while a connection with nothing open is still closed when idle;
// a vanished peer is left to TCP keepalive, which a connection gets at its first stream, on
// both ends, with the timings the docs give. A real server and client on loopback; the
// sockets' options are read back from this process's own fds.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/server.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;

struct keepalive {
  int on = -1, idle = -1, interval = -1, count = -1;
};

int option(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

std::uint16_t port_of(const sockaddr_storage& a) {
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(a).sin6_port
                                       : reinterpret_cast<const sockaddr_in&>(a).sin_port);
}

// The keepalive settings of this process's connected TCP socket whose local port is `local`
// (the server's end: the listening port; the client's: the server as peer); nullopt if none.
std::optional<keepalive> keepalive_of_socket(std::uint16_t local, std::uint16_t peer) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    sockaddr_storage mine{}, theirs{};
    socklen_t a = sizeof mine, b = sizeof theirs;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &a) != 0) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &b) != 0) continue;
    if ((local != 0 && port_of(mine) != local) || (peer != 0 && port_of(theirs) != peer)) continue;
    return keepalive{option(fd, SOL_SOCKET, SO_KEEPALIVE), option(fd, IPPROTO_TCP, TCP_KEEPIDLE),
                     option(fd, IPPROTO_TCP, TCP_KEEPINTVL), option(fd, IPPROTO_TCP, TCP_KEEPCNT)};
  }
  return std::nullopt;
}

class quiet_streams : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds idle) {
    server_options o = test::threads(1, 2);
    o.idle_timeout = idle;
    srv = std::make_unique<server>(o);
    srv->add_stream_method("echo_stream", stream_kind::bidi,
                           [](server_stream&, std::span<const std::byte>) { return std::make_unique<test::echo_handler>(); });
    srv->add_method("unary", [](call_context& ctx) { ctx.reply(std::string_view("u")); });
    srv->start();
  }
  void TearDown() override {
    if (srv) srv->stop();
  }
  std::unique_ptr<server> srv;
};

TEST_F(quiet_streams, a_silent_stream_outlives_the_idle_timeout_and_an_idle_connection_does_not) {
  start(300ms);
  client streaming = client::connect("127.0.0.1", srv->port());
  client_stream s = streaming.open_stream("echo_stream", stream_kind::bidi);
  ASSERT_EQ(s.write("first"), write_result::ok);
  ASSERT_EQ(test::text_of(std::span<const std::byte>(*s.read(10s))), "first");
  client calling = client::connect("127.0.0.1", srv->port());
  ASSERT_TRUE(calling.call("unary", "x", test::within(10s)).ok());
  // Both say nothing for many idle timeouts: the connection without a stream is closed.
  EXPECT_TRUE(test::eventually([&] { return srv->stats()[server_counter::connections_idle_closed] == 1; }))
      << "the idle timeout never closed the connection that had nothing open";
  std::this_thread::sleep_for(1s);  // more idle timeouts for the stream's connection to outlive
  EXPECT_EQ(srv->stats()[server_counter::connections_idle_closed], 1u);
  EXPECT_FALSE(s.ended());
  ASSERT_EQ(s.write("after the silence"), write_result::ok);
  const auto echoed = s.read(10s);
  ASSERT_TRUE(echoed.has_value()) << s.finish().message;
  EXPECT_EQ(test::text_of(std::span<const std::byte>(*echoed)), "after the silence");
  EXPECT_TRUE(s.half_close());
  EXPECT_TRUE(s.finish(10s).ok());
}

TEST_F(quiet_streams, the_first_stream_turns_tcp_keepalive_on_at_both_ends) {
  start(100s);
  client c = client::connect("127.0.0.1", srv->port());
  ASSERT_TRUE(c.call("unary", "x", test::within(10s)).ok());
  const auto server_end_before = keepalive_of_socket(srv->port(), 0);
  ASSERT_TRUE(server_end_before.has_value());
  EXPECT_EQ(server_end_before->on, 0) << "calls alone need no keepalive: their deadlines end them";
  client_stream s = c.open_stream("echo_stream", stream_kind::bidi);
  ASSERT_EQ(s.write("m"), write_result::ok);
  ASSERT_TRUE(s.read(10s).has_value());  // the server has opened it
  // The server's end: probes after half of idle_timeout, five more in the other half.
  const auto server_end = keepalive_of_socket(srv->port(), 0);
  ASSERT_TRUE(server_end.has_value());
  EXPECT_EQ(server_end->on, 1);
  EXPECT_EQ(server_end->idle, 50);
  EXPECT_EQ(server_end->interval, 10);
  EXPECT_EQ(server_end->count, 5);
  // The client's end: a minute, then 6 probes 10 s apart.
  const auto client_end = keepalive_of_socket(0, srv->port());
  ASSERT_TRUE(client_end.has_value());
  EXPECT_EQ(client_end->on, 1);
  EXPECT_EQ(client_end->idle, 60);
  EXPECT_EQ(client_end->interval, 10);
  EXPECT_EQ(client_end->count, 6);
}

TEST_F(quiet_streams, no_idle_timeout_asks_for_no_keepalive_on_the_server) {
  start(0ms);
  client c = client::connect("127.0.0.1", srv->port());
  client_stream s = c.open_stream("echo_stream", stream_kind::bidi);
  ASSERT_EQ(s.write("m"), write_result::ok);
  ASSERT_TRUE(s.read(10s).has_value());
  const auto server_end = keepalive_of_socket(srv->port(), 0);
  ASSERT_TRUE(server_end.has_value());
  EXPECT_EQ(server_end->on, 0) << "idle_timeout 0 means never close: no probes either";
}

}  // namespace
}  // namespace ringrpc

// Stream caps as server_options (max_streams_per_connection, max_streams_per_address,
// max_streams) and the stream families of /metrics (docs/operations.md, "Streams" and
// "Metrics"): a real server and real clients on loopback. Each cap is set small here, so a test
// fails if the option is not the one that bounds.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/server.hpp"
#include "server/address_streams.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;

class stream_limits : public ::testing::Test {
 protected:
  void start(server_options o) {
    srv = std::make_unique<server>(o);
    srv->add_stream_method("echo_stream", stream_kind::bidi,
                           [](server_stream&, std::span<const std::byte>) { return std::make_unique<test::echo_handler>(); });
    srv->add_stream_method("count", stream_kind::server, [](server_stream& s, std::span<const std::byte> r) {
      auto h = std::make_unique<test::count_handler>(std::stoi(std::string(test::text_of(r))));
      h->start(s);
      return h;
    });
    srv->start();
  }
  void TearDown() override {
    if (srv) srv->stop();
  }
  // An echo stream that the server has opened (one message there and back).
  client_stream open_echo(client& c) {
    client_stream s = c.open_stream("echo_stream", stream_kind::bidi);
    EXPECT_EQ(s.write("m"), write_result::ok);
    const auto back = s.read(10s);
    EXPECT_TRUE(back.has_value()) << s.finish(10s).message;
    return s;
  }
  // An open the server refuses: its end, with the message naming the cap.
  call_result refused_echo(client& c) {
    client_stream s = c.open_stream("echo_stream", stream_kind::bidi);
    return s.finish(10s);
  }
  std::uint64_t count(server_counter which) { return srv->stats()[which]; }

  std::unique_ptr<server> srv;
};

TEST_F(stream_limits, max_streams_per_connection_bounds_one_connection_not_the_next) {
  server_options o = test::threads(1, 2);
  o.max_streams_per_connection = 2;
  start(o);
  client a = client::connect("127.0.0.1", srv->port());
  client_stream one = open_echo(a);
  client_stream two = open_echo(a);
  const call_result third = refused_echo(a);
  EXPECT_EQ(third.code, status::server_busy);
  EXPECT_EQ(third.message, "connection has 2 open streams (max_streams_per_connection 2)");
  EXPECT_EQ(count(server_counter::streams_refused_per_connection), 1u);
  client b = client::connect("127.0.0.1", srv->port());
  client_stream other = open_echo(b);  // another connection has its own two
  EXPECT_FALSE(other.ended());
  // An end gives the slot back.
  EXPECT_TRUE(one.half_close());
  EXPECT_TRUE(one.finish(10s).ok());
  client_stream again = open_echo(a);
  EXPECT_FALSE(again.ended());
}

TEST_F(stream_limits, max_inflight_per_connection_still_bounds_below_the_stream_cap) {
  server_options o = test::threads(1, 2);
  o.max_inflight_per_connection = 3;
  o.max_streams_per_connection = 0;  // no cap of its own: max_inflight_per_connection - 1 alone
  start(o);
  client a = client::connect("127.0.0.1", srv->port());
  client_stream one = open_echo(a);
  client_stream two = open_echo(a);
  const call_result third = refused_echo(a);
  EXPECT_EQ(third.code, status::server_busy);
  EXPECT_EQ(third.message, "connection has 2 open streams (max_inflight_per_connection 3)");
}

TEST_F(stream_limits, max_streams_per_address_bounds_all_connections_of_one_host) {
  server_options o = test::threads(1, 2);
  o.max_streams_per_address = 3;
  start(o);
  client a = client::connect("127.0.0.1", srv->port());
  client b = client::connect("127.0.0.1", srv->port());
  client_stream a1 = open_echo(a);
  client_stream a2 = open_echo(a);
  client_stream b1 = open_echo(b);
  const call_result refused = refused_echo(b);  // b has one open: the address has three
  EXPECT_EQ(refused.code, status::server_busy);
  EXPECT_EQ(refused.message, "server has max_streams_per_address (3) open streams from 127.0.0.1");
  EXPECT_EQ(count(server_counter::streams_refused_per_address), 1u);
  EXPECT_EQ(count(server_counter::streams_open), 3u);
  // The refused open took nothing: after one end there is room for exactly one.
  a1.cancel();
  ASSERT_TRUE(test::eventually([&] { return count(server_counter::streams_open) == 2; }));
  client_stream b2 = open_echo(b);
  EXPECT_FALSE(b2.ended());
  EXPECT_EQ(refused_echo(a).code, status::server_busy);
  // Connections that close give their address's streams back.
  a.close();
  b.close();
  ASSERT_TRUE(test::eventually([&] { return count(server_counter::streams_open) == 0; }));
  client c = client::connect("127.0.0.1", srv->port());
  std::vector<client_stream> three;
  for (int i = 0; i < 3; ++i) three.push_back(open_echo(c));
  EXPECT_EQ(count(server_counter::streams_open), 3u);
}

TEST_F(stream_limits, max_streams_bounds_the_whole_server) {
  server_options o = test::threads(1, 2);
  o.max_streams = 2;
  o.max_streams_per_address = 10;  // above max_streams: the server's cap is the one met
  start(o);
  client a = client::connect("127.0.0.1", srv->port());
  client b = client::connect("127.0.0.1", srv->port());
  client_stream a1 = open_echo(a);
  client_stream b1 = open_echo(b);
  const call_result refused = refused_echo(b);
  EXPECT_EQ(refused.code, status::server_busy);
  EXPECT_EQ(refused.message, "server has 2 open streams (max_streams)");
  EXPECT_EQ(count(server_counter::streams_refused_server), 1u);
  EXPECT_EQ(count(server_counter::calls_rejected_busy), 1u);
}

TEST_F(stream_limits, the_default_per_address_cap_is_ninety_percent_of_max_streams) {
  server_options o = test::threads(1, 2);
  o.max_streams = 20;
  start(o);
  client c = client::connect("127.0.0.1", srv->port());
  std::vector<client_stream> open;
  for (int i = 0; i < 18; ++i) open.push_back(open_echo(c));
  const call_result refused = refused_echo(c);
  EXPECT_EQ(refused.message, "server has max_streams_per_address (18) open streams from 127.0.0.1");
}

TEST_F(stream_limits, metrics_count_streams_messages_and_stalls) {
  start(test::threads(1, 2));
  client c = client::connect("127.0.0.1", srv->port());
  client_stream s = open_echo(c);
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(s.write("x"), write_result::ok);
    ASSERT_TRUE(s.read(10s).has_value());
  }
  // A server stream of 100 messages that nobody reads: past the client's window (16), the
  // handler's writes stall on credit.
  client_stream unread = c.open_stream("count", stream_kind::server, std::as_bytes(std::span("100", 3)));
  ASSERT_TRUE(test::eventually([&] { return count(server_counter::stream_writes_blocked_credit) >= 1; }));
  // Counted by the shard once the stream is handed to its pool, where the handler may run first.
  EXPECT_TRUE(test::eventually([&] { return count(server_counter::streams_opened) == 2u; }))
      << count(server_counter::streams_opened);
  EXPECT_EQ(count(server_counter::streams_open), 2u);
  EXPECT_EQ(count(server_counter::stream_messages_received), 10u);
  ASSERT_TRUE(test::eventually([&] { return count(server_counter::stream_messages_sent) >= 10 + 16; }));
  EXPECT_LT(count(server_counter::stream_messages_sent), 10u + 100u);
  EXPECT_EQ(count(server_counter::stream_writes_blocked_buffer), 0u);
  const std::string page = metrics_text(*srv);
  EXPECT_NE(page.find("ringrpc_open_streams 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ringrpc_streams_opened_total 2\n"), std::string::npos);
  EXPECT_NE(page.find("ringrpc_stream_messages_total{direction=\"received\"} 10\n"), std::string::npos);
  EXPECT_NE(page.find("ringrpc_stream_writes_blocked_total{reason=\"credit\"}"), std::string::npos);
  EXPECT_NE(page.find("ringrpc_streams_refused_total{reason=\"per_address\"} 0\n"), std::string::npos);
  // Reading returns credit and the rest flows.
  int read = 0;
  while (read < 100 && unread.read(10s).has_value()) ++read;
  EXPECT_EQ(read, 100);
  EXPECT_TRUE(unread.finish(10s).ok());
  ASSERT_TRUE(test::eventually([&] { return count(server_counter::streams_open) == 1; }));
  // Counted when the reader reaps the send, which may come after the client has read it.
  EXPECT_TRUE(test::eventually([&] { return count(server_counter::stream_messages_sent) == 10u + 100u; }))
      << count(server_counter::stream_messages_sent);
}

TEST_F(stream_limits, invalid_max_streams_is_refused_at_start) {
  server_options o = test::threads(1, 1);
  o.max_streams = 0;
  server s(o);
  EXPECT_THROW(s.start(), std::invalid_argument);
}

// The per-address table itself: hosts are counted apart, a counter lives while anyone holds it,
// and dead entries are forgotten as the table grows.
TEST(address_streams, hosts_are_counted_apart_and_forgotten_when_unused) {
  detail::address_streams table;
  auto a = table.of("10.0.0.1");
  auto b = table.of("10.0.0.2");
  ASSERT_TRUE(a->take(1));
  EXPECT_FALSE(a->take(1));
  EXPECT_TRUE(b->take(1));
  EXPECT_EQ(table.of("10.0.0.1"), a);
  EXPECT_EQ(table.open_from("10.0.0.1"), 1u);
  a->give_back();
  EXPECT_EQ(table.open_from("10.0.0.1"), 0u);
  b.reset();
  EXPECT_EQ(table.open_from("10.0.0.2"), 0u);  // nobody held it: a new, empty counter
  for (int i = 0; i < 1000; ++i) (void)table.of("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250));
  EXPECT_EQ(table.open_from("10.0.0.1"), 0u);
  ASSERT_TRUE(a->take(5));
  EXPECT_EQ(table.open_from("10.0.0.1"), 1u);  // still the held one after pruning
}

}  // namespace
}  // namespace ringrpc

// Streams on the client (ringrpc/client_stream.hpp, docs/design/streams.md): a real server on
// loopback with stream methods, and scripted fakes for what a real server would not do (an old
// server, a connection that drops).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/peer_identity.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;

using test::text_of;
std::string text_of(const std::vector<std::byte>& b) { return text_of(std::span<const std::byte>(b)); }
std::string text_of(const std::optional<std::vector<std::byte>>& m) { return m ? text_of(*m) : "<none>"; }

const std::string* find(const std::vector<metadata_entry>& list, std::string_view key) {
  for (const auto& e : list) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

// --- the handlers (as tests/server/streams_test.cpp's)

using test::count_handler;
using test::echo_handler;
using test::sum_handler;
using test::watch;
using test::watch_handler;

// How often "count" waited for credit.
struct count_state {
  std::atomic<int> blocked{0};
};

class client_streams : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = std::make_unique<server>(test::threads(1, 2));
    srv->add_stream_method("count", stream_kind::server, [this](server_stream& s, std::span<const std::byte> req) {
      int n = 0;
      std::size_t bytes = 0;
      std::sscanf(text_of(req).c_str(), "%d %zu", &n, &bytes);
      auto h = std::make_unique<count_handler>(n, bytes, &counted.blocked);
      h->start(s);
      return h;
    });
    srv->add_stream_method("sum", stream_kind::client, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<sum_handler>();
    });
    srv->add_stream_method("echo_stream", stream_kind::bidi, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<echo_handler>();
    });
    srv->add_stream_method("watch", stream_kind::bidi, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<watch_handler>(watched);
    });
    srv->add_stream_method("fails", stream_kind::server, [](server_stream& s, std::span<const std::byte>) {
      EXPECT_TRUE(s.add_header("h", "1"));
      EXPECT_EQ(s.write("a"), write_result::ok);
      EXPECT_EQ(s.write("b"), write_result::ok);
      EXPECT_TRUE(s.add_trailer("t", "2"));
      s.fail(status::permission_denied, "not for you");
      return std::make_unique<stream_handler>();
    });
    srv->add_method("unary", [](call_context& ctx) { ctx.reply(std::string_view("u")); });
    srv->start();
    c.emplace(client::connect("127.0.0.1", srv->port()));
  }
  void TearDown() override {
    c.reset();
    srv->stop();
  }

  count_state counted;
  watch watched;
  std::unique_ptr<server> srv;
  std::optional<client> c;
};

TEST_F(client_streams, a_server_stream_delivers_100000_messages_in_order) {
  constexpr int n = test::sanitized ? 20'000 : 100'000;
  client_stream s = c->open_stream("count", stream_kind::server, bytes_of(std::to_string(n)));
  EXPECT_NE(s.id(), 0u);
  for (int i = 0; i < n; ++i) {
    const auto m = s.read(10s);
    ASSERT_TRUE(m) << "message " << i << ": " << s.finish().message;
    ASSERT_EQ(text_of(*m), std::to_string(i));
  }
  EXPECT_FALSE(s.read(10s));  // the end: every message came before it
  const call_result r = s.finish(10s);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.code, status::ok);
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.write("x"), write_result::closed);
}

TEST_F(client_streams, a_client_stream_is_answered_after_the_half_close) {
  client_stream s = c->open_stream("sum", stream_kind::client);
  std::size_t bytes = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string m(static_cast<std::size_t>(i % 50), 'x');
    bytes += m.size();
    ASSERT_EQ(s.write_wait(m, 10s), write_result::ok) << i;
  }
  EXPECT_TRUE(s.half_close());
  EXPECT_FALSE(s.half_close());  // once
  EXPECT_EQ(s.write("late"), write_result::closed);
  const call_result r = s.finish(10s);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "sum of 1000");  // the answer (server_stream::finish(reply))
  ASSERT_NE(r.find_trailer("count"), nullptr);
  EXPECT_EQ(*r.find_trailer("count"), "1000");
  EXPECT_EQ(*r.find_trailer("bytes"), std::to_string(bytes));
}

TEST_F(client_streams, bidi_echo_keeps_order_with_credit_flowing_both_ways) {
  constexpr int n = test::sanitized ? 20'000 : 100'000;
  client_stream s = c->open_stream("echo_stream", stream_kind::bidi);
  std::atomic<int> would_block{0};
  std::thread writer([&] {
    for (int i = 0; i < n; ++i) {
      const std::string m = std::to_string(i);
      write_result r = s.write(m);
      if (r == write_result::would_block) {
        would_block.fetch_add(1);
        r = s.write_wait(m, 10s);
      }
      if (r != write_result::ok) {
        ADD_FAILURE() << "write " << i << ": " << static_cast<int>(r);
        return;
      }
    }
    s.half_close();
  });
  int read = 0;
  for (; read < n; ++read) {
    const auto m = s.read(10s);
    if (!m) break;
    if (text_of(*m) != std::to_string(read)) {
      ADD_FAILURE() << "message " << read << " is " << text_of(*m);
      break;
    }
  }
  writer.join();
  EXPECT_EQ(read, n);
  EXPECT_GT(would_block.load(), 0) << "the server's credit never ran out: credit was not exercised";
  const call_result r = s.finish(10s);
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST_F(client_streams, a_reader_that_does_not_read_holds_no_more_than_its_window) {
  constexpr std::uint64_t window_bytes = 4096;
  constexpr std::size_t message_bytes = 1000;
  constexpr int n = 200;
  stream_options o;
  o.window_messages = 8;
  o.window_bytes = window_bytes;
  client_stream s = c->open_stream("count", stream_kind::server, bytes_of(std::to_string(n) + " 1000"), o);
  // The server's writer is held back by our credit while we read nothing.
  ASSERT_TRUE(test::eventually([&] { return counted.blocked.load() > 0; }));
  EXPECT_TRUE(test::eventually([&] { return s.buffered_bytes() > 0; }));
  EXPECT_LE(s.buffered_bytes(), window_bytes + message_bytes);
  std::size_t most = 0;
  for (int i = 0; i < n; ++i) {
    most = std::max(most, s.buffered_bytes());
    const auto m = s.read(10s);
    ASSERT_TRUE(m) << i << ": " << s.finish().message;
    ASSERT_EQ(m->size(), message_bytes);
    ASSERT_EQ(text_of(*m).substr(0, text_of(*m).find('.')), std::to_string(i));
  }
  EXPECT_LE(most, window_bytes + message_bytes);
  EXPECT_TRUE(s.finish(10s).ok());
}

TEST_F(client_streams, cancel_ends_the_stream_here_and_on_the_server) {
  client_stream s = c->open_stream("watch", stream_kind::bidi);
  ASSERT_EQ(s.write("m"), write_result::ok);
  ASSERT_TRUE(test::eventually([&] { return watched.messages.load() == 1; }));
  EXPECT_TRUE(s.cancel());
  EXPECT_FALSE(s.cancel());
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.write("m"), write_result::closed);
  EXPECT_FALSE(s.read(1s));
  const call_result r = s.finish(1s);
  EXPECT_EQ(r.error, call_error::cancelled);
  EXPECT_EQ(r.code, status::cancelled);
  ASSERT_TRUE(test::eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.cancels.load(), 1);
  EXPECT_EQ(watched.final_status.load(), status::cancelled);
  // The connection is fine afterwards.
  EXPECT_TRUE(c->call("unary", "x", test::within(10s)).ok());
}

TEST_F(client_streams, destroying_an_open_handle_cancels_it) {
  {
    client_stream s = c->open_stream("watch", stream_kind::bidi);
    ASSERT_TRUE(test::eventually([&] { return watched.opens.load() == 1; }));
  }
  ASSERT_TRUE(test::eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.final_status.load(), status::cancelled);
  // The move-assignment over an open handle cancels it too.
  client_stream s = c->open_stream("watch", stream_kind::bidi);
  ASSERT_TRUE(test::eventually([&] { return watched.opens.load() == 2; }));
  s = client_stream();
  ASSERT_TRUE(test::eventually([&] { return watched.dones.load() == 2; }));
}

TEST_F(client_streams, a_server_error_ends_the_stream_after_its_messages) {
  client_stream s = c->open_stream("fails", stream_kind::server);
  EXPECT_EQ(text_of(s.read(10s)), "a");
  EXPECT_EQ(text_of(s.read(10s)), "b");
  EXPECT_FALSE(s.read(10s));
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::permission_denied);
  EXPECT_EQ(r.message, "not for you");
  ASSERT_NE(r.find_header("h"), nullptr);
  EXPECT_EQ(*r.find_header("h"), "1");
  ASSERT_NE(r.find_trailer("t"), nullptr);
  EXPECT_EQ(*r.find_trailer("t"), "2");
  const auto headers = s.headers();
  ASSERT_NE(find(headers, "h"), nullptr);
}

TEST_F(client_streams, the_deadline_ends_the_stream_on_both_sides) {
  stream_options o;
  o.timeout = 200ms;
  client_stream s = c->open_stream("watch", stream_kind::bidi, {}, o);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.read(30s));  // woken by the end, long before 30 s
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  const call_result r = s.finish(1s);
  // Ours, as a rule; the server's own (it counts from the open's arrival) if this thread was late.
  EXPECT_TRUE(r.error == call_error::timeout || r.error == call_error::server_status) << to_string(r.error);
  EXPECT_EQ(r.code, status::deadline_exceeded);
  ASSERT_TRUE(test::eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_NE(watched.final_status.load(), status::ok);
  // An expired deadline opens nothing.
  o.timeout = -1us;
  client_stream late = c->open_stream("watch", stream_kind::bidi, {}, o);
  EXPECT_TRUE(late.ended());
  EXPECT_EQ(late.finish().code, status::deadline_exceeded);
}

TEST_F(client_streams, finish_discards_unread_messages_and_cancels_at_its_timeout) {
  client_stream all = c->open_stream("count", stream_kind::server, bytes_of("1000"));
  EXPECT_TRUE(all.finish(10s).ok());  // 1000 messages it never read, credit given back
  client_stream open = c->open_stream("watch", stream_kind::bidi);
  const call_result r = open.finish(100ms);
  EXPECT_EQ(r.error, call_error::timeout);
  EXPECT_TRUE(open.ended());
  ASSERT_TRUE(test::eventually([&] { return watched.dones.load() == 1; }));
}

TEST_F(client_streams, streams_take_ids_and_room_from_the_calls) {
  client_options co;
  co.max_pending_calls = 2;
  client small = client::connect("127.0.0.1", srv->port(), co);
  client_stream a = small.open_stream("watch", stream_kind::bidi);
  ASSERT_TRUE(small.call("unary", "x", test::within(10s)).ok());  // takes the one id between
  client_stream b = small.open_stream("watch", stream_kind::bidi);
  EXPECT_EQ(b.id(), a.id() + 2);
  client_stream refused = small.open_stream("watch", stream_kind::bidi);
  EXPECT_TRUE(refused.ended());
  EXPECT_EQ(refused.finish().error, call_error::client_busy);
  EXPECT_EQ(small.call("unary", "x", test::within(10s)).error, call_error::client_busy);
  a.cancel();
  EXPECT_TRUE(test::eventually([&] { return small.call("unary", "x", test::within(10s)).ok(); }));
}

TEST_F(client_streams, a_stopping_server_ends_the_stream) {
  client_stream s = c->open_stream("watch", stream_kind::bidi);
  ASSERT_TRUE(test::eventually([&] { return watched.opens.load() == 1; }));
  srv->stop();
  const call_result r = s.finish(10s);
  EXPECT_FALSE(r.ok());
  // The server's end (shutting_down) usually comes first; else the connection's.
  EXPECT_TRUE(r.code == status::shutting_down || r.code == status::unavailable) << to_string(r.code);
}

TEST_F(client_streams, many_streams_from_many_threads_keep_their_own_order) {
  constexpr int threads = 4;
  constexpr int per_thread = 12;  // 48 open at once: within the server's 100 per connection
  constexpr int n = 300;
  std::vector<std::thread> readers;
  std::atomic<int> good{0};
  for (int t = 0; t < threads; ++t) {
    readers.emplace_back([&] {
      std::vector<client_stream> mine;
      for (int i = 0; i < per_thread; ++i) {
        mine.push_back(c->open_stream("count", stream_kind::server, bytes_of(std::to_string(n))));
      }
      // Round-robin: every stream is read a message at a time, so all stay open together.
      for (int m = 0; m < n; ++m) {
        for (client_stream& s : mine) {
          const auto got = s.read(10s);
          if (text_of(got) != std::to_string(m)) {
            ADD_FAILURE() << "stream " << s.id() << " message " << m << ": " << text_of(got);
            return;
          }
        }
      }
      for (client_stream& s : mine) {
        if (s.finish(10s).ok()) good.fetch_add(1);
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(good.load(), threads * per_thread);
}

TEST_F(client_streams, write_wait_times_out_without_credit_and_blocking_waits_refuse_the_runtime_thread) {
  // "watch" reads every message at once, so it never holds credit back: the fake below does.
  test::scripted_server fake;
  client cl = client::connect("127.0.0.1", fake.port());
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::bidi);
  int sent = 0;
  while (s.write("m") == write_result::ok) ++sent;
  EXPECT_EQ(sent, 16);  // the protocol's initial window: nothing granted more
  EXPECT_EQ(s.write_wait("m", 50ms), write_result::would_block);
  // A grant from the server lets the waiting writer go.
  std::thread grant([&] {
    std::this_thread::sleep_for(50ms);
    detail::frame_view g;
    g.call_id = s.id();
    g.kind = wire::Kind::StreamCredit;
    g.credit_messages = 1;
    g.credit_bytes = 100;
    fake.send_frame(g);
  });
  EXPECT_EQ(s.write_wait("m", 10s), write_result::ok);
  grant.join();
  // read/finish/write_wait on the client runtime's thread (a callback) would wait forever there.
  std::promise<std::string> seen;
  c->call_async("unary", bytes_of("x"), [&](const call_outcome&) {
    try {
      (void)s.read(1s);
      seen.set_value("returned");
    } catch (const std::logic_error& e) {
      seen.set_value(e.what());
    }
  });
  EXPECT_NE(seen.get_future().get().find("client runtime's thread"), std::string::npos);
}

TEST(client_streams_fakes, half_close_wakes_a_writer_waiting_for_credit) {
  test::scripted_server fake;
  client cl = client::connect("127.0.0.1", fake.port());
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::bidi);
  while (s.write("m") == write_result::ok) {
  }
  std::promise<write_result> got;
  std::thread writer([&] { got.set_value(s.write_wait("m", 30s)); });
  std::this_thread::sleep_for(50ms);  // most often the writer waits by now; either order must work
  EXPECT_TRUE(s.half_close());
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "write_wait slept through the half-close";
  EXPECT_EQ(f.get(), write_result::closed);
  writer.join();
}

// A server may grant any credit: what the client holds of written messages is still bounded by
// max_pending_bytes (shared with the calls), and room comes back as the bytes leave.
TEST(client_streams_fakes, written_messages_wait_within_max_pending_bytes_whatever_the_credit) {
  test::scripted_server fake;
  client_options co;
  co.max_pending_bytes = 1u << 20;
  client cl = client::connect("127.0.0.1", fake.port(), co);
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::bidi);
  ASSERT_EQ(fake.read_request(), s.id());  // the open
  detail::frame_view g;
  g.call_id = s.id();
  g.kind = wire::Kind::StreamCredit;
  g.credit_messages = 1'000'000;
  g.credit_bytes = std::uint64_t{1} << 40;
  ASSERT_TRUE(fake.send_frame(g));
  const std::string m(64 * 1024, 'w');
  // Wait for the grant, then fill: the fake reads nothing, so the socket's buffers fill and the
  // rest stays in the client. 1,000 messages (64 MiB) is far beyond the buffers and the budget.
  ASSERT_TRUE(test::eventually([&] { return s.write(m) == write_result::ok; }));
  // Until no room came for 300 ms: the loop keeps moving bytes into the socket while the
  // kernel's buffers grow, so one would_block may pass.
  int sent = 1;
  while (sent < 1000 && s.write_wait(m, 300ms) == write_result::ok) ++sent;
  EXPECT_LT(sent, 1000) << "the client buffered 64 MiB of writes with max_pending_bytes at 1 MiB";
  // The budget is shared with calls. (A starved loop may still move bytes into the socket after
  // the last would_block: then a call goes out, and the reading below skips it.)
  int calls_sent = 0;
  EXPECT_TRUE(test::eventually([&] {
    const call_result r = cl.call("unary", "x", test::within(100ms));
    if (r.error != call_error::client_busy) ++calls_sent;
    return r.error == call_error::client_busy;
  }));
  // The fake reads what was written: the bytes leave, the room comes back.
  for (int read = 0, i = 0; i < sent; ++read) {
    ASSERT_LT(read, sent + calls_sent + 1) << "the fake read " << i << " of " << sent << " stream messages";
    if (fake.read_request() == s.id()) ++i;
  }
  EXPECT_EQ(s.write_wait(m, 10s), write_result::ok);
}

// A handle may race its client's end: a thread writing, reading and half-closing while the
// client (with a runtime of its own, so the loop goes with it) is destroyed. Every operation
// either works or says the stream ended; the sanitizers see no access to the freed loop.
TEST_F(client_streams, handles_racing_the_client_destruction_touch_nothing_freed) {
  for (int round = 0; round < 20; ++round) {
    std::optional<client> own(client::connect("127.0.0.1", srv->port(), {}, client_runtime::create()));
    client_stream s = own->open_stream("echo_stream", stream_kind::bidi);
    std::atomic<bool> go{false};
    std::thread user([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 200 && !s.ended(); ++i) {
        (void)s.write("m");
        (void)s.read(std::chrono::milliseconds(0));
      }
      (void)s.half_close();
    });
    go.store(true);
    own.reset();  // closes the connection and stops the loop under the user's thread
    user.join();
    EXPECT_TRUE(s.ended());
  }
}

TEST(client_streams_fakes, response_headers_past_the_caps_end_the_stream_only) {
  test::scripted_server fake;
  client_options co;
  co.max_response_metadata_entries = 1;
  client cl = client::connect("127.0.0.1", fake.port(), co);
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::server, bytes_of("req"));
  const std::uint64_t id = fake.read_request();
  ASSERT_EQ(id, s.id());
  const std::vector<metadata_entry> two{{"a", "1"}, {"b", "2"}};
  const detail::metadata_to_send md{{}, two};
  detail::frame_view m;
  m.call_id = id;
  m.kind = wire::Kind::StreamMessage;
  m.payload = bytes_of("m");
  m.metadata_out = &md;
  ASSERT_TRUE(fake.send_frame(m));
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::protocol_error);
  EXPECT_NE(r.message.find("max_response_metadata_entries"), std::string::npos) << r.message;
  EXPECT_EQ(fake.read_request(), id);  // the Cancel
  EXPECT_TRUE(cl.connected());
}

TEST(client_streams_fakes, a_lost_connection_ends_every_stream_unavailable) {
  auto fake = std::make_unique<test::scripted_server>();
  client cl = client::connect("127.0.0.1", fake->port());
  fake->accept();
  client_stream a = cl.open_stream("x", stream_kind::bidi);
  client_stream b = cl.open_stream("y", stream_kind::server, bytes_of("req"));
  EXPECT_NE(fake->read_request(), 0u);
  EXPECT_NE(fake->read_request(), 0u);
  fake.reset();  // the server goes away
  for (client_stream* s : {&a, &b}) {
    EXPECT_FALSE(s->read(10s));
    const call_result r = s->finish(10s);
    EXPECT_EQ(r.error, call_error::connection_closed);
    EXPECT_EQ(r.code, status::unavailable);
    EXPECT_EQ(r.message.rfind("connection lost", 0), 0u) << r.message;
  }
  // Opens after it end at once.
  EXPECT_EQ(cl.open_stream("x", stream_kind::bidi).finish(10s).code, status::unavailable);
}

TEST(client_streams_fakes, an_old_server_makes_streams_unimplemented) {
  test::scripted_server fake;
  client cl = client::connect("127.0.0.1", fake.port());
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::bidi);
  EXPECT_EQ(s.write("1"), write_result::ok);  // within the initial credit: sent at once
  // What a server of before streams answers to kinds 7 and 8: an error for each id.
  for (int i = 0; i < 2; ++i) {
    const std::uint64_t id = fake.read_request();
    ASSERT_EQ(id, s.id());
    detail::frame_view e;
    e.call_id = id;
    e.kind = wire::Kind::Error;
    e.code = status::bad_request;
    e.message = "unknown frame kind";
    ASSERT_TRUE(fake.send_frame(e));
  }
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::unimplemented);
  EXPECT_EQ(r.message, "the server does not support streams");
  // The connection goes on: a unary call after it.
  auto f = cl.call_future("u", bytes_of("x"), test::within(10s));
  const std::uint64_t id = fake.read_request();
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(fake.reply(id, bytes_of("ok")));
  EXPECT_TRUE(f.get().ok());
}

TEST(client_streams_fakes, a_server_beyond_credit_ends_the_stream) {
  test::scripted_server fake;
  client cl = client::connect("127.0.0.1", fake.port());
  fake.accept();
  stream_options o;
  o.window_messages = 2;
  client_stream s = cl.open_stream("x", stream_kind::server, bytes_of("req"), o);
  const std::uint64_t id = fake.read_request();
  ASSERT_EQ(id, s.id());
  for (int i = 0; i < 3; ++i) {
    detail::frame_view m;
    m.call_id = id;
    m.kind = wire::Kind::StreamMessage;
    m.payload = bytes_of("m");
    ASSERT_TRUE(fake.send_frame(m));
  }
  ASSERT_TRUE(test::eventually([&] { return s.ended(); }));  // unread: no credit came back
  // Those within credit stay readable before the end.
  EXPECT_EQ(text_of(s.read(1s)), "m");
  EXPECT_EQ(text_of(s.read(1s)), "m");
  EXPECT_FALSE(s.read(1s));
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::protocol_error);
  EXPECT_EQ(r.code, status::resource_exhausted);
  EXPECT_EQ(fake.read_request(), id);  // the Cancel
}

TEST(client_streams_fakes, a_closed_client_ends_its_streams) {
  test::scripted_server fake;
  client cl = client::connect("127.0.0.1", fake.port());
  fake.accept();
  client_stream s = cl.open_stream("x", stream_kind::bidi);
  cl.close();
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::client_closed);
  EXPECT_EQ(s.write("x"), write_result::closed);
  EXPECT_EQ(cl.open_stream("x", stream_kind::bidi).finish().error, call_error::client_closed);
}

// What the handler learns of the open, after the open's call has gone (the factory has run):
// each message is answered with the open's metadata and the token subject the server accepted.
class who_handler final : public stream_handler {
 public:
  void on_message(server_stream& s, std::span<const std::byte>) override {
    std::string text;
    for (const metadata_entry& e : s.metadata()) text += e.key + "=" + e.value + ";";
    text += "|";
    text += s.peer() != nullptr ? s.peer()->token_subject : "<nobody>";
    (void)s.write(text);
  }
};

TEST(client_streams_identity, a_handler_sees_the_opens_metadata_and_peer_for_the_streams_life) {
  server_options o = test::threads(1, 2);
  o.bearer_tokens = {{"tok-alice-0123456789", "alice"}};
  server srv(o);
  srv.add_stream_method("who", stream_kind::bidi,
                        [](server_stream&, std::span<const std::byte>) { return std::make_unique<who_handler>(); });
  srv.start();
  client_options co;
  co.bearer_token = "tok-alice-0123456789";
  co.metadata = {{"tenant", "t7"}};
  client c = client::connect("127.0.0.1", srv.port(), co);
  stream_options so;
  so.metadata = {{"x-trace", "abc"}};
  client_stream s = c.open_stream("who", stream_kind::bidi, {}, so);
  for (int i = 0; i < 2; ++i) {  // the second long after the open's call was released
    ASSERT_EQ(s.write("?"), write_result::ok);
    const std::string got = text_of(s.read(10s));
    EXPECT_NE(got.find("tenant=t7;"), std::string::npos) << got;
    EXPECT_NE(got.find("x-trace=abc;"), std::string::npos) << got;
    EXPECT_EQ(got.substr(got.find('|')), "|alice") << got;
  }
  // A handle that names no stream says so.
  const server_stream none;
  EXPECT_TRUE(none.metadata().empty());
  EXPECT_EQ(none.peer(), nullptr);
  s.cancel();
  srv.stop();
}

}  // namespace
}  // namespace ringrpc

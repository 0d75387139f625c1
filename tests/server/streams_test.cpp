// Streams on the server (docs/design/streams.md): a real server on loopback, and a client that
// speaks raw frames, so every frame and every credit grant is the test's to choose.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "server/builtin_methods.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"
#include "wire/stream_credit.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::raw_socket;

using test::text_of;

// "t<i>" (snprintf: GCC 12's -Wrestrict misfires on "t" + std::to_string(i)).
std::string tagged(int i) {
  char m[16];
  std::snprintf(m, sizeof m, "t%d", i);
  return m;
}

// --- the handlers under test

using test::count_handler;
using test::echo_handler;
using test::sum_handler;
using test::watch;
using test::watch_handler;

// Server stream that writes until would_block, counts how far it got, then on_writable writes
// one more message and finishes.
struct fill_state {
  std::atomic<int> written{0};
  std::atomic<int> blocked{0};
};

class fill_handler final : public stream_handler {
 public:
  explicit fill_handler(fill_state& f) : _f(f) {}
  void start(server_stream& s) {
    for (;;) {
      const write_result r = s.write("x");
      if (r != write_result::ok) {
        if (r == write_result::would_block) _f.blocked.fetch_add(1);
        return;
      }
      _f.written.fetch_add(1);
    }
  }
  void on_writable(server_stream& s) override {
    if (s.write("last") == write_result::ok) _f.written.fetch_add(1);
    s.finish();
  }

 private:
  fill_state& _f;
};

// Bidi: for message "X", writes "X.1", then "X.2" from another thread while on_message waits
// for it, then "X.3"; for "end", writes "end.1" and finishes from on_message. The first write
// carries a header. (The first write of an on_message travels in the received message's own
// call, stream_state::_carrier: every other write must still come after it.)
class relay_handler final : public stream_handler {
 public:
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    const std::string x = text_of(m);
    if (std::exchange(_first, false)) {
      EXPECT_TRUE(s.add_header("h", "1"));
    }
    EXPECT_EQ(s.write(std::string(x).append(".1")), write_result::ok);
    if (x == "end") {
      s.finish();
      return;
    }
    std::thread([&] { EXPECT_EQ(s.write(std::string(x).append(".2")), write_result::ok); }).join();
    EXPECT_EQ(s.write(std::string(x).append(".3")), write_result::ok);
  }

 private:
  bool _first = true;
};

// --- the raw client's frames

detail::frame_view open_frame(std::uint64_t id, std::string_view method, stream_kind kind,
                              std::string_view payload = {}, std::uint32_t credit_messages = 0,
                              std::uint64_t timeout_us = 0) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::StreamOpen;
  f.method = method;
  f.payload = test::bytes_of(payload);
  f.stream_kind = static_cast<std::uint8_t>(kind);
  f.credit_messages = credit_messages;
  f.timeout_us = timeout_us;
  return f;
}

detail::frame_view message_frame(std::uint64_t id, std::string_view payload) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::StreamMessage;
  f.payload = test::bytes_of(payload);
  return f;
}

detail::frame_view control_frame(std::uint64_t id, wire::Kind kind, std::uint32_t messages = 0,
                                 std::uint64_t bytes = 0) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = kind;
  f.credit_messages = messages;
  f.credit_bytes = bytes;
  return f;
}

// A frame as read, owning its bytes.
struct got {
  bool ok = false;
  std::uint64_t id = 0;
  wire::Kind kind = wire::Kind::Request;
  status code = status::ok;
  std::string message;
  std::string payload;
  std::uint32_t credit_messages = 0;
  std::uint64_t credit_bytes = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::string, std::string>> trailers;

  std::string trailer(std::string_view key) const {
    for (const auto& [k, v] : trailers) {
      if (k == key) return v;
    }
    return {};
  }
};

got read_one(raw_socket& s) {
  got g;
  std::vector<std::byte> storage;
  detail::frame_view v;
  if (!s.read_frame(v, storage)) return g;
  g.ok = true;
  g.id = v.call_id;
  g.kind = v.kind;
  g.code = v.code;
  g.message = std::string(v.message);
  g.payload = text_of(v.payload);
  g.credit_messages = v.credit_messages;
  g.credit_bytes = v.credit_bytes;
  const auto pairs = [](const auto* list, auto& out) {
    if (list == nullptr) return;
    for (const auto* m : *list) {
      out.emplace_back(m->key()->str(),
                       std::string(reinterpret_cast<const char*>(m->value()->data()), m->value()->size()));
    }
  };
  pairs(v.metadata, g.headers);
  pairs(v.trailers, g.trailers);
  return g;
}

class streams : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = std::make_unique<server>(test::threads(1, 2));
    srv->add_stream_method("count", stream_kind::server, [](server_stream& s, std::span<const std::byte> req) {
      auto h = std::make_unique<count_handler>(std::stoi(text_of(req)));
      h->start(s);
      return h;
    });
    srv->add_stream_method("sum", stream_kind::client, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<sum_handler>();
    });
    srv->add_stream_method("echo_stream", stream_kind::bidi, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<echo_handler>();
    });
    srv->add_stream_method("relay", stream_kind::bidi, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<relay_handler>();
    });
    srv->add_stream_method("watch", stream_kind::bidi, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<watch_handler>(watched);
    });
    srv->add_stream_method("fill", stream_kind::server, [this](server_stream& s, std::span<const std::byte>) {
      auto h = std::make_unique<fill_handler>(filled);
      h->start(s);
      return h;
    });
    srv->add_stream_method("from_thread", stream_kind::server, [this](server_stream& s, std::span<const std::byte>) {
      // The handle outlives the factory: another thread writes and ends the stream.
      std::lock_guard lock(threads_mu);
      threads.emplace_back([s]() mutable {
        for (int i = 0; i < 3; ++i) {
          const std::string m = tagged(i);
          while (s.write(m) == write_result::would_block) std::this_thread::sleep_for(1ms);
        }
        s.finish();
      });
      return std::make_unique<stream_handler>();
    });
    srv->add_stream_method("headed", stream_kind::server, [](server_stream& s, std::span<const std::byte>) {
      EXPECT_TRUE(s.add_header("h", "1"));
      EXPECT_EQ(s.write("first"), write_result::ok);
      EXPECT_FALSE(s.add_header("late", "1"));  // the headers went with the first message
      EXPECT_TRUE(s.add_trailer("t", "2"));
      s.finish();
      EXPECT_EQ(s.write("after"), write_result::closed);
      return std::make_unique<stream_handler>();
    });
    srv->add_stream_method("headed_open", stream_kind::server, [](server_stream& s, std::span<const std::byte>) {
      EXPECT_EQ(s.write("first"), write_result::ok);  // and stays open until cancelled
      return std::make_unique<stream_handler>();
    });
    srv->add_stream_method("throws", stream_kind::bidi, [](server_stream&, std::span<const std::byte>) {
      struct thrower final : stream_handler {
        void on_message(server_stream&, std::span<const std::byte>) override { throw std::runtime_error("boom"); }
      };
      return std::make_unique<thrower>();
    });
    srv->add_stream_method("spray", stream_kind::server, [this](server_stream& s, std::span<const std::byte>) {
      // Writes from its own thread until the stream ends under it.
      std::lock_guard lock(threads_mu);
      threads.emplace_back([s]() mutable {
        for (;;) {
          const write_result r = s.write("spray");
          if (r == write_result::closed) return;
          if (r == write_result::would_block) std::this_thread::sleep_for(100us);
        }
      });
      return std::make_unique<stream_handler>();
    });
    srv->add_method("unary", [](call_context& ctx) { ctx.reply(std::string_view("u")); });
    srv->start();
  }
  void TearDown() override {
    srv->stop();
    std::lock_guard lock(threads_mu);
    for (auto& t : threads) t.join();
  }

  // Waits until `f` holds (handlers run on the pool, after the frames that caused them).
  template <class F>
  static bool eventually(F f) {
    for (int i = 0; i < 500; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return f();
  }

  watch watched;
  fill_state filled;
  std::mutex threads_mu;
  std::vector<std::thread> threads;
  std::unique_ptr<server> srv;
};

TEST_F(streams, server_stream_sends_its_messages_then_a_reply) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(1, "count", stream_kind::server, "5")));
  for (int i = 0; i < 5; ++i) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    EXPECT_EQ(g.kind, wire::Kind::StreamMessage);
    EXPECT_EQ(g.id, 1u);
    EXPECT_EQ(g.payload, std::to_string(i));
  }
  const got end = read_one(s);
  EXPECT_EQ(end.kind, wire::Kind::Reply) << end.message;
  EXPECT_EQ(end.code, status::ok);
}

// 100 messages through a window of 4: the handler's writes wait (would_block) and resume
// (on_writable) as the client grants credit back one message at a time.
TEST_F(streams, server_stream_waits_for_credit) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(2, "count", stream_kind::server, "100", 4)));
  for (int i = 0; i < 100; ++i) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok) << i;
    ASSERT_EQ(g.kind, wire::Kind::StreamMessage) << g.message;
    EXPECT_EQ(g.payload, std::to_string(i));
    ASSERT_TRUE(s.send_frame(control_frame(2, wire::Kind::StreamCredit, 1, g.payload.size())));
  }
  const got end = read_one(s);
  EXPECT_EQ(end.kind, wire::Kind::Reply) << end.message;
}

TEST_F(streams, writes_beyond_credit_would_block_until_a_grant) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(3, "fill", stream_kind::server, {}, 3)));
  for (int i = 0; i < 3; ++i) {
    const got g = read_one(s);
    ASSERT_EQ(g.kind, wire::Kind::StreamMessage);
  }
  ASSERT_TRUE(eventually([&] { return filled.blocked.load() == 1; }));
  EXPECT_EQ(filled.written.load(), 3);
  ASSERT_TRUE(s.send_frame(control_frame(3, wire::Kind::StreamCredit, 1, 100)));
  const got last = read_one(s);
  EXPECT_EQ(last.kind, wire::Kind::StreamMessage);
  EXPECT_EQ(last.payload, "last");
  const got end = read_one(s);
  EXPECT_EQ(end.kind, wire::Kind::Reply) << end.message;
}

TEST_F(streams, client_stream_answers_after_the_half_close) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(4, "sum", stream_kind::client)));
  for (const char* m : {"a", "bb", "ccc", "", "dddd"}) ASSERT_TRUE(s.send_frame(message_frame(4, m)));
  ASSERT_TRUE(s.send_frame(control_frame(4, wire::Kind::StreamHalfClose)));
  const got end = read_one(s);
  ASSERT_EQ(end.kind, wire::Kind::Reply) << end.message;
  EXPECT_EQ(end.id, 4u);
  EXPECT_EQ(end.trailer("count"), "5");
  EXPECT_EQ(end.trailer("bytes"), "10");
  EXPECT_EQ(end.payload, "sum of 5") << "a client stream's one answer rides its end";
}

// 10,000 messages each way in order, credit flowing both ways: the client keeps to the server's
// window and grants back what it read.
TEST_F(streams, bidi_echo_keeps_order_with_credit_flowing) {
  constexpr int total = 10'000;
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(5, "echo_stream", stream_kind::bidi)));
  detail::send_credit credit(detail::default_stream_window_messages, detail::default_stream_window_bytes);
  int sent = 0;
  int echoed = 0;
  int owed = 0;
  bool half_closed = false;
  for (;;) {
    while (sent < total && credit.can_send()) {
      const std::string m = std::to_string(sent++);
      credit.spend(m.size());
      ASSERT_TRUE(s.send_frame(message_frame(5, m)));
    }
    if (sent == total && !half_closed) {
      ASSERT_TRUE(s.send_frame(control_frame(5, wire::Kind::StreamHalfClose)));
      half_closed = true;
    }
    const got g = read_one(s);
    ASSERT_TRUE(g.ok) << "sent " << sent << " echoed " << echoed;
    ASSERT_EQ(g.id, 5u);
    if (g.kind == wire::Kind::StreamCredit) {
      ASSERT_TRUE(credit.grant(g.credit_messages, g.credit_bytes));
    } else if (g.kind == wire::Kind::StreamMessage) {
      ASSERT_EQ(g.payload, std::to_string(echoed)) << "out of order";
      ++echoed;
      if (++owed == 8) {
        ASSERT_TRUE(s.send_frame(control_frame(5, wire::Kind::StreamCredit, 8, 8 * 16)));
        owed = 0;
      }
    } else {
      EXPECT_EQ(g.kind, wire::Kind::Reply) << to_string(g.code) << " " << g.message;
      break;
    }
  }
  EXPECT_EQ(echoed, total);
}

TEST_F(streams, messages_beyond_credit_end_the_stream_resource_exhausted) {
  test::gate first;
  watched.first.store(&first);
  test::open_on_exit opener{first};
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(6, "watch", stream_kind::bidi)));
  // The first message holds the handler (once it runs: a stream ended before its factory ran
  // never gets a handler); the window (16) then takes 15 more, and one beyond.
  ASSERT_TRUE(s.send_frame(message_frame(6, "m")));
  ASSERT_TRUE(first.wait_for_waiters(1));
  for (int i = 1; i <= 16; ++i) ASSERT_TRUE(s.send_frame(message_frame(6, "m")));
  const got end = read_one(s);
  EXPECT_EQ(end.kind, wire::Kind::Error);
  EXPECT_EQ(end.id, 6u);
  EXPECT_EQ(end.code, status::resource_exhausted);
  EXPECT_EQ(end.message, "stream 6 wrote beyond its credit");
  first.open();
  ASSERT_TRUE(eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.cancels.load(), 1);
  EXPECT_EQ(watched.messages.load(), 1);  // the rest were dropped unrun once the stream ended
  EXPECT_EQ(watched.final_status.load(), status::resource_exhausted);
}

TEST_F(streams, cancel_ends_the_stream_and_the_handler_hears_it) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(7, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(message_frame(7, "a")));
  ASSERT_TRUE(s.send_frame(message_frame(7, "b")));
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 2; }));
  ASSERT_TRUE(s.send_frame(control_frame(7, wire::Kind::Cancel)));
  const got end = read_one(s);
  EXPECT_EQ(end.kind, wire::Kind::Error);
  EXPECT_EQ(end.id, 7u);
  EXPECT_EQ(end.code, status::cancelled);
  ASSERT_TRUE(eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.cancels.load(), 1);
  EXPECT_EQ(watched.final_status.load(), status::cancelled);
  // A message the client had in flight is dropped quietly; the id is free again.
  ASSERT_TRUE(s.send_frame(message_frame(7, "late")));
  ASSERT_TRUE(s.send_frame(open_frame(7, "count", stream_kind::server, "1")));
  EXPECT_EQ(read_one(s).kind, wire::Kind::StreamMessage);
  EXPECT_EQ(read_one(s).kind, wire::Kind::Reply);
}

// A frame for an id never opened is dropped and counted, not answered: an answer would carry
// the id, which the client may have given to another call by then.
TEST_F(streams, a_frame_for_no_open_stream_is_dropped_and_counted) {
  const std::uint64_t before = srv->stats()[server_counter::bad_frames];
  raw_socket s(srv->port());
  for (const auto kind : {wire::Kind::StreamMessage, wire::Kind::StreamHalfClose, wire::Kind::StreamCredit}) {
    ASSERT_TRUE(s.send_frame(control_frame(77, kind, 1, 1)));
  }
  ASSERT_TRUE(s.send_frame(test::request(78, "unary", "")));  // the connection stays
  const got g = read_one(s);
  EXPECT_EQ(g.id, 78u);
  EXPECT_EQ(g.kind, wire::Kind::Reply);
  EXPECT_EQ(srv->stats()[server_counter::bad_frames], before + 3);
}

// What a client had in flight when its stream ended (here a grant and a half-close after each
// of 150 streams' ends, more than the protocol error cap) is dropped and is no error.
TEST_F(streams, frames_that_cross_an_end_are_no_error) {
  const std::uint64_t before = srv->stats()[server_counter::bad_frames];
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 150; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "count", stream_kind::server, "1")));
    EXPECT_EQ(read_one(s).kind, wire::Kind::StreamMessage);
    ASSERT_EQ(read_one(s).kind, wire::Kind::Reply);
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::StreamCredit, 1, 1)));
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::StreamHalfClose)));
  }
  ASSERT_TRUE(s.send_frame(test::request(1000, "unary", "")));
  const got g = read_one(s);
  EXPECT_EQ(g.id, 1000u);
  EXPECT_EQ(g.kind, wire::Kind::Reply);
  EXPECT_EQ(srv->stats()[server_counter::bad_frames], before);
}

// A client may write on its initial credit before the open's refusal reaches it: those
// messages (here 16 after each of 10 refused opens, more than the protocol error cap) are what
// it had in flight, dropped and no error, whatever refused the open.
TEST_F(streams, messages_sent_after_a_refused_open_are_no_error) {
  const std::uint64_t before = srv->stats()[server_counter::bad_frames];
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 10; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "no_such_method", stream_kind::bidi)));
    for (int m = 0; m < 16; ++m) ASSERT_TRUE(s.send_frame(message_frame(id, "early")));
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::StreamHalfClose)));
    const got g = read_one(s);
    EXPECT_EQ(g.id, id);
    EXPECT_EQ(g.kind, wire::Kind::Error);
  }
  ASSERT_TRUE(s.send_frame(test::request(1000, "unary", "")));
  const got g = read_one(s);
  EXPECT_EQ(g.id, 1000u) << g.message;
  EXPECT_EQ(g.kind, wire::Kind::Reply);
  EXPECT_EQ(srv->stats()[server_counter::bad_frames], before);
}

TEST_F(streams, kind_mismatch_is_bad_request) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(8, "echo_stream", stream_kind::server)));
  got g = read_one(s);
  EXPECT_EQ(g.code, status::bad_request);
  EXPECT_EQ(g.message, "method 'echo_stream' is a bidi stream; open it with StreamOpen stream_kind 3");
  ASSERT_TRUE(s.send_frame(open_frame(9, "unary", stream_kind::bidi)));
  g = read_one(s);
  EXPECT_EQ(g.code, status::bad_request);
  EXPECT_EQ(g.message, "method 'unary' is not a stream; call it with Request");
}

TEST_F(streams, a_unary_request_to_a_stream_method_is_bad_request) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(test::request(10, "sum", "x")));
  const got g = read_one(s);
  EXPECT_EQ(g.kind, wire::Kind::Error);
  EXPECT_EQ(g.code, status::bad_request);
  EXPECT_EQ(g.message, "method 'sum' is a client stream; open it with StreamOpen stream_kind 2");
}

TEST_F(streams, the_deadline_ends_a_stream) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(11, "watch", stream_kind::bidi, {}, 0, 200'000)));
  ASSERT_TRUE(s.send_frame(message_frame(11, "a")));
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  const got g = read_one(s);
  EXPECT_EQ(g.kind, wire::Kind::Error);
  EXPECT_EQ(g.code, status::deadline_exceeded) << g.message;
  ASSERT_TRUE(eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.cancels.load(), 1);
}

TEST_F(streams, a_closed_connection_ends_its_streams) {
  {
    raw_socket s(srv->port());
    ASSERT_TRUE(s.send_frame(open_frame(12, "watch", stream_kind::bidi)));
    ASSERT_TRUE(s.send_frame(message_frame(12, "a")));
    ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  }
  ASSERT_TRUE(eventually([&] { return watched.dones.load() == 1; }));
  EXPECT_EQ(watched.cancels.load(), 1);
  EXPECT_EQ(watched.final_status.load(), status::cancelled);
}

TEST_F(streams, stop_ends_open_streams_shutting_down) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(13, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(message_frame(13, "a")));
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  std::thread stopper([&] { srv->stop(); });
  const got g = read_one(s);
  stopper.join();
  EXPECT_EQ(g.kind, wire::Kind::Error);
  EXPECT_EQ(g.code, status::shutting_down) << g.message;
  EXPECT_TRUE(eventually([&] { return watched.dones.load() == 1; }));
}

TEST_F(streams, any_thread_may_write_and_end_a_stream) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(14, "from_thread", stream_kind::server)));
  for (int i = 0; i < 3; ++i) {
    const got g = read_one(s);
    ASSERT_EQ(g.kind, wire::Kind::StreamMessage) << g.message;
    EXPECT_EQ(g.payload, tagged(i));
  }
  EXPECT_EQ(read_one(s).kind, wire::Kind::Reply);
}

// Headers ride the first frame, trailers the end; after the end every write is `closed`.
TEST_F(streams, headers_go_first_and_trailers_last) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(15, "headed", stream_kind::server)));
  const got first = read_one(s);
  ASSERT_EQ(first.kind, wire::Kind::StreamMessage);
  ASSERT_EQ(first.headers.size(), 1u);
  EXPECT_EQ(first.headers[0].first, "h");
  const got end = read_one(s);
  ASSERT_EQ(end.kind, wire::Kind::Reply);
  EXPECT_TRUE(end.headers.empty());
  EXPECT_EQ(end.trailer("t"), "2");
}

// Writes from inside one on_message, from its thread and from another, go out in the order they
// were made, and a finish() from on_message comes after the message it wrote; every byte they
// held is given back once the connection is gone.
TEST_F(streams, writes_from_one_on_message_keep_their_order) {
  {
    raw_socket s(srv->port());
    ASSERT_TRUE(s.send_frame(open_frame(31, "relay", stream_kind::bidi)));
    for (const char* m : {"a", "b", "c", "end"}) ASSERT_TRUE(s.send_frame(message_frame(31, m)));
    std::vector<std::string> seen;
    for (;;) {
      const got g = read_one(s);
      ASSERT_TRUE(g.ok) << "after " << seen.size() << " messages";
      ASSERT_EQ(g.id, 31u);
      if (g.kind == wire::Kind::StreamCredit) continue;
      if (g.kind != wire::Kind::StreamMessage) {
        EXPECT_EQ(g.kind, wire::Kind::Reply) << to_string(g.code) << " " << g.message;
        break;
      }
      if (seen.empty()) {
        ASSERT_EQ(g.headers.size(), 1u);
        EXPECT_EQ(g.headers[0].first, "h");
      } else {
        EXPECT_TRUE(g.headers.empty());
      }
      seen.push_back(g.payload);
    }
    const std::vector<std::string> expected{"a.1", "a.2", "a.3", "b.1", "b.2", "b.3",
                                            "c.1", "c.2", "c.3", "end.1"};
    EXPECT_EQ(seen, expected);
  }
  ASSERT_TRUE(eventually([&] {
    const server_stats st = srv->stats();
    return st[server_counter::connections_open] == 0 && st[server_counter::buffered_bytes] == 0 &&
           st[server_counter::stream_messages_sent] == 10;
  })) << "connections " << srv->stats()[server_counter::connections_open] << ", buffered "
      << srv->stats()[server_counter::buffered_bytes] << ", sent "
      << srv->stats()[server_counter::stream_messages_sent];
}

TEST_F(streams, a_message_after_the_half_close_is_bad_request) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(16, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(control_frame(16, wire::Kind::StreamHalfClose)));
  ASSERT_TRUE(s.send_frame(message_frame(16, "late")));
  const got g = read_one(s);
  EXPECT_EQ(g.code, status::bad_request);
  EXPECT_EQ(g.message, "a stream message after the half-close");
}

TEST_F(streams, a_credit_overflow_is_bad_request) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(17, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(control_frame(17, wire::Kind::StreamCredit, 0x7fffffffu, 0)));
  const got g = read_one(s);
  EXPECT_EQ(g.code, status::bad_request);
  EXPECT_EQ(g.message, "credit overflow");
}

TEST_F(streams, opens_past_the_connection_cap_are_server_busy) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 100; ++id) ASSERT_TRUE(s.send_frame(open_frame(id, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(open_frame(101, "watch", stream_kind::bidi)));
  const got g = read_one(s);
  EXPECT_EQ(g.id, 101u);
  EXPECT_EQ(g.code, status::server_busy) << g.message;
}

// Stray frames count toward the connection's protocol error cap: past it the connection goes,
// told why on call id 0.
TEST_F(streams, too_many_protocol_errors_close_the_connection) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 101; ++id) {
    ASSERT_TRUE(s.send_frame(message_frame(1000 + id, "x")));
  }
  const got g = read_one(s);  // strays get no answer: the first frame is the close, on id 0
  ASSERT_TRUE(g.ok);
  EXPECT_EQ(g.id, 0u);
  EXPECT_EQ(g.message, "too many stream protocol errors; closing the connection");
  EXPECT_TRUE(s.wait_eof());
}

// Streams of one connection run in parallel, each in its own order: 20 echo streams
// interleaved, each with its own credit both ways.
TEST_F(streams, many_streams_keep_their_own_order) {
  constexpr std::uint64_t streams_n = 20;
  constexpr int per_stream = 500;
  struct side {
    detail::send_credit credit{detail::default_stream_window_messages, detail::default_stream_window_bytes};
    int sent = 0, echoed = 0, owed = 0;
    bool half_closed = false, ended = false;
  };
  std::map<std::uint64_t, side> sides;
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= streams_n; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "echo_stream", stream_kind::bidi)));
    sides[id];
  }
  std::size_t ended = 0;
  while (ended < streams_n) {
    for (auto& [id, d] : sides) {
      while (d.sent < per_stream && d.credit.can_send()) {
        const std::string m = std::to_string(d.sent++);
        d.credit.spend(m.size());
        ASSERT_TRUE(s.send_frame(message_frame(id, m)));
      }
      if (d.sent == per_stream && !d.half_closed) {
        ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::StreamHalfClose)));
        d.half_closed = true;
      }
    }
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    side& d = sides.at(g.id);
    if (g.kind == wire::Kind::StreamCredit) {
      ASSERT_TRUE(d.credit.grant(g.credit_messages, g.credit_bytes));
    } else if (g.kind == wire::Kind::StreamMessage) {
      ASSERT_EQ(g.payload, std::to_string(d.echoed)) << "stream " << g.id;
      ++d.echoed;
      if (++d.owed == 8) {
        ASSERT_TRUE(s.send_frame(control_frame(g.id, wire::Kind::StreamCredit, 8, 8 * 16)));
        d.owed = 0;
      }
    } else {
      ASSERT_EQ(g.kind, wire::Kind::Reply) << to_string(g.code) << " " << g.message;
      ASSERT_FALSE(d.ended);
      d.ended = true;
      ++ended;
    }
  }
  for (const auto& [id, d] : sides) EXPECT_EQ(d.echoed, per_stream) << "stream " << id;
}

// An unregistered stream method refuses new opens as a stopped endpoint does; its open
// streams keep the endpoint in flight until they are done.
// The HTTP/2 "rapid reset" pattern: streams opened and cancelled before the server wrote
// anything take tokens of a per-connection bucket (a burst of 200, 100 a second); past it the
// connection is told why on call id 0 and closed. 1,000 such pairs outrun any refill.
TEST_F(streams, open_cancel_loops_close_the_connection) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 1000; ++id) {
    if (!s.send_frame(open_frame(id, "watch", stream_kind::bidi))) break;  // closed under us: fine
    if (!s.send_frame(control_frame(id, wire::Kind::Cancel))) break;
  }
  int cancelled = 0;
  got g;
  for (;;) {
    g = read_one(s);
    if (!g.ok || g.id == 0) break;
    if (g.code == status::cancelled) ++cancelled;
  }
  ASSERT_TRUE(g.ok) << "the connection closed without saying why";
  EXPECT_EQ(g.code, status::resource_exhausted);
  EXPECT_EQ(g.message, "too many streams cancelled before an answer; closing the connection");
  EXPECT_LT(cancelled, 1000);
  EXPECT_TRUE(s.wait_eof());
}

// Within the burst, open/cancel pairs are ordinary cancels and the connection stays.
TEST_F(streams, a_burst_of_cancels_within_the_bucket_is_served) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 150; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "watch", stream_kind::bidi)));
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::Cancel)));
  }
  ASSERT_TRUE(s.send_frame(test::request(1000, "unary", "")));
  for (;;) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    ASSERT_NE(g.id, 0u) << g.message;
    if (g.id == 1000) break;
    // Opens past the connection's 100 open streams are refused busy, also no reset.
    EXPECT_TRUE(g.code == status::cancelled || g.code == status::server_busy) << g.message;
  }
}

// A stream cancelled after the server answered something is an ordinary cancel: no token.
TEST_F(streams, cancels_after_an_answer_are_not_rapid_resets) {
  raw_socket s(srv->port());
  for (std::uint64_t id = 1; id <= 300; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "headed_open", stream_kind::server)));
    const got first = read_one(s);
    ASSERT_EQ(first.kind, wire::Kind::StreamMessage) << first.message;
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::Cancel)));
    const got end = read_one(s);
    ASSERT_EQ(end.code, status::cancelled) << end.message;
  }
}

TEST_F(streams, an_unregistered_stream_method_refuses_opens) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(18, "watch", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(message_frame(18, "a")));
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  ASSERT_TRUE(srv->unregister_endpoint("watch"));
  ASSERT_TRUE(s.send_frame(open_frame(19, "watch", stream_kind::bidi)));
  const got g = read_one(s);
  EXPECT_EQ(g.id, 19u);
  EXPECT_EQ(g.code, status::shutting_down) << g.message;
  ASSERT_TRUE(s.send_frame(message_frame(18, "b")));  // the open one still runs
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 2; }));
}

TEST_F(streams, a_callback_that_throws_fails_the_stream_internal) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(20, "throws", stream_kind::bidi)));
  ASSERT_TRUE(s.send_frame(message_frame(20, "x")));
  const got g = read_one(s);
  EXPECT_EQ(g.kind, wire::Kind::Error);
  EXPECT_EQ(g.code, status::internal);
  EXPECT_EQ(g.message, "boom");
}

// Writers on their own threads race their connections' ends: every write after the end says
// `closed`, so every writer stops (TearDown joins them), and the server serves on.
TEST_F(streams, writers_racing_the_connection_end_stop) {
  for (int round = 0; round < 20; ++round) {
    raw_socket s(srv->port());
    for (std::uint64_t id = 1; id <= 3; ++id) {
      ASSERT_TRUE(s.send_frame(open_frame(id, "spray", stream_kind::server, {}, 1000)));
    }
    for (int i = 0; i < round; ++i) ASSERT_TRUE(read_one(s).ok);
  }
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(test::request(1, "unary", "")));
  EXPECT_EQ(read_one(s).kind, wire::Kind::Reply);
}

// Cancels, half-closes and echoes on 40 streams of one connection at once: each stream gets
// exactly one end, and nothing of a stream (message or grant) comes after its end.
TEST_F(streams, every_stream_ends_once_and_nothing_follows_its_end) {
  constexpr std::uint64_t n = 40;
  raw_socket s(srv->port());
  std::vector<int> ends(n + 1, 0);
  for (std::uint64_t id = 1; id <= n; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "echo_stream", stream_kind::bidi)));
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(s.send_frame(message_frame(id, std::to_string(i))));
    // Even ids are cancelled mid-flight, odd ones half-closed.
    ASSERT_TRUE(s.send_frame(control_frame(id, id % 2 == 0 ? wire::Kind::Cancel : wire::Kind::StreamHalfClose)));
  }
  std::uint64_t ended = 0;
  while (ended < n) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok) << "ended " << ended;
    ASSERT_GE(g.id, 1u);
    ASSERT_LE(g.id, n);
    ASSERT_EQ(ends[g.id], 0) << "a frame of kind " << static_cast<int>(g.kind) << " after stream " << g.id << "'s end";
    if (g.kind == wire::Kind::Reply || g.kind == wire::Kind::Error) {
      if (g.id % 2 == 1) {
        EXPECT_EQ(g.kind, wire::Kind::Reply) << g.message;
      } else {
        EXPECT_EQ(g.code, status::cancelled) << g.message;
      }
      ++ends[g.id];
      ++ended;
    }
  }
  ASSERT_TRUE(s.send_frame(test::request(n + 1, "unary", "")));
  const got last = read_one(s);
  EXPECT_EQ(last.id, n + 1);
  EXPECT_EQ(last.kind, wire::Kind::Reply);
}

// Every byte and call a stream held comes back: once its connection is gone, the server holds
// nothing (a connection is freed only when its last call was released, stream_out carriers
// and grants included).
TEST_F(streams, nothing_is_held_once_the_streams_and_their_connection_are_gone) {
  {
    raw_socket s(srv->port());
    ASSERT_TRUE(s.send_frame(open_frame(1, "count", stream_kind::server, "40", 64)));
    ASSERT_TRUE(s.send_frame(open_frame(2, "echo_stream", stream_kind::bidi)));
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(s.send_frame(message_frame(2, std::string(1000, 'e'))));
    ASSERT_TRUE(s.send_frame(open_frame(3, "watch", stream_kind::bidi)));
    ASSERT_TRUE(s.send_frame(message_frame(3, "w")));
    ASSERT_TRUE(s.send_frame(control_frame(3, wire::Kind::Cancel)));
    int ends = 0;
    int messages = 0;
    while (ends < 2) {  // count's Reply and watch's Cancelled; the echo stays open
      const got g = read_one(s);
      ASSERT_TRUE(g.ok);
      if (g.kind == wire::Kind::StreamMessage) ++messages;
      if (g.kind == wire::Kind::Reply || g.kind == wire::Kind::Error) ++ends;
    }
    EXPECT_GE(messages, 40);
  }  // closed with the echo stream open and its echoes unread
  ASSERT_TRUE(eventually([&] {
    const server_stats st = srv->stats();
    return st[server_counter::connections_open] == 0 && st[server_counter::buffered_bytes] == 0;
  })) << "connections " << srv->stats()[server_counter::connections_open] << ", buffered "
      << srv->stats()[server_counter::buffered_bytes];
}

// Open streams hold calls of max_inflight_per_connection until they end: one stays free, so
// their messages, half-closes and credit are still read.
TEST(streams_caps, streams_leave_a_call_free_for_their_frames) {
  server_options o = test::threads(1, 2);
  o.max_inflight_per_connection = 4;
  server srv(o);
  std::atomic<int> messages{0};
  srv.add_stream_method("count_messages", stream_kind::bidi, [&](server_stream&, std::span<const std::byte>) {
    struct counter final : stream_handler {
      std::atomic<int>& n;
      explicit counter(std::atomic<int>& n_) : n(n_) {}
      void on_message(server_stream&, std::span<const std::byte>) override { n.fetch_add(1); }
      void on_half_close(server_stream& s) override { s.finish(); }
    };
    return std::make_unique<counter>(messages);
  });
  srv.start();
  raw_socket s(srv.port());
  for (std::uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(s.send_frame(open_frame(id, "count_messages", stream_kind::bidi)));
  }
  const got refused = read_one(s);
  EXPECT_EQ(refused.id, 4u);
  EXPECT_EQ(refused.code, status::server_busy);
  EXPECT_EQ(refused.message, "connection has 3 open streams (max_inflight_per_connection 4)");
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(s.send_frame(message_frame(1 + i % 3, "m")));
  for (std::uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(s.send_frame(control_frame(id, wire::Kind::StreamHalfClose)));
  }
  int replies = 0;
  while (replies < 3) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    if (g.kind == wire::Kind::Reply) ++replies;
  }
  EXPECT_EQ(messages.load(), 30);
  srv.stop();
}

// An open competes for the pool as a call does: past the pool's queue it is refused, and a
// caller over its fair share waits in (and is refused past) a queue of its own.
TEST(streams_caps, opens_meet_the_pool_bound_and_the_fair_share) {
  server_options o = test::threads(1, 1);
  o.handler_queue_size = 1;  // the default pool: one worker, one task waiting
  o.max_inflight_per_connection = 8;  // (its default follows the queue: 1)
  server srv(o);
  test::gate g;
  srv.add_stream_method("held", stream_kind::bidi, [&](server_stream&, std::span<const std::byte>) {
    g.wait();
    struct closer final : stream_handler {
      void on_half_close(server_stream& s) override { s.finish(); }
    };
    return std::make_unique<closer>();
  });
  srv.start();
  raw_socket a(srv.port());
  raw_socket b(srv.port());
  ASSERT_TRUE(a.send_frame(open_frame(1, "held", stream_kind::bidi)));
  ASSERT_TRUE(g.wait_for_waiters(1));  // the worker is taken
  ASSERT_TRUE(a.send_frame(open_frame(2, "held", stream_kind::bidi)));  // the queue is full
  const auto queued = [&] {
    for (const pool_stats& p : srv.pool_stats_all()) {
      if (p.name == "default") return p.queued;
    }
    return std::uint64_t{0};
  };
  for (int i = 0; i < 3000 && queued() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(queued(), 1u);
  ASSERT_TRUE(b.send_frame(open_frame(1, "held", stream_kind::bidi)));
  const got full = read_one(b);
  EXPECT_EQ(full.code, status::server_busy);
  EXPECT_NE(full.message.find("pool 'default' is full"), std::string::npos) << full.message;
  // a has two units in flight, its share: the next waits apart, the one after is refused.
  ASSERT_TRUE(a.send_frame(open_frame(3, "held", stream_kind::bidi)));
  ASSERT_TRUE(a.send_frame(open_frame(4, "held", stream_kind::bidi)));
  const got over = read_one(a);
  EXPECT_EQ(over.id, 4u);
  EXPECT_EQ(over.code, status::server_busy);
  EXPECT_NE(over.message.find("over its fair share"), std::string::npos) << over.message;
  g.open();
  for (std::uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(a.send_frame(control_frame(id, wire::Kind::StreamHalfClose)));
  std::set<std::uint64_t> ended;
  while (ended.size() < 3) {
    const got r = read_one(a);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.kind, wire::Kind::Reply) << r.message;
    ended.insert(r.id);
  }
  EXPECT_EQ(ended, (std::set<std::uint64_t>{1, 2, 3}));
  srv.stop();
}

// Credit is the client's word; the server's own bound is max_queued_reply_bytes of written
// messages per connection. A client that grants a terabyte and reads nothing holds the writer
// back at that bound plus what the sockets take; once it reads, the writer goes on.
TEST(streams_caps, written_messages_wait_at_the_connection_cap) {
  server_options o = test::threads(1, 2);
  o.max_queued_reply_bytes = 256 * 1024;
  server srv(o);
  constexpr std::size_t message_bytes = 16 * 1024;
  constexpr int total = 4096;  // 64 MiB: far past what the loopback sockets can buffer
  std::atomic<int> written{0};
  std::atomic<int> written_at_first_block{-1};
  struct writer final : stream_handler {
    std::atomic<int>& n;
    std::atomic<int>& first_block;
    writer(std::atomic<int>& n_, std::atomic<int>& b) : n(n_), first_block(b) {}
    void on_writable(server_stream& s) override {
      const std::string m(message_bytes, 'w');
      while (n.load() < total) {
        if (s.write(m) != write_result::ok) {
          int none = -1;
          first_block.compare_exchange_strong(none, n.load());
          return;
        }
        n.fetch_add(1);
      }
      s.finish();
    }
  };
  srv.add_stream_method("flood", stream_kind::server, [&](server_stream& s, std::span<const std::byte>) {
    auto h = std::make_unique<writer>(written, written_at_first_block);
    h->on_writable(s);
    return h;
  });
  srv.start();
  raw_socket s(srv.port());
  auto open = open_frame(1, "flood", stream_kind::server, "", 1u << 30);
  open.credit_bytes = std::uint64_t{1} << 40;
  ASSERT_TRUE(s.send_frame(open));
  for (int i = 0; i < 3000 && written_at_first_block.load() < 0; ++i) std::this_thread::sleep_for(10ms);
  const int at_block = written_at_first_block.load();
  ASSERT_GE(at_block, 0) << "the writer was never held back";
  EXPECT_LT(static_cast<std::size_t>(at_block) * message_bytes, std::size_t{24} << 20) << at_block;
  int messages = 0;
  for (;;) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok) << "after " << messages << " messages";
    if (g.kind != wire::Kind::StreamMessage) {
      EXPECT_EQ(g.kind, wire::Kind::Reply) << g.message;
      break;
    }
    ++messages;
  }
  EXPECT_EQ(messages, total);
  srv.stop();
}

// The open's request bytes go once the factory has read them: a long server stream does not
// keep its request charged to the memory budget (nor to its connection's bytes in flight).
TEST(streams_caps, an_open_request_is_released_once_the_factory_ran) {
  server srv(test::threads(1, 2));
  std::atomic<int> opened{0};
  srv.add_stream_method("keep", stream_kind::server, [&](server_stream&, std::span<const std::byte> req) {
    EXPECT_EQ(req.size(), std::size_t{1} << 20);
    opened.fetch_add(1);
    return std::make_unique<stream_handler>();  // stays open until the test cancels it
  });
  srv.start();
  raw_socket s(srv.port());
  const std::string big(std::size_t{1} << 20, 'r');
  ASSERT_TRUE(s.send_frame(open_frame(1, "keep", stream_kind::server, big)));
  bool released = false;
  for (int i = 0; i < 3000 && !released; ++i) {
    released = opened.load() == 1 && srv.stats()[server_counter::buffered_bytes] < (std::uint64_t{1} << 19);
    if (!released) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(released) << srv.stats()[server_counter::buffered_bytes];
  ASSERT_TRUE(s.send_frame(control_frame(1, wire::Kind::Cancel)));
  const got g = read_one(s);
  EXPECT_EQ(g.code, status::cancelled) << g.message;
  srv.stop();
}

// --- the built-in streaming methods of ringrpc-server (server/builtin_streams.cpp)

class builtin_streams : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = std::make_unique<server>(test::threads(1, 2));
    detail::add_stream_methods(*srv);
    srv->start();
  }
  void TearDown() override { srv->stop(); }
  std::unique_ptr<server> srv;
};

TEST_F(builtin_streams, generate_makes_n_messages_of_the_size_asked) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(1, "generate", stream_kind::server, "1000 16", 8)));
  for (int i = 0; i < 1000; ++i) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok) << i;
    ASSERT_EQ(g.kind, wire::Kind::StreamMessage) << g.message;
    ASSERT_EQ(g.payload, std::string(16, 'x'));
    ASSERT_TRUE(s.send_frame(control_frame(1, wire::Kind::StreamCredit, 1, g.payload.size())));
  }
  EXPECT_EQ(read_one(s).kind, wire::Kind::Reply);
  ASSERT_TRUE(s.send_frame(open_frame(2, "generate", stream_kind::server, "3")));
  const got bad = read_one(s);
  EXPECT_EQ(bad.code, status::bad_request);
  EXPECT_NE(bad.message.find("N BYTES"), std::string::npos) << bad.message;
}

// echo_stream pauses its reading while an echo waits for credit: the client's messages wait
// within the server's receive window and earn no credit back, so a client that sends and never
// reads is held back by its own credit. Once it grants, everything comes back in order.
TEST_F(builtin_streams, echo_stream_holds_a_client_that_does_not_read) {
  raw_socket s(srv->port());
  ASSERT_TRUE(s.send_frame(open_frame(1, "echo_stream", stream_kind::bidi, "", 1)));  // one echo allowed
  const auto window = static_cast<int>(detail::default_stream_window_messages);
  for (int i = 0; i < window; ++i) ASSERT_TRUE(s.send_frame(message_frame(1, tagged(i))));
  const got first = read_one(s);
  ASSERT_EQ(first.kind, wire::Kind::StreamMessage) << first.message;
  EXPECT_EQ(first.payload, "t0");
  // Nothing else may come: no echo (no credit) and no grant (the messages wait unhandled). A
  // ping answered proves the server read everything sent before it.
  ASSERT_TRUE(s.send_frame(control_frame(77, wire::Kind::Ping)));
  std::this_thread::sleep_for(200ms);  // the handler's pool gets its chance to go wrong
  ASSERT_TRUE(s.send_frame(control_frame(78, wire::Kind::Ping)));
  for (int pongs = 0; pongs < 2;) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    ASSERT_EQ(g.kind, wire::Kind::Pong) << "got kind " << static_cast<int>(g.kind) << " before the grant";
    ++pongs;
  }
  ASSERT_TRUE(s.send_frame(control_frame(1, wire::Kind::StreamCredit, 1000, 1u << 20)));
  ASSERT_TRUE(s.send_frame(control_frame(1, wire::Kind::StreamHalfClose)));
  int next = 1;
  for (;;) {
    const got g = read_one(s);
    ASSERT_TRUE(g.ok);
    if (g.kind == wire::Kind::StreamCredit) continue;
    if (g.kind != wire::Kind::StreamMessage) {
      EXPECT_EQ(g.kind, wire::Kind::Reply) << g.message;
      break;
    }
    EXPECT_EQ(g.payload, tagged(next++));
  }
  EXPECT_EQ(next, window);
}

}  // namespace
}  // namespace ringrpc

// co_await on streams over loopback (ringrpc/stream_coro.hpp): a client coroutine that reads a
// server stream and writes a client stream, waiting for messages, for credit and for room in
// max_pending_bytes; coroutine stream handlers on the server that read and write the same way;
// and their lifecycles (the client going away, the server stopping, a handler frame parked on a
// client stream), each ending with every frame gone.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "coro_test_support.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/coro_handler.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "ringrpc/stream_coro.hpp"
#include "ringrpc/task.hpp"
#include "seam/server_seam.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using test::alive_marker;
using test::bytes_of;
using test::thread_name;

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// Runs `t` with no home (it resumes where it is woken); the future has its outcome.
template <class T>
std::future<T> run(task<T> t) {
  auto done = std::make_shared<std::promise<T>>();
  std::future<T> f = done->get_future();
  start_detached(std::move(t), [done](task_outcome<T>& o) {
    try {
      if constexpr (std::is_void_v<T>) {
        o.value();
        done->set_value();
      } else {
        done->set_value(o.value());
      }
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  return f;
}

template <class T>
T get(std::future<T>& f) {
  if (f.wait_for(20s) != std::future_status::ready) throw std::runtime_error("the coroutine did not finish in 20 s");
  return f.get();
}

// What the server's coroutine handlers saw.
struct seen {
  std::mutex mu;
  std::vector<std::string> threads;  // where each handler step after a wait ran
  std::atomic<int> finished{0};
  void note() {
    std::lock_guard lock(mu);
    threads.push_back(thread_name());
  }
};

// Coroutine stream methods on one server, beside raw ones for the client's side.
struct coro_streams_server {
  seen log;
  test::gate gate;  // "gated_sum" reads nothing before it opens
  std::unique_ptr<server> srv;

  explicit coro_streams_server(server_options o = test::threads(1, 2)) : srv(std::make_unique<server>(o)) {
    srv->add_stream_method("count", stream_kind::server, [](server_stream& s, std::span<const std::byte> req) {
      auto h = std::make_unique<test::count_handler>(std::stoi(text_of(req)));
      h->start(s);
      return h;
    });
    srv->add_stream_method("sum", stream_kind::client, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<test::sum_handler>();
    });
    srv->add_stream_method("silent", stream_kind::server, [](server_stream&, std::span<const std::byte>) {
      return std::make_unique<stream_handler>();  // writes nothing, never ends
    });
    // Bidi echo: a message back for each one, then finish at the half-close.
    add_coroutine_stream_method(*srv, "co_echo", stream_kind::bidi, [this](coro_stream& s) -> task<void> {
      alive_marker alive;
      while (auto m = co_await co_read(s)) {
        log.note();
        if (co_await co_write(s, *m) != write_result::ok) co_return;
      }
      s.stream().finish();
      log.finished.fetch_add(1);
    });
    // Server stream: request() "N" -> N messages "0".."N-1", waiting for credit as it runs out.
    add_coroutine_stream_method(*srv, "co_count", stream_kind::server, [this](coro_stream& s) -> task<void> {
      alive_marker alive;
      EXPECT_FALSE(co_await co_read(s));  // a server stream's one input is its request
      const int n = std::stoi(text_of(s.request()));
      for (int i = 0; i < n; ++i) {
        if (co_await co_write(s, std::to_string(i)) != write_result::ok) co_return;
      }
      log.note();
      s.stream().finish();
      log.finished.fetch_add(1);
    });
    // Client stream: counts the messages; reads nothing before `gate` opens.
    add_coroutine_stream_method(*srv, "gated_sum", stream_kind::client, [this](coro_stream& s) -> task<void> {
      alive_marker alive;
      gate.wait();
      int n = 0;
      while (co_await co_read(s)) ++n;
      s.stream().finish("sum of " + std::to_string(n));
      log.finished.fetch_add(1);
    });
    add_coroutine_stream_method(*srv, "leaves_open", stream_kind::server,
                                [](coro_stream&) -> task<void> { co_return; });
    add_coroutine_stream_method(*srv, "throws", stream_kind::server, [](coro_stream& s) -> task<void> {
      co_await co_write(s, std::string_view("first"));
      throw std::runtime_error("handler gave up");
    });
    // Waits for messages that never come (the lifecycle tests end it otherwise).
    add_coroutine_stream_method(*srv, "reads_forever", stream_kind::bidi, [this](coro_stream& s) -> task<void> {
      alive_marker alive;
      while (co_await co_read(s)) {
      }
      log.finished.fetch_add(1);
    });
    srv->start();
  }
  ~coro_streams_server() { srv->stop(); }
};

// --- The client's side: co_read, co_write and co_finish on a client_stream

TEST(StreamCoro, ClientReadsAServerStreamWaitingForEachMessage) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  constexpr int n = 3000;
  stream_options o;
  o.window_messages = 4;  // the server waits for our credit: reads wait for messages
  client_stream stream = c.open_stream("count", stream_kind::server, bytes_of(std::to_string(n)), o);
  std::string resumed_on;
  auto body = [&]() -> task<int> {
    int i = 0;
    while (auto m = co_await co_read(stream)) {
      EXPECT_EQ(text_of(*m), std::to_string(i));
      ++i;
    }
    resumed_on = thread_name();
    const call_result end = co_await co_finish(stream);
    EXPECT_TRUE(end.ok()) << end.message;
    co_return i;
  };
  auto f = run(body());
  EXPECT_EQ(get(f), n);
  // No home: it resumed on the client's I/O thread that received the end.
  EXPECT_TRUE(resumed_on.starts_with("rr-client")) << resumed_on;
  EXPECT_EQ(stream.write("x"), write_result::closed);
}

TEST(StreamCoro, ClientWritesWaitForCredit) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  client_stream stream = c.open_stream("gated_sum", stream_kind::client);
  constexpr int n = 500;
  std::atomic<int> written{0};
  auto body = [&]() -> task<call_result> {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(co_await co_write(stream, std::string(100, 'x')), write_result::ok);
      written.fetch_add(1);
    }
    EXPECT_TRUE(stream.half_close());
    co_return co_await co_finish(stream);
  };
  auto f = run(body());
  // The server reads nothing yet: the writer stops where the credit it announced runs out,
  // suspended, not failing and not spinning on would_block.
  ASSERT_TRUE(test::eventually([&] { return written.load() > 0; }));
  std::this_thread::sleep_for(100ms);
  const int before = written.load();
  EXPECT_LT(before, n);
  EXPECT_EQ(f.wait_for(0s), std::future_status::timeout);
  s.gate.open();
  const call_result r = get(f);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "sum of " + std::to_string(n));
  EXPECT_EQ(written.load(), n);
}

// A tiny max_pending_bytes: credit is there, room for the bytes is not until earlier messages
// have left, which wakes the writer (no polling).
TEST(StreamCoro, ClientWritesWaitForTheConnectionsByteBudget) {
  coro_streams_server s;
  client_options co;
  co.max_pending_bytes = 8 * 1024;
  auto c = client::connect("127.0.0.1", s.srv->port(), co);
  constexpr int n = 400;
  const std::string big(3000, 'b');
  std::vector<std::future<call_result>> done;
  // Four streams at once: they share the budget, and each wakes as bytes leave.
  std::vector<client_stream> streams;
  for (int k = 0; k < 4; ++k) streams.push_back(c.open_stream("sum", stream_kind::client));
  // No captures: a coroutine lambda's captures live in the lambda object, not in its frame.
  auto body = [](client_stream& st, const std::string& message) -> task<call_result> {
    for (int i = 0; i < n; ++i) {
      if (co_await co_write(st, message) != write_result::ok) co_return co_await co_finish(st);
    }
    st.half_close();
    co_return co_await co_finish(st);
  };
  for (auto& stream : streams) done.push_back(run(body(stream, big)));
  for (auto& f : done) {
    const call_result r = get(f);
    EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.payload_string(), "sum of " + std::to_string(n));
  }
}

// The bytes a stream's open holds go back at its end, which wakes a co_write on another stream
// waiting for room (not only bytes of frames that leave).
TEST(StreamCoro, AStreamsEndWakesAWriterWaitingForRoom) {
  coro_streams_server s;
  client_options co;
  co.max_pending_bytes = 8 * 1024;
  auto c = client::connect("127.0.0.1", s.srv->port(), co);
  client_stream echo = c.open_stream("co_echo", stream_kind::bidi);
  // Its open (a 9000-byte request) holds the connection's budget until it ends.
  client_stream holder = c.open_stream("silent", stream_kind::server, bytes_of(std::string(9000, 'h')));
  ASSERT_FALSE(holder.ended()) << holder.finish().message;
  auto written = run(co_write(echo, std::string_view("after the holder")));
  ASSERT_EQ(written.wait_for(100ms), std::future_status::timeout);  // no room
  EXPECT_TRUE(holder.cancel());
  EXPECT_EQ(get(written), write_result::ok);
  const auto back = echo.read(20s);
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "after the holder");
}

TEST(StreamCoro, TwoCoroutinesReadingOneStreamIsRefused) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  client_stream stream = c.open_stream("silent", stream_kind::server);
  auto first = run(co_read(stream));  // parks: the server sends nothing
  ASSERT_EQ(first.wait_for(50ms), std::future_status::timeout);
  auto second = run(co_read(stream));
  EXPECT_THROW(get(second), std::logic_error);
  EXPECT_TRUE(stream.cancel());  // the end wakes the first: no message
  EXPECT_FALSE(get(first));
}

// --- The server's side: coroutine stream handlers

TEST(StreamCoro, ACoroutineHandlerEchoesABidiStream) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  constexpr int n = 2000;
  stream_options o;
  o.window_messages = 2;  // the handler's writes wait for our credit now and then
  client_stream stream = c.open_stream("co_echo", stream_kind::bidi, {}, o);
  std::thread reader([&] {
    for (int i = 0; i < n; ++i) {
      const auto m = stream.read(20s);
      ASSERT_TRUE(m) << "message " << i << ": " << stream.finish().message;
      ASSERT_EQ(text_of(*m), "m" + std::to_string(i));
    }
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(stream.write_wait("m" + std::to_string(i), 20s), write_result::ok);
  EXPECT_TRUE(stream.half_close());
  reader.join();
  const call_result r = stream.finish(20s);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(test::eventually([&] { return s.log.finished.load() == 1; }));
  {
    // Every step after a wait ran on the method's pool, its home.
    std::lock_guard lock(s.log.mu);
    ASSERT_EQ(s.log.threads.size(), static_cast<std::size_t>(n));
    for (const std::string& t : s.log.threads) ASSERT_TRUE(t.starts_with("rr-default")) << t;
  }
  EXPECT_TRUE(test::eventually([&] {
    return test::frames_alive.load() == 0 && detail::server_seam::coroutine_frames(*s.srv) == 0;
  }));
}

TEST(StreamCoro, ACoroutineHandlerWritesAServerStreamWithinTheCredit) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  constexpr int n = 5000;
  stream_options o;
  o.window_messages = 3;
  client_stream stream = c.open_stream("co_count", stream_kind::server, bytes_of(std::to_string(n)), o);
  for (int i = 0; i < n; ++i) {
    const auto m = stream.read(20s);
    ASSERT_TRUE(m) << "message " << i << ": " << stream.finish().message;
    ASSERT_EQ(text_of(*m), std::to_string(i));
  }
  EXPECT_FALSE(stream.read(20s));
  EXPECT_TRUE(stream.finish(20s).ok());
  EXPECT_TRUE(test::eventually([&] { return s.log.finished.load() == 1; }));
}

TEST(StreamCoro, AHandlerThatLeavesItsStreamOpenOrThrowsEndsItInternal) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  client_stream open = c.open_stream("leaves_open", stream_kind::server);
  const call_result left = open.finish(20s);
  EXPECT_EQ(left.code, status::internal);
  EXPECT_EQ(left.message, "coroutine stream handler finished without ending the stream");
  client_stream throws = c.open_stream("throws", stream_kind::server);
  const auto first = throws.read(20s);
  ASSERT_TRUE(first);
  EXPECT_EQ(text_of(*first), "first");
  const call_result thrown = throws.finish(20s);
  EXPECT_EQ(thrown.code, status::internal);
  EXPECT_EQ(thrown.message, "handler gave up");
  EXPECT_TRUE(test::eventually([&] { return detail::server_seam::coroutine_frames(*s.srv) == 0; }));
}

TEST(StreamCoro, AParkedHandlerEndsWhenItsClientGoesAway) {
  coro_streams_server s;
  {
    auto c = client::connect("127.0.0.1", s.srv->port());
    client_stream stream = c.open_stream("reads_forever", stream_kind::bidi);
    ASSERT_EQ(stream.write_wait("one", 20s), write_result::ok);
    ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
  }  // the handle cancels, the client closes
  EXPECT_TRUE(test::eventually([&] { return s.log.finished.load() == 1; }));
  EXPECT_TRUE(test::eventually([&] {
    return test::frames_alive.load() == 0 && detail::server_seam::coroutine_frames(*s.srv) == 0;
  }));
}

TEST(StreamCoro, StopEndsAParkedHandler) {
  coro_streams_server s;
  auto c = client::connect("127.0.0.1", s.srv->port());
  std::vector<client_stream> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(c.open_stream("reads_forever", stream_kind::bidi));
  ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 3; }));
  s.srv->stop();  // returns (the suite's timeout is the bound) with every frame gone
  EXPECT_EQ(s.log.finished.load(), 3);
  EXPECT_EQ(test::frames_alive.load(), 0);
  EXPECT_EQ(detail::server_seam::coroutine_frames(*s.srv), 0u);
  for (auto& st : streams) EXPECT_NE(st.finish(20s).code, status::ok);
}

// A unary coroutine handler parked on a client stream to another server: stop(), past its drain
// timeout, cancels the frame, which cancels the stream, which wakes the handler.
TEST(StreamCoro, StopCancelsAHandlerFrameParkedOnAClientStream) {
  coro_streams_server backend;
  auto to_backend = client::connect("127.0.0.1", backend.srv->port());
  server_options o = test::threads(1, 1);
  o.drain_timeout = 200ms;
  server proxy(o);
  std::atomic<int> ended_cancelled{0};
  add_coroutine_method(proxy, "tail", [&](deferred_reply& call) -> task<void> {
    alive_marker alive;
    client_stream stream = to_backend.open_stream("silent", stream_kind::server);
    const auto m = co_await co_read(stream);  // nothing ever comes
    const call_result end = co_await co_finish(stream);
    if (!m && end.error == call_error::cancelled) ended_cancelled.fetch_add(1);
    call.fail(status::unavailable, end.message);
  });
  proxy.start();
  auto c = client::connect("127.0.0.1", proxy.port());
  auto pending = c.call_future("tail", bytes_of(""));
  ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
  proxy.stop();
  EXPECT_EQ(ended_cancelled.load(), 1);
  EXPECT_EQ(test::frames_alive.load(), 0);
  EXPECT_EQ(detail::server_seam::coroutine_frames(proxy), 0u);
  EXPECT_NE(pending.get().code, status::ok);
}

// The same on a shard (on_shard): the shard's loop has ended when stop() cancels the frame, so
// the cancelled stream's end resumes the frame on stop()'s own thread, which must not hold the
// frames' registry then (the frame leaves it as it ends).
TEST(StreamCoro, StopCancelsAShardHandlerParkedOnAClientStream) {
  coro_streams_server backend;
  auto to_backend = client::connect("127.0.0.1", backend.srv->port());
  server_options o = test::threads(1, 1);
  o.drain_timeout = 200ms;
  server proxy(o);
  std::atomic<int> ended_cancelled{0};
  add_coroutine_method(
      proxy, "tail",
      [&](deferred_reply& call) -> task<void> {
        alive_marker alive;
        client_stream stream = to_backend.open_stream("silent", stream_kind::server);
        const auto m = co_await co_read(stream);
        if (!m && stream.finish().error == call_error::cancelled) ended_cancelled.fetch_add(1);
        call.fail(status::unavailable, "cancelled");
      },
      on_shard);
  proxy.start();
  auto c = client::connect("127.0.0.1", proxy.port());
  auto pending = c.call_future("tail", bytes_of(""));
  ASSERT_TRUE(test::eventually([&] { return test::frames_alive.load() == 1; }));
  proxy.stop();  // returns (the suite's timeout is the bound)
  EXPECT_EQ(ended_cancelled.load(), 1);
  EXPECT_EQ(test::frames_alive.load(), 0);
  EXPECT_EQ(detail::server_seam::coroutine_frames(proxy), 0u);
  EXPECT_NE(pending.get().code, status::ok);
}

}  // namespace
}  // namespace ringrpc

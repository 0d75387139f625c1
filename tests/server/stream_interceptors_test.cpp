// Interceptors around streams (ringrpc/interceptor.hpp, "Streams") over real loopback: a server
// interceptor refuses an open with its status and the factory never runs; it reads the open's
// metadata as the handler does, and annotates the open for the handler; its after_call sees each stream's final status once, whoever
// ended it (the handler, the client's cancel, the deadline). A client interceptor adds metadata
// to an open, refuses one, and sees each stream's end once.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/call_context.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"
#include "ringrpc/interceptor.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "stream_handlers.hpp"
#include "test_support.hpp"

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

/// A read message as text; "<none>" at the end or a timeout.
std::string read_text(client_stream& s) {
  const auto m = s.read(10s);
  return m ? text_of(std::span<const std::byte>(*m)) : "<none>";
}

std::string find(std::span<const metadata_entry> list, std::string_view key) {
  for (const auto& e : list) {
    if (e.key == key) return e.value;
  }
  return "-";
}

/// Lines recorded by interceptors, under one lock.
struct records {
  std::mutex mu;
  std::vector<std::string> lines;
  void add(std::string s) {
    std::lock_guard lock(mu);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mu);
    return lines;
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return lines.size();
  }
};

/// Authorization: opens whose "token" is not "good" are refused permission_denied.
struct auth_interceptor final : server_interceptor {
  explicit auth_interceptor(records& r) : log(r) {}
  call_verdict before_call(call_context& call) override {
    if (call.metadata().find("token").value_or("") != "good") {
      return call_verdict::refuse(status::permission_denied, "no good token");
    }
    call.annotate("user", "user-" + std::string(call.metadata().find("who").value_or("?")));
    return call_verdict::proceed();
  }
  void after_call(const server_call_summary& done) override {
    log.add("auth.after " + std::string(done.method) + " " + std::string(to_string(done.code)));
  }
  records& log;
};

/// Logging: what it saw at the open (metadata "who", a deadline) and one line per end.
struct logging_interceptor final : server_interceptor {
  explicit logging_interceptor(records& r) : log(r) {}
  call_verdict before_call(call_context& call) override {
    log.add("log.before " + std::string(call.method()) + " who=" +
            std::string(call.metadata().find("who").value_or("-")) + (call.has_deadline() ? " deadline" : ""));
    return call_verdict::proceed();
  }
  void after_call(const server_call_summary& done) override {
    if (done.end < done.start || done.start < done.received) bad_timing = true;
    log.add("log.after " + std::string(done.method) + " " + std::string(to_string(done.code)) +
            " who=" + std::string(done.metadata.find("who").value_or("-")));
  }
  records& log;
  std::atomic<bool> bad_timing{false};
};

detail::frame_view open_frame(std::uint64_t id, std::string_view method, stream_kind kind, std::uint64_t timeout_us,
                              const detail::metadata_to_send* md) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::StreamOpen;
  f.method = method;
  f.stream_kind = static_cast<std::uint8_t>(kind);
  f.timeout_us = timeout_us;
  f.metadata_out = md;
  return f;
}

class stream_interceptors : public ::testing::Test {
 protected:
  void SetUp() override {
    logging = std::make_shared<logging_interceptor>(log);
    server_options o = test::threads(1, 2);
    o.interceptors = {std::make_shared<auth_interceptor>(log), logging};
    srv = std::make_unique<server>(o);
    // Server stream: "who" as the handler sees it, then the count asked for.
    srv->add_stream_method("count", stream_kind::server, [this](server_stream& s, std::span<const std::byte> req) {
      factories.fetch_add(1);
      EXPECT_EQ(s.write("who=" + find(s.metadata(), "who") + " " + std::string(s.annotation("user").value_or("-"))),
                write_result::ok);
      auto h = std::make_unique<count_handler>(std::stoi(text_of(req)));
      h->start(s);
      return h;
    });
    srv->add_stream_method("watch", stream_kind::bidi, [this](server_stream&, std::span<const std::byte>) {
      factories.fetch_add(1);
      return std::make_unique<watch_handler>(watched);
    });
    srv->start();
    c.emplace(client::connect("127.0.0.1", srv->port()));
  }
  void TearDown() override {
    c.reset();
    srv->stop();
  }

  stream_options with(std::vector<metadata_entry> md) {
    stream_options o;
    o.metadata = std::move(md);
    return o;
  }
  /// Waits for `n` lines, then a little longer to catch a second end record.
  std::vector<std::string> settled(std::size_t n) {
    EXPECT_TRUE(eventually([&] { return log.count() >= n; })) << log.count();
    std::this_thread::sleep_for(50ms);
    return log.all();
  }

  records log;
  std::shared_ptr<logging_interceptor> logging;
  std::atomic<int> factories{0};
  watch watched;
  std::unique_ptr<server> srv;
  std::optional<client> c;
};

TEST_F(stream_interceptors, a_refused_open_ends_the_stream_with_the_refusal_and_no_handler) {
  client_stream s = c->open_stream("watch", stream_kind::bidi, {}, with({{"token", "bad"}}));
  const call_result r = s.finish(10s);
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::permission_denied);
  EXPECT_EQ(r.message, "no good token");
  // The refusing interceptor's after_call sees it, once; the one after it never saw the open.
  EXPECT_EQ(settled(1), (std::vector<std::string>{"auth.after watch permission_denied"}));
  EXPECT_EQ(factories.load(), 0);
  EXPECT_EQ(watched.opens.load(), 0);
  EXPECT_TRUE(eventually([&] { return srv->stats()[server_counter::streams_open] == 0; }));
}

TEST_F(stream_interceptors, the_handler_reads_the_metadata_and_annotations_and_the_end_is_seen_once) {
  client_stream s =
      c->open_stream("count", stream_kind::server, bytes_of("3"), with({{"token", "good"}, {"who", "alice"}}));
  EXPECT_EQ(read_text(s), "who=alice user-alice");  // metadata, and the auth's annotation
  for (const char* want : {"0", "1", "2"}) EXPECT_EQ(read_text(s), want);
  const call_result r = s.finish(10s);
  EXPECT_TRUE(r.ok()) << r.message;
  // after_call in the reverse order, each once, with the open's metadata.
  EXPECT_EQ(settled(3), (std::vector<std::string>{"log.before count who=alice", "log.after count ok who=alice",
                                                  "auth.after count ok"}));
  EXPECT_EQ(factories.load(), 1);
  EXPECT_FALSE(logging->bad_timing.load());
}

TEST_F(stream_interceptors, the_end_hook_sees_a_client_cancel_once) {
  client_stream s = c->open_stream("watch", stream_kind::bidi, {}, with({{"token", "good"}}));
  ASSERT_EQ(s.write_wait("m", 10s), write_result::ok);
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  EXPECT_TRUE(s.cancel());
  EXPECT_EQ(settled(3), (std::vector<std::string>{"log.before watch who=-", "log.after watch cancelled who=-",
                                                  "auth.after watch cancelled"}));
  EXPECT_EQ(watched.dones.load(), 1);
  EXPECT_EQ(watched.final_status.load(), status::cancelled);
}

// The server's own deadline, from a raw client that never cancels (a ringrpc client would
// cancel at the same moment, and either end could win).
TEST_F(stream_interceptors, the_end_hook_sees_the_deadline_once) {
  raw_socket sock(srv->port());
  const std::vector<metadata_entry> md{{"token", "good"}, {"who", "bob"}};
  const detail::metadata_to_send pairs{{}, md};
  ASSERT_TRUE(sock.send_frame(open_frame(1, "watch", stream_kind::bidi, 200'000, &pairs)));
  detail::frame_view end;
  std::vector<std::byte> storage;
  ASSERT_TRUE(sock.read_frame(end, storage));
  EXPECT_EQ(end.kind, wire::Kind::Error);
  EXPECT_EQ(end.code, status::deadline_exceeded);
  EXPECT_EQ(settled(3), (std::vector<std::string>{"log.before watch who=bob deadline",
                                                  "log.after watch deadline_exceeded who=bob",
                                                  "auth.after watch deadline_exceeded"}));
  EXPECT_EQ(watched.final_status.load(), status::deadline_exceeded);
}

// --- the client's interceptors

/// Adds "who" to every call and stream open, refuses methods named "forbidden", and records
/// each after_call.
struct client_side final : client_interceptor {
  explicit client_side(records& r) : log(r) {}
  call_verdict before_call(client_call& call) override {
    if (call.method == "forbidden") return call_verdict::refuse(status::permission_denied, "not from here");
    call.metadata.push_back({"who", "carol"});
    call.metadata.push_back({"token", "good"});
    return call_verdict::proceed();
  }
  void after_call(const client_call_summary& done) override {
    log.add("client.after " + std::string(done.method) + " " + std::string(to_string(done.outcome.error)) + " " +
            std::string(to_string(done.outcome.code)) + " attempts=" + std::to_string(done.attempts));
  }
  records& log;
};

TEST_F(stream_interceptors, a_client_interceptor_adds_metadata_the_server_sees_and_sees_the_end_once) {
  records client_log;
  client_options o;
  o.interceptors = {std::make_shared<client_side>(client_log)};
  client cc = client::connect("127.0.0.1", srv->port(), o);
  client_stream s = cc.open_stream("count", stream_kind::server, bytes_of("2"));
  EXPECT_EQ(read_text(s), "who=carol user-carol");
  const call_result r = s.finish(10s);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(eventually([&] { return client_log.count() >= 1; }));
  // A cancelled stream: the end the handle made, seen once.
  client_stream w = cc.open_stream("watch", stream_kind::bidi);
  ASSERT_EQ(w.write_wait("m", 10s), write_result::ok);
  ASSERT_TRUE(eventually([&] { return watched.messages.load() == 1; }));
  EXPECT_TRUE(w.cancel());
  EXPECT_TRUE(eventually([&] { return client_log.count() >= 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client_log.all(), (std::vector<std::string>{"client.after count none ok attempts=1",
                                                        "client.after watch cancelled cancelled attempts=1"}));
  EXPECT_EQ(settled(6)[0], "log.before count who=carol");
}

TEST_F(stream_interceptors, a_client_interceptor_refuses_an_open_and_nothing_is_sent) {
  records client_log;
  client_options o;
  o.interceptors = {std::make_shared<client_side>(client_log)};
  client cc = client::connect("127.0.0.1", srv->port(), o);
  client_stream s = cc.open_stream("forbidden", stream_kind::bidi);
  const call_result r = s.finish(1s);
  EXPECT_EQ(r.error, call_error::intercepted);
  EXPECT_EQ(r.code, status::permission_denied);
  EXPECT_EQ(r.message, "not from here");
  EXPECT_EQ(client_log.all(), (std::vector<std::string>{"client.after forbidden intercepted permission_denied attempts=0"}));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(log.count(), 0u);  // the server heard nothing
}

}  // namespace
}  // namespace ringrpc::test

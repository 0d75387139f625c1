// Response metadata, error details, the new statuses and the caller's address, end to end: a
// real server and a real client over loopback, a channel, one-way messages with options, and a
// hostile server (a plain socket) whose response metadata exceeds the client's caps.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using namespace std::chrono_literals;

std::span<const std::byte> span_of(const std::string& s) { return bytes_of(s); }

std::string text(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// The threads that answer deferred replies: joined before their server is destroyed (a thread
// still inside its answer must not outlive the server it answers through).
std::mutex answering_mu;
std::vector<std::thread> answering;
void join_answering_threads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(answering_mu);
    threads.swap(answering);
  }
  for (auto& t : threads) t.join();
}

// A server whose methods exercise the new call_context API.
std::unique_ptr<server> make_server(server_options o = {}) {
  o.readers = 1;
  o.handlers = 2;
  auto s = std::make_unique<server>(o);
  // Fails with the status whose number the payload spells, with details "d<number>".
  s->add_method("fail_with", [](call_context& c) {
    const int n = std::stoi(text(c.payload()));
    const std::string details = std::string("d").append(std::to_string(n));
    c.fail(static_cast<status>(n), "failed on purpose", span_of(details));
  });
  // Each request pair comes back as header "echo-<key>"; the trailer counts them.
  s->add_method("mirror", [](call_context& c) {
    std::size_t n = 0;
    for (const metadata_item item : c.metadata()) {
      ASSERT_TRUE(c.add_header("echo-" + std::string(item.key), item.value));
      ++n;
    }
    ASSERT_TRUE(c.add_trailer("count", std::to_string(n)));
    c.reply(c.payload());
  });
  // An error with headers, trailers and details together.
  s->add_method("refuse", [](call_context& c) {
    ASSERT_TRUE(c.add_header("retry-hint", "later"));
    ASSERT_TRUE(c.add_trailer("cost", "3"));
    const std::byte details[] = {std::byte{0}, std::byte{1}, std::byte{0xff}};
    c.fail(status::resource_exhausted, "quota", details);
  });
  // The same, answered later from another thread through a deferred_reply.
  s->add_method("later", [](call_context& c) {
    ASSERT_TRUE(c.add_header("before-defer", "1"));
    deferred_reply d = c.defer();
    EXPECT_FALSE(c.add_header("on-context-after-defer", "x"));
    std::lock_guard lock(answering_mu);
    answering.emplace_back([d = std::move(d)]() mutable {
      EXPECT_TRUE(d.add_header("from-thread", "2"));
      EXPECT_TRUE(d.add_trailer("done", "yes"));
      EXPECT_FALSE(d.peer_address().empty());
      const std::string details = "later-details";
      EXPECT_TRUE(d.fail(status::aborted, "conflict", span_of(details)));
      EXPECT_FALSE(d.add_header("after-answer", "x"));
    });
  });
  s->add_method("peer", [](call_context& c) { c.reply(c.peer_address()); });
  s->start();
  return s;
}

TEST(response_metadata, each_new_status_reaches_the_client_by_number_name_and_details) {
  auto srv = make_server();
  auto c = client::connect("127.0.0.1", srv->port());
  const std::pair<status, int> expected[] = {
      {status::not_found, 5},       {status::invalid_argument, 3},   {status::already_exists, 6},
      {status::failed_precondition, 9}, {status::unavailable, 14}, {status::unimplemented, 12},
      {status::resource_exhausted, 8}, {status::aborted, 10},        {status::out_of_range, 11},
      {status::data_loss, 15},      {status::unknown, 2}};
  int number = 11;
  for (const auto& [st, grpc] : expected) {
    ASSERT_EQ(static_cast<int>(st), number) << "codes are appended in the documented order";
    const call_result r = c.call("fail_with", std::to_string(number));
    EXPECT_EQ(r.error, call_error::server_status);
    EXPECT_EQ(r.code, st) << to_string(st);
    EXPECT_EQ(r.message, "failed on purpose");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.details.data()), r.details.size()),
              std::string("d").append(std::to_string(number)));
    EXPECT_NE(to_string(st), "unknown_status");
    EXPECT_EQ(grpc_code(st), grpc);
    ++number;
  }
  // A number this build does not know (a newer server): kept, and named "unknown_status".
  const call_result r = c.call("fail_with", "40");
  EXPECT_EQ(static_cast<int>(r.code), 40);
  EXPECT_EQ(to_string(r.code), "unknown_status");
  EXPECT_EQ(grpc_code(r.code), 2);
}

TEST(response_metadata, headers_and_trailers_travel_with_a_reply_sync_and_async) {
  auto srv = make_server();
  auto c = client::connect("127.0.0.1", srv->port());
  call_options o;
  o.metadata = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
                {"tenant", std::string("a\0b", 3)}};
  const call_result r = c.call("mirror", "payload", o);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "payload");
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0].key, "echo-traceparent");
  ASSERT_NE(r.find_header("echo-tenant"), nullptr);
  EXPECT_EQ(*r.find_header("echo-tenant"), std::string("a\0b", 3));
  ASSERT_EQ(r.trailers.size(), 1u);
  EXPECT_EQ(*r.find_trailer("count"), "2");
  EXPECT_EQ(r.find_trailer("echo-tenant"), nullptr);
  EXPECT_TRUE(r.details.empty());

  // The views of call_outcome, inside the callback.
  std::promise<std::string> seen;
  c.call_async(
      "mirror", bytes_of("x"),
      [&](const call_outcome& out) {
        std::string s = std::string(out.headers.find("echo-tenant").value_or("none")) + "|" +
                        std::string(out.trailers.find("count").value_or("none")) + "|" +
                        std::to_string(out.headers.size());
        seen.set_value(s);
      },
      o);
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), std::string("a\0b", 3) + "|2|2");

  // A call without request metadata: no headers, one trailer.
  const call_result plain = c.call("mirror", "p");
  EXPECT_TRUE(plain.headers.empty());
  EXPECT_EQ(*plain.find_trailer("count"), "0");
}

TEST(response_metadata, an_error_carries_headers_trailers_and_details) {
  auto srv = make_server();
  auto c = client::connect("127.0.0.1", srv->port());
  const call_result r = c.call("refuse", "");
  EXPECT_EQ(r.error, call_error::server_status);
  EXPECT_EQ(r.code, status::resource_exhausted);
  EXPECT_EQ(r.message, "quota");
  EXPECT_EQ(*r.find_header("retry-hint"), "later");
  EXPECT_EQ(*r.find_trailer("cost"), "3");
  const std::vector<std::byte> details = {std::byte{0}, std::byte{1}, std::byte{0xff}};
  EXPECT_EQ(r.details, details);
}

TEST(response_metadata, a_deferred_reply_carries_them_from_another_thread) {
  auto srv = make_server();
  auto c = client::connect("127.0.0.1", srv->port());
  const call_result r = c.call("later", "");
  EXPECT_EQ(r.code, status::aborted);
  EXPECT_EQ(r.message, "conflict");
  EXPECT_EQ(*r.find_header("before-defer"), "1");
  EXPECT_EQ(*r.find_header("from-thread"), "2");
  EXPECT_EQ(r.find_header("on-context-after-defer"), nullptr);
  EXPECT_EQ(*r.find_trailer("done"), "yes");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.details.data()), r.details.size()), "later-details");
  join_answering_threads();
}

TEST(response_metadata, the_server_refuses_bad_keys_repeats_pairs_past_its_caps_and_late_pairs) {
  server_options o;
  o.max_metadata_entries = 3;
  o.max_metadata_bytes = 64;
  o.readers = 1;
  o.handlers = 1;
  std::mutex mu;
  std::vector<bool> results;
  auto srv = std::make_unique<server>(o);
  srv->add_method("probe", [&](call_context& c) {
    std::vector<bool> got;
    got.push_back(c.add_header("Upper", "x"));               // not a lowercase token
    got.push_back(c.add_header("", "x"));                    // empty
    got.push_back(c.add_header("a", "1"));                   // ok (1 of 3)
    got.push_back(c.add_header("a", "2"));                   // repeated among headers
    got.push_back(c.add_trailer("a", "3"));                  // ok: trailers are their own list (2 of 3)
    got.push_back(c.add_trailer("big", std::string(80, 'v')));  // past 64 bytes
    got.push_back(c.add_trailer("b", "4"));                  // ok (3 of 3)
    got.push_back(c.add_header("c", "5"));                   // a 4th pair: past 3 entries
    c.reply("done");
    got.push_back(c.add_trailer("late", "6"));               // after the answer
    std::lock_guard lock(mu);
    results = got;
  });
  srv->add_method("one_way_probe", [&](call_context& c) {
    std::lock_guard lock(mu);
    results = {c.add_header("k", "v")};
  });
  srv->start();
  auto c = client::connect("127.0.0.1", srv->port());
  const call_result r = c.call("probe", "");
  ASSERT_TRUE(r.ok()) << r.message;
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(results, (std::vector<bool>{false, false, true, false, true, false, true, false, false}));
  }
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].value, "1");
  ASSERT_EQ(r.trailers.size(), 2u);
  EXPECT_EQ(*r.find_trailer("a"), "3");
  EXPECT_EQ(*r.find_trailer("b"), "4");

  ASSERT_TRUE(c.send_one_way("one_way_probe", bytes_of("")));
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mu);
      if (results.size() == 1) break;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(results, std::vector<bool>{false}) << "a one-way message is never answered";
}

TEST(response_metadata, the_handler_sees_the_callers_address) {
  auto srv = make_server();
  auto c = client::connect("127.0.0.1", srv->port());
  const call_result r = c.call("peer", "");
  ASSERT_TRUE(r.ok());
  const std::string addr(r.payload_string());
  ASSERT_TRUE(addr.starts_with("127.0.0.1:")) << addr;
  const int port = std::stoi(addr.substr(10));
  EXPECT_GT(port, 0);
  EXPECT_NE(port, srv->port()) << "the caller's port, not the server's";
}

TEST(response_metadata, one_way_messages_carry_call_options_metadata) {
  std::promise<std::string> got;
  std::atomic<bool> once{false};
  server srv(test::threads(1, 1));
  srv.add_method("note", [&](call_context& c) {
    if (once.exchange(true)) return;
    got.set_value(std::string(c.metadata().find("traceparent").value_or("none")) + "|" +
                  std::string(c.metadata().find("conn").value_or("none")) + "|" + (c.has_deadline() ? "d" : "-"));
  });
  srv.start();
  client_options co;
  co.metadata = {{"conn", "c1"}};
  auto c = client::connect("127.0.0.1", srv.port(), co);
  call_options opts;
  opts.metadata = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
  opts.timeout = 5s;
  ASSERT_TRUE(c.send_one_way("note", bytes_of("x"), opts));
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01|c1|d");
}

TEST(response_metadata, channel_call_options_metadata_reaches_the_server_and_headers_come_back) {
  auto srv = make_server();
  channel ch = channel::create("127.0.0.1:" + std::to_string(srv->port()));
  ASSERT_TRUE(ch.wait_for_members(1, 10s));
  channel_call_options o;
  o.metadata = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
  const call_result r = ch.call("mirror", "p", o);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_NE(r.find_header("echo-traceparent"), nullptr);
  EXPECT_EQ(*r.find_header("echo-traceparent"), o.metadata[0].value);
  EXPECT_EQ(*r.find_trailer("count"), "1");
}

TEST(response_metadata, a_channel_sends_one_way_messages_with_metadata) {
  std::promise<std::string> got;
  std::atomic<bool> once{false};
  server srv(test::threads(1, 1));
  srv.add_method("note", [&](call_context& c) {
    if (once.exchange(true)) return;
    got.set_value(std::string(c.metadata().find("traceparent").value_or("none")) + "|" + std::string(text(c.payload())));
  });
  srv.start();
  channel ch = channel::create("127.0.0.1:" + std::to_string(srv.port()));
  ASSERT_TRUE(ch.wait_for_members(1, 10s));
  channel_call_options o;
  o.metadata = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
  ASSERT_TRUE(ch.send_one_way("note", bytes_of("one-way"), o));
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), o.metadata[0].value + "|one-way");
  ch.close();
  EXPECT_FALSE(ch.send_one_way("note", bytes_of("x"))) << "a closed channel refuses";
}

// --- a hostile server: a plain listening socket that answers with what it likes

using fake_server = test::scripted_server;

TEST(response_metadata, a_hostile_servers_oversized_response_metadata_fails_the_call_not_the_connection) {
  fake_server fake;
  client_options co;
  co.max_response_metadata_entries = 4;
  co.max_response_metadata_bytes = 100;
  auto c = client::connect("127.0.0.1", fake.port(), co);
  fake.accept();

  struct attempt {
    const char* name;
    std::vector<metadata_entry> headers, trailers;
    const char* expect;  // in the message
  };
  const std::vector<attempt> attempts = {
      {"too many pairs", {{"a", "1"}, {"b", "2"}, {"c", "3"}}, {{"d", "4"}, {"e", "5"}},
       "exceed the client's max_response_metadata_entries (4)"},
      {"too many bytes", {{"a", std::string(60, 'x')}}, {{"b", std::string(60, 'y')}},
       "exceed the client's max_response_metadata_bytes (100)"},
      {"bad key", {{"Bad Key", "1"}}, {}, "is not a lowercase token"},
      {"repeated key", {}, {{"k", "1"}, {"k", "2"}}, "appears twice"},
  };
  for (const attempt& a : attempts) {
    auto fut = c.call_future("m", bytes_of(""));
    const std::uint64_t id = fake.read_request();
    ASSERT_NE(id, 0u) << a.name;
    detail::frame_view f;
    f.call_id = id;
    f.kind = wire::Kind::Reply;
    const detail::metadata_to_send h{{}, a.headers}, t{{}, a.trailers};
    f.metadata_out = &h;
    f.trailers_out = &t;
    ASSERT_TRUE(fake.send_frame(f));
    ASSERT_EQ(fut.wait_for(10s), std::future_status::ready) << a.name;
    const call_result r = fut.get();
    EXPECT_EQ(r.error, call_error::protocol_error) << a.name;
    EXPECT_NE(r.message.find(a.expect), std::string::npos) << a.name << ": " << r.message;
    EXPECT_TRUE(r.headers.empty());
    EXPECT_TRUE(c.connected()) << a.name << ": the connection stays";
  }
  // Exactly at the caps: accepted, on the same connection.
  auto fut = c.call_future("m", bytes_of(""));
  const std::uint64_t id = fake.read_request();
  ASSERT_NE(id, 0u);
  const std::vector<metadata_entry> headers = {{"a", std::string(49, 'x')}}, trailers = {{"b", std::string(49, 'y')}};
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::Reply;
  f.payload = bytes_of("fine");
  const detail::metadata_to_send h{{}, headers}, t{{}, trailers};
  f.metadata_out = &h;
  f.trailers_out = &t;
  ASSERT_TRUE(fake.send_frame(f));
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  const call_result r = fut.get();
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.payload_string(), "fine");
  EXPECT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.trailers.size(), 1u);
}

}  // namespace
}  // namespace ringrpc

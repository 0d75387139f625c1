// The traps of the call API, closed (issue 28, item 6): each test here failed (or hung, or
// crashed) before. A deferred payload read while the stopping server answers for it; blocking
// waits on a client runtime's thread; callbacks that throw, inline or not; a sync call on a
// hung peer; deadlines computed from a handler's remaining() that overflowed or went negative.

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using namespace std::chrono_literals;

std::unique_ptr<server> make_server(const std::function<void(server&)>& add, server_options o = {}) {
  o.readers = 1;
  o.handlers = 2;
  auto s = std::make_unique<server>(o);
  add(*s);
  s->start();
  return s;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer's allocator reports a dangling read itself; a smaller payload keeps it quick.
constexpr std::size_t big_payload = 4u << 20;
#else
// A payload larger than glibc's largest mmap threshold: freeing it unmaps it, so a dangling
// read crashes instead of reading stale bytes by luck.
constexpr std::size_t big_payload = 40u << 20;
#endif

TEST(call_hazards, deferred_payload_stays_readable_when_the_stop_answers_for_it) {
  server_options o;
  o.drain_timeout = 300ms;
  o.max_frame_bytes = big_payload + 4096;
  std::promise<deferred_reply> handed;
  auto s = make_server([&](server& sv) {
    sv.add_method("keep", [&](call_context& ctx) { handed.set_value(ctx.defer()); });
  }, o);
  client_options co;
  co.max_frame_bytes = 1u << 20;
  auto c = client::connect("127.0.0.1", s->port(), co);
  std::vector<std::byte> payload(big_payload);
  std::byte block[4093];  // a prime length: the pattern does not repeat at buffer boundaries
  for (std::size_t i = 0; i < sizeof block; ++i) block[i] = static_cast<std::byte>(i * 7 + 3);
  for (std::size_t at = 0; at < payload.size(); at += sizeof block) {
    std::memcpy(payload.data() + at, block, std::min(sizeof block, payload.size() - at));
  }
  auto f = c.call_future("keep", payload, {.timeout = 30s});
  deferred_reply later = handed.get_future().get();
  const std::span<const std::byte> view = later.payload();  // a worker holds this span...
  ASSERT_EQ(view.size(), big_payload);
  s->stop();  // ...while the drain timeout passes and the server answers for the call
  const call_result r = f.get();
  EXPECT_EQ(r.code, status::shutting_down) << r.message;
  // The server has written the answer and released the call; the span is still the request.
  EXPECT_EQ(std::memcmp(view.data(), payload.data(), view.size()), 0);
  EXPECT_EQ(later.payload().data(), view.data()) << "payload() changed under its holder";
  EXPECT_FALSE(later.reply(std::string_view("too late")));
}

TEST(call_hazards, future_get_on_the_runtime_thread_throws_instead_of_hanging) {
  auto s = make_server([](server& sv) { add_builtin_methods(sv); });
  auto c = client::connect("127.0.0.1", s->port());
  std::promise<std::string> what;
  c.call_async("echo", bytes_of("first"), [&](const call_outcome&) {
    auto inner = c.call_future("echo", bytes_of("second"));
    what.set_value(test::outcome_of_get(inner));  // the reply needs this very thread
  });
  auto f = what.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "get() on the runtime thread hung";
  EXPECT_NE(f.get().find("client runtime's thread"), std::string::npos);
}

TEST(call_hazards, a_ready_future_may_be_read_on_the_runtime_thread) {
  auto s = make_server([](server& sv) { add_builtin_methods(sv); });
  auto c = client::connect("127.0.0.1", s->port());
  auto ready = std::make_shared<reply_future<call_result>>(c.call_future("echo", bytes_of("x")));
  ready->wait();
  std::promise<bool> ok;
  c.call_async("echo", bytes_of("y"), [&](const call_outcome&) { ok.set_value(ready->get().ok()); });
  EXPECT_TRUE(ok.get_future().get());
}

TEST(call_hazards, blocking_calls_and_connect_on_any_runtime_thread_throw_at_once) {
  auto s = make_server([](server& sv) { add_builtin_methods(sv); });
  auto c = client::connect("127.0.0.1", s->port());
  auto other = client::connect("127.0.0.1", s->port());  // its own runtime
  std::promise<std::vector<std::string>> errors;
  c.call_async("echo", bytes_of("x"), [&](const call_outcome&) {
    std::vector<std::string> e;
    try {
      client::connect("127.0.0.1", s->port());
      e.push_back("connect returned");
    } catch (const std::logic_error& x) {
      e.push_back(x.what());
    }
    try {
      other.call("echo", std::string_view("y"));  // another runtime's client: still a stall here
      e.push_back("call returned");
    } catch (const std::logic_error& x) {
      e.push_back(x.what());
    }
    errors.set_value(e);
  });
  auto f = errors.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto e = f.get();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NE(e[0].find("connect"), std::string::npos) << e[0];
  EXPECT_NE(e[0].find("runtime's thread"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("runtime's thread"), std::string::npos) << e[1];
}

TEST(call_hazards, a_throwing_callback_is_reported_the_same_way_inline_or_not) {
  auto s = make_server([](server& sv) { add_builtin_methods(sv); });
  client_options o;
  o.max_pending_calls = 1;
  auto c = client::connect("127.0.0.1", s->port(), o);
  std::atomic<int> threw{0};
  auto thrower = [&](const call_outcome&) {
    threw++;
    throw std::runtime_error("callback failed");
  };
  // One call fills the connection; the next is refused inline, on this thread.
  std::promise<void> hold;
  auto held = hold.get_future().share();
  c.call_async("sleep", bytes_of("200000"), [held](const call_outcome&) {}, {.timeout = 5s});
  EXPECT_NO_THROW(c.call_async("echo", bytes_of("x"), thrower)) << "an inline callback's exception escaped";
  EXPECT_EQ(threw.load(), 1);
  // On the runtime thread: caught there too, and the runtime goes on.
  std::this_thread::sleep_for(400ms);
  c.call_async("echo", bytes_of("x"), thrower);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (threw.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(threw.load(), 2);
  EXPECT_TRUE(c.call("echo", std::string_view("still fine"), {.timeout = 5s}).ok());
  // And a closed client's inline refusal.
  c.close();
  EXPECT_NO_THROW(c.call_async("echo", bytes_of("x"), thrower));
  EXPECT_EQ(threw.load(), 3);
}

TEST(call_hazards, sync_calls_have_a_finite_default_deadline) {
  EXPECT_GT(client_options{}.sync_call_timeout.count(), 0);
  EXPECT_LE(client_options{}.sync_call_timeout, std::chrono::microseconds(std::chrono::minutes(5)));
  std::atomic<bool> release{false};
  auto s = make_server([&](server& sv) {
    sv.add_method("hang", [&](call_context& ctx) {
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!release && !ctx.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    });
  });
  client_options o;
  o.sync_call_timeout = 300ms;  // default_timeout stays 0, as by default
  auto c = client::connect("127.0.0.1", s->port(), o);
  const auto t0 = std::chrono::steady_clock::now();
  const call_result r = c.call("hang", std::string_view("x"));
  EXPECT_EQ(r.error, call_error::timeout) << r.message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 9s) << "the sync call waited for the hung handler";
  release = true;
}

TEST(call_hazards, remaining_without_a_deadline_does_not_overflow_and_a_negative_one_is_refused) {
  std::atomic<bool> saw_deadline{true};
  auto s = make_server([&](server& sv) {
    sv.add_method("m", [&](call_context& ctx) {
      saw_deadline = ctx.has_deadline();
      ctx.reply(std::string_view("ran"));
    });
  });
  auto c = client::connect("127.0.0.1", s->port());
  // What a handler without a deadline hands on: remaining() is max(), cast down.
  call_options o;
  o.timeout = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::nanoseconds::max());
  const call_result r = c.call("m", std::string_view("x"), o);
  EXPECT_TRUE(r.ok()) << to_string(r.error) << ": " << r.message;
  EXPECT_FALSE(saw_deadline.load());
  // A deadline that passed: refused at once, nothing sent.
  const auto before = s->stats()[ringrpc::server_counter::calls_received];
  o.timeout = -5ms;
  const call_result late = c.call("m", std::string_view("x"), o);
  EXPECT_EQ(late.error, call_error::timeout);
  EXPECT_EQ(late.code, status::deadline_exceeded);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(s->stats()[ringrpc::server_counter::calls_received], before);
}

}  // namespace
}  // namespace ringrpc

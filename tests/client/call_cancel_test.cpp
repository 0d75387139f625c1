// Deadlines and cancellation that propagate (docs/execution.md, "Deadlines and cancellation"):
// real servers and clients on loopback. A handler's calls inherit its deadline and are
// cancelled with it; a per-call stop_token sends a Cancel frame; on_cancel hooks run once and
// never after the call was answered.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "ringrpc/channel.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::bytes_of;
using namespace std::chrono_literals;

using test::eventually;

std::unique_ptr<server> make_server(const std::function<void(server&)>& add, unsigned handlers = 2,
                                    std::chrono::milliseconds drain = 5000ms) {
  server_options o = test::threads(1, handlers);
  o.drain_timeout = drain;
  auto s = std::make_unique<server>(o);
  add(*s);
  s->start();
  return s;
}

// What one server of the chain saw.
struct seen {
  std::atomic<bool> started{false};
  std::atomic<bool> had_deadline{false};
  std::atomic<std::int64_t> remaining_us{0};
  std::atomic<bool> handler_saw_cancel{false};
  std::atomic<int> hooks{0};
  std::atomic<int> child_error{-1};  // call_error of the call it made, as an int
};

// Polls cancelled() for up to 10 s, as a handler doing long work would.
void work_until_cancelled(call_context& ctx, seen& s) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!ctx.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  s.handler_saw_cancel = ctx.cancelled();
  ctx.fail(status::cancelled, "gave up");
}

void note_entry(call_context& ctx, seen& s) {
  s.had_deadline = ctx.has_deadline();
  s.remaining_us = std::chrono::duration_cast<std::chrono::microseconds>(ctx.remaining()).count();
  ctx.on_cancel([&s] { s.hooks.fetch_add(1); });
  s.started = true;
}

TEST(call_cancel, chain_passes_the_deadline_and_the_cancellation_down) {
  seen a, b, c;
  auto sc = make_server([&](server& s) {
    s.add_method("c.work", [&](call_context& ctx) {
      note_entry(ctx, c);
      work_until_cancelled(ctx, c);
    });
  });
  auto to_c = client::connect("127.0.0.1", sc->port());
  auto sb = make_server([&](server& s) {
    s.add_method("b.work", [&](call_context& ctx) {
      note_entry(ctx, b);
      // A plain synchronous call from the handler: no options name the parent.
      const call_result r = to_c.call("c.work", std::string_view("x"));
      b.child_error = static_cast<int>(r.error);
      b.handler_saw_cancel = ctx.cancelled();
      ctx.fail(status::cancelled, "child ended");
    });
  });
  auto to_b = client::connect("127.0.0.1", sb->port());
  auto sa = make_server([&](server& s) {
    s.add_method("a.work", [&](call_context& ctx) {
      note_entry(ctx, a);
      std::this_thread::sleep_for(300ms);  // time passes: C must see less than the caller set
      const call_result r = to_b.call("b.work", std::string_view("x"));
      a.child_error = static_cast<int>(r.error);
      ctx.fail(status::cancelled, "child ended");
    });
  });
  auto outer = client::connect("127.0.0.1", sa->port());

  std::stop_source stop;
  call_options o;
  o.timeout = 5s;
  o.cancel = stop.get_token();
  std::promise<call_result> done;
  outer.call_async("a.work", bytes_of("x"), [&](const call_outcome& r) { done.set_value(call_result::from(r)); }, o);
  ASSERT_TRUE(eventually([&] { return c.started.load(); })) << "the chain never reached C";

  // The deadline came down the chain, counting down rather than starting afresh.
  EXPECT_TRUE(c.had_deadline.load());
  EXPECT_GT(c.remaining_us.load(), 0);
  EXPECT_LE(c.remaining_us.load(), (5s - 300ms) / 1us) << "C's deadline was reset, not inherited";
  EXPECT_LE(c.remaining_us.load(), b.remaining_us.load());
  EXPECT_LE(b.remaining_us.load(), a.remaining_us.load());

  stop.request_stop();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const call_result r = f.get();
  EXPECT_EQ(r.error, call_error::cancelled) << r.message;
  EXPECT_EQ(r.code, status::cancelled);

  // Everyone downstream saw it: handlers polling, hooks, Cancel frames counted by B and C.
  EXPECT_TRUE(eventually([&] { return c.handler_saw_cancel.load() && b.handler_saw_cancel.load(); }));
  EXPECT_TRUE(eventually([&] { return a.hooks.load() == 1 && b.hooks.load() == 1 && c.hooks.load() == 1; }))
      << a.hooks << " " << b.hooks << " " << c.hooks;
  EXPECT_TRUE(eventually([&] { return sc->stats()[ringrpc::server_counter::cancel_requests] >= 1; })) << "C's server counted no Cancel";
  EXPECT_GE(sb->stats()[ringrpc::server_counter::cancel_requests], 1u);
  EXPECT_GE(sa->stats()[ringrpc::server_counter::cancel_requests], 1u);
  EXPECT_TRUE(eventually([&] { return b.child_error.load() == static_cast<int>(call_error::cancelled); }));
  EXPECT_TRUE(eventually([&] { return a.child_error.load() == static_cast<int>(call_error::cancelled); }));
}

TEST(call_cancel, expired_deadline_is_refused_by_the_handlers_client_without_a_frame) {
  std::atomic<int> b_calls{0};
  auto sb = make_server([&](server& s) {
    s.add_method("b.work", [&](call_context& ctx) {
      b_calls.fetch_add(1);
      ctx.reply(std::string_view("ran"));
    });
  });
  auto to_b = client::connect("127.0.0.1", sb->port());
  ASSERT_TRUE(to_b.call("b.work", std::string_view("warm-up"), {}).ok());
  const auto received_before = sb->stats()[ringrpc::server_counter::calls_received];
  const auto bytes_before = sb->stats()[ringrpc::server_counter::bytes_in];
  std::promise<call_result> child;
  auto sa = make_server([&](server& s) {
    s.add_method("a.work", [&](call_context& ctx) {
      while (ctx.remaining() > 0ns) std::this_thread::sleep_for(5ms);  // outlive the deadline
      child.set_value(to_b.call("b.work", std::string_view("late")));
      // Answered well after the caller's deadline: a reply just past it could reach a client
      // whose loop, on a busy machine, had not yet acted on its own timer.
      std::this_thread::sleep_for(300ms);
      ctx.reply(std::string_view("done"));
    });
  });
  auto outer = client::connect("127.0.0.1", sa->port());
  const call_result r = outer.call("a.work", std::string_view("x"), {.timeout = 200ms});
  EXPECT_EQ(r.error, call_error::timeout);
  auto f = child.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const call_result c = f.get();
  EXPECT_EQ(c.error, call_error::timeout) << c.message;
  EXPECT_EQ(c.code, status::deadline_exceeded);
  std::this_thread::sleep_for(100ms);  // anything sent would have arrived by now
  EXPECT_EQ(sb->stats()[ringrpc::server_counter::calls_received], received_before) << "a frame went out for an expired call";
  EXPECT_EQ(sb->stats()[ringrpc::server_counter::bytes_in], bytes_before);
  EXPECT_EQ(b_calls.load(), 1);
}

TEST(call_cancel, per_call_cancel_sends_a_cancel_frame_and_runs_the_handlers_hook) {
  seen s;
  auto srv = make_server([&](server& sv) {
    sv.add_method("slow", [&](call_context& ctx) {
      note_entry(ctx, s);
      work_until_cancelled(ctx, s);
    });
  });
  auto c = client::connect("127.0.0.1", srv->port());
  std::stop_source stop;
  call_options o;
  o.cancel = stop.get_token();
  auto f = c.call_future("slow", bytes_of("x"), o);
  ASSERT_TRUE(eventually([&] { return s.started.load(); }));
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::cancel_requests], 0u);
  stop.request_stop();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const call_result r = f.get();
  EXPECT_EQ(r.error, call_error::cancelled);
  EXPECT_EQ(to_string(r.error), "cancelled");
  EXPECT_TRUE(eventually([&] { return srv->stats()[ringrpc::server_counter::cancel_requests] == 1; })) << "no Cancel frame arrived";
  EXPECT_TRUE(eventually([&] { return s.hooks.load() == 1; })) << "the handler's on_cancel hook did not run";
  EXPECT_TRUE(eventually([&] { return s.handler_saw_cancel.load(); }));
  stop.request_stop();  // again: nothing more happens
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::cancel_requests], 1u);
  EXPECT_EQ(s.hooks.load(), 1);
  // The connection is fine afterwards.
  EXPECT_TRUE(c.call("ringrpc.ping", std::string_view(), {.timeout = 5s}).ok());
}

TEST(call_cancel, stop_requested_before_the_call_fails_it_unsent) {
  std::atomic<int> runs{0};
  auto srv = make_server([&](server& sv) { sv.add_method("m", [&](call_context& ctx) { runs++; ctx.reply(""); }); });
  auto c = client::connect("127.0.0.1", srv->port());
  std::stop_source stop;
  stop.request_stop();
  call_options o;
  o.cancel = stop.get_token();
  const call_result r = c.call("m", std::string_view("x"), o);
  EXPECT_EQ(r.error, call_error::cancelled);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(srv->stats()[ringrpc::server_counter::calls_received], 0u);
  EXPECT_EQ(runs.load(), 0);
}

TEST(call_cancel, deferred_reply_names_the_parent_and_its_hook_answers) {
  seen c;
  auto sc = make_server([&](server& s) {
    s.add_method("c.work", [&](call_context& ctx) {
      note_entry(ctx, c);
      work_until_cancelled(ctx, c);
    });
  });
  auto to_c = client::connect("127.0.0.1", sc->port());
  std::atomic<bool> hook_answered{false};
  std::atomic<int> child_error{-1};
  std::vector<std::thread> workers;
  std::mutex workers_mu;
  auto sb = make_server([&](server& s) {
    s.add_method("b.work", [&](call_context& ctx) {
      auto later = std::make_shared<deferred_reply>(ctx.defer());
      std::lock_guard lock(workers_mu);
      workers.emplace_back([&, later] {
        // Another thread, after the handler returned: the parent is named explicitly.
        later->on_cancel([&, later] { hook_answered = later->fail(status::cancelled, "hook answered"); });
        call_options o;
        o.parent = *later;
        const call_result r = to_c.call("c.work", std::string_view("x"), o);
        child_error = static_cast<int>(r.error);
      });
    });
  });
  auto outer = client::connect("127.0.0.1", sb->port());
  std::stop_source stop;
  call_options o;
  o.timeout = 4s;
  o.cancel = stop.get_token();
  auto f = outer.call_future("b.work", bytes_of("x"), o);
  ASSERT_TRUE(eventually([&] { return c.started.load(); }));
  EXPECT_TRUE(c.had_deadline.load()) << "the deferred call's deadline did not pass on";
  EXPECT_LE(c.remaining_us.load(), (4s / 1us));
  stop.request_stop();
  EXPECT_EQ(f.get().error, call_error::cancelled);
  EXPECT_TRUE(eventually([&] { return hook_answered.load(); }));
  EXPECT_TRUE(eventually([&] { return child_error.load() == static_cast<int>(call_error::cancelled); }));
  EXPECT_TRUE(eventually([&] { return c.hooks.load() == 1 && sc->stats()[ringrpc::server_counter::cancel_requests] >= 1; }));
  std::lock_guard lock(workers_mu);
  for (auto& t : workers) t.join();
}

TEST(call_cancel, detached_calls_outlive_the_handlers_cancellation) {
  std::atomic<bool> c_done{false};
  std::atomic<bool> c_cancelled{false};
  std::atomic<std::int64_t> c_remaining_ms{0};
  auto sc = make_server([&](server& s) {
    s.add_method("c.work", [&](call_context& ctx) {
      c_remaining_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ctx.remaining()).count();
      std::this_thread::sleep_for(400ms);
      c_cancelled = ctx.cancelled();
      c_done = true;
      ctx.reply(std::string_view("finished"));
    });
  });
  auto to_c = client::connect("127.0.0.1", sc->port());
  std::atomic<int> child_error{-1};
  auto sb = make_server([&](server& s) {
    s.add_method("b.work", [&](call_context& ctx) {
      call_options o;
      o.detached = true;
      child_error = static_cast<int>(to_c.call("c.work", std::string_view("x"), o).error);
      ctx.reply(std::string_view("ok"));
    });
  });
  auto outer = client::connect("127.0.0.1", sb->port());
  std::stop_source stop;
  call_options o;
  o.timeout = 100ms;  // B's caller gives up long before C is done
  o.cancel = stop.get_token();
  const call_result r = outer.call("b.work", std::string_view("x"), o);
  EXPECT_EQ(r.error, call_error::timeout);
  ASSERT_TRUE(eventually([&] { return c_done.load(); }));
  EXPECT_FALSE(c_cancelled.load());
  // Its own deadline (a sync call's sync_call_timeout), not the 100 ms of B's caller.
  EXPECT_GT(c_remaining_ms.load(), 1000) << "a detached call inherited the deadline";
  EXPECT_TRUE(eventually([&] { return child_error.load() == static_cast<int>(call_error::none); }));
  EXPECT_EQ(sc->stats()[ringrpc::server_counter::cancel_requests], 0u);
}

TEST(call_cancel, channel_calls_from_a_handler_follow_it) {
  seen c;
  auto sc = make_server([&](server& s) {
    s.add_method("c.work", [&](call_context& ctx) {
      note_entry(ctx, c);
      work_until_cancelled(ctx, c);
    });
  });
  channel ch = channel::create("127.0.0.1:" + std::to_string(sc->port()));
  ASSERT_TRUE(ch.wait_for_members(1, 5s));
  std::atomic<int> child_error{-1};
  auto sb = make_server([&](server& s) {
    s.add_method("b.work", [&](call_context& ctx) {
      child_error = static_cast<int>(ch.call("c.work", std::string_view("x")).error);
      ctx.reply(std::string_view("ok"));
    });
  });
  auto outer = client::connect("127.0.0.1", sb->port());
  std::stop_source stop;
  call_options o;
  o.timeout = 3s;
  o.cancel = stop.get_token();
  auto f = outer.call_future("b.work", bytes_of("x"), o);
  ASSERT_TRUE(eventually([&] { return c.started.load(); }));
  EXPECT_TRUE(c.had_deadline.load());
  EXPECT_LE(c.remaining_us.load(), (3s / 1us));
  stop.request_stop();
  EXPECT_EQ(f.get().error, call_error::cancelled);
  EXPECT_TRUE(eventually([&] { return child_error.load() == static_cast<int>(call_error::cancelled); }));
  EXPECT_TRUE(eventually([&] { return c.hooks.load() == 1 && sc->stats()[ringrpc::server_counter::cancel_requests] >= 1; }));
}

TEST(call_cancel, a_hook_added_after_the_cancel_runs_at_once_and_none_runs_after_the_answer) {
  std::atomic<int> early{0};
  std::atomic<int> late{0};
  std::promise<void> started;
  auto srv = make_server([&](server& s) {
    s.add_method("m", [&](call_context& ctx) {
      started.set_value();
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!ctx.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      ctx.on_cancel([&] { early++; });  // cancelled already: runs here, now
      EXPECT_EQ(early.load(), 1);
      ctx.reply(std::string_view("answered"));
    });
    s.add_method("quick", [&](call_context& ctx) {
      ctx.on_cancel([&] { late++; });
      ctx.reply(std::string_view("ok"));
    });
  });
  auto c = client::connect("127.0.0.1", srv->port());
  std::stop_source stop;
  call_options o;
  o.cancel = stop.get_token();
  auto f = c.call_future("m", bytes_of("x"), o);
  started.get_future().wait();
  stop.request_stop();
  EXPECT_EQ(f.get().error, call_error::cancelled);
  EXPECT_TRUE(eventually([&] { return early.load() == 1; }));

  // A Cancel frame for a call already answered finds no hook to run.
  test::raw_socket sock(srv->port());
  ASSERT_TRUE(sock.send_frame(test::request(7, "quick", "x")));
  detail::frame_view v;
  std::vector<std::byte> storage;
  ASSERT_TRUE(sock.read_frame(v, storage));
  detail::frame_view cancel;
  cancel.call_id = 7;
  cancel.kind = wire::Kind::Cancel;
  ASSERT_TRUE(sock.send_frame(cancel));
  ASSERT_TRUE(eventually([&] { return srv->stats()[ringrpc::server_counter::cancel_requests] == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(late.load(), 0);
}

// A hook is what wakes a handler that never polls: the server stopping past its drain timeout,
// and a caller whose connection is reset, both run it.
TEST(call_cancel, hooks_run_when_the_server_stops_and_when_the_peer_is_gone) {
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
    std::atomic<bool> started{false};
    std::thread::id hook_thread;
  };
  auto run = [](call_context& ctx, waiter& w) {
    ctx.on_cancel([&w] {
      std::lock_guard lock(w.mu);
      w.woken = true;
      w.hook_thread = std::this_thread::get_id();
      w.cv.notify_all();
    });
    w.started = true;
    std::unique_lock lock(w.mu);
    w.cv.wait_for(lock, 10s, [&] { return w.woken; });  // blocked, not polling cancelled()
    ctx.fail(status::cancelled, w.woken ? "woken by the hook" : "never woken");
  };

  waiter stopping;
  auto s = make_server([&](server& sv) { sv.add_method("block", [&](call_context& ctx) { run(ctx, stopping); }); },
                       2, 200ms);
  auto c = client::connect("127.0.0.1", s->port());
  auto f = c.call_future("block", bytes_of("x"), {.timeout = 20s});
  ASSERT_TRUE(eventually([&] { return stopping.started.load(); }));
  const auto t0 = std::chrono::steady_clock::now();
  s->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s) << "stop waited for the blocked handler";
  {
    std::lock_guard lock(stopping.mu);
    EXPECT_TRUE(stopping.woken);
    EXPECT_NE(stopping.hook_thread, std::thread::id());
  }
  // The woken handler answers within the stop's grace; had it not, the stop would have.
  const status code = f.get().code;
  EXPECT_TRUE(code == status::cancelled || code == status::shutting_down) << to_string(code);

  waiter reset;
  auto s2 = make_server([&](server& sv) { sv.add_method("block", [&](call_context& ctx) { run(ctx, reset); }); });
  {
    test::raw_socket sock(s2->port());
    ASSERT_TRUE(sock.send_frame(test::request(5, "block", "x")));
    ASSERT_TRUE(eventually([&] { return reset.started.load(); }));
    const linger hard{1, 0};  // close with a reset, not a FIN
    ASSERT_EQ(::setsockopt(sock.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
  }
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(reset.mu);
    return reset.woken;
  })) << "the hook did not run when the caller's connection was reset";
}

// Hooks racing their calls' answers: each runs at most once, never once the reply is out (the
// reply leaves only after the hub closed, and closing waits for a hook running elsewhere).
TEST(call_cancel, hooks_race_answers_without_running_late) {
  struct per_call {
    std::atomic<bool> replied{false};
    std::atomic<int> hooks{0};
    std::atomic<bool> late{false};
  };
  constexpr int calls = 200;
  std::vector<per_call> state(calls);
  auto srv = make_server(
      [&](server& s) {
        s.add_method("race", [&](call_context& ctx) {
          const auto p = ctx.payload();
          const int i = std::stoi(std::string(reinterpret_cast<const char*>(p.data()), p.size()));
          per_call& st = state[static_cast<std::size_t>(i)];
          ctx.on_cancel([&st] {
            if (st.replied.load()) st.late = true;
            st.hooks.fetch_add(1);
          });
          const auto spin = std::chrono::microseconds(i % 7 * 150);
          const auto until = std::chrono::steady_clock::now() + spin;
          while (!ctx.cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
          ctx.reply(std::string_view("ok"));
        });
      },
      4);
  auto c = client::connect("127.0.0.1", srv->port());
  std::vector<std::stop_source> stops(calls);
  std::atomic<int> finished{0};
  std::mt19937 rng(28);
  for (int i = 0; i < calls; ++i) {
    call_options o;
    o.cancel = stops[static_cast<std::size_t>(i)].get_token();
    o.timeout = 10s;
    const std::string payload = std::to_string(i);
    c.call_async("race", bytes_of(payload), [&, i](const call_outcome& r) {
      if (r.ok()) state[static_cast<std::size_t>(i)].replied = true;
      finished++;
    }, o);
    if (rng() % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    if (rng() % 3 != 0) stops[static_cast<std::size_t>(rng() % (i + 1))].request_stop();
  }
  for (auto& s : stops) s.request_stop();
  ASSERT_TRUE(eventually([&] { return finished.load() == calls; }));
  srv->stop();  // every hook that will ever run has run
  for (int i = 0; i < calls; ++i) {
    EXPECT_LE(state[static_cast<std::size_t>(i)].hooks.load(), 1) << i;
    EXPECT_FALSE(state[static_cast<std::size_t>(i)].late.load()) << "hook ran after the reply of " << i;
  }
}

}  // namespace
}  // namespace ringrpc

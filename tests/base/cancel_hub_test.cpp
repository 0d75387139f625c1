// cancel_hub (src/base/cancel_hub.hpp): listeners run once, in children-first order, never
// after close() returned; close() and unlisten() wait for a listener running elsewhere, and not
// for one running on their own thread.

#include "base/cancel_hub.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ringrpc::detail {
namespace {

using namespace std::chrono_literals;

template <class Pred>
void wait_until(Pred p) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!p() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
}

TEST(cancel_hub, fires_once_and_late_listeners_run_at_once) {
  cancel_hub h(0);
  int runs = 0;
  cancel_hub::token t = 0;
  EXPECT_EQ(h.listen([&] { ++runs; }, t), cancel_hub::listen_result::listening);
  EXPECT_NE(t, 0u);
  EXPECT_TRUE(h.fire());
  EXPECT_FALSE(h.fire());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(h.listen([&] { ++runs; }, t), cancel_hub::listen_result::ran_now);
  EXPECT_EQ(runs, 2);
  h.close();
  EXPECT_EQ(h.listen([&] { ++runs; }, t), cancel_hub::listen_result::closed);
  EXPECT_EQ(runs, 2);
}

TEST(cancel_hub, closed_or_unlistened_listeners_never_run) {
  cancel_hub h(0);
  int runs = 0;
  cancel_hub::token a = 0, b = 0;
  h.listen([&] { runs += 1; }, a);
  h.listen([&] { runs += 10; }, b);
  h.unlisten(a);
  h.close();
  EXPECT_FALSE(h.fire());
  EXPECT_EQ(runs, 0);
}

TEST(cancel_hub, children_run_before_a_hook_that_answers_and_closes) {
  cancel_hub h(0);
  std::vector<int> order;
  cancel_hub::token t = 0;
  h.listen([&] { order.push_back(1); h.close(); }, t);        // a hook answering its call
  h.listen([&] { order.push_back(2); }, t, /*child=*/true);   // a client call made for it
  h.listen([&] { order.push_back(3); }, t);                   // dropped: answered by then
  EXPECT_TRUE(h.fire());  // and close() from inside did not wait for itself
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

TEST(cancel_hub, close_waits_for_a_listener_running_on_another_thread) {
  for (int round = 0; round < 20; ++round) {
    cancel_hub h(0);
    std::atomic<bool> started{false}, done{false};
    cancel_hub::token t = 0;
    h.listen([&] {
      started = true;
      std::this_thread::sleep_for(20ms);
      done = true;
    }, t);
    std::thread firer([&] { h.fire(); });
    wait_until([&] { return started.load(); });
    h.close();
    EXPECT_TRUE(done.load()) << "close() returned while the listener still ran";
    firer.join();
  }
}

TEST(cancel_hub, unlisten_waits_for_its_own_listener_only) {
  cancel_hub h(0);
  std::atomic<bool> a_started{false}, a_done{false}, b_release{false};
  cancel_hub::token a = 0, b = 0;
  h.listen([&] {
    a_started = true;
    std::this_thread::sleep_for(20ms);
    a_done = true;
  }, a);
  h.listen([&] { wait_until([&] { return b_release.load(); }); }, b);
  std::thread firer([&] { h.fire(); });
  wait_until([&] { return a_started.load(); });
  h.unlisten(a);
  EXPECT_TRUE(a_done.load());
  // b runs now (or is about to): unlistening something else does not wait for b.
  cancel_hub::token none = 12345;
  h.unlisten(none);
  b_release = true;
  firer.join();
}

thread_local bool on_adder = false;

// A listener added after the fire runs inline on the adder (whose caller owns the call, so it
// cannot be answering it meanwhile); the ones fire() runs must never outlast close().
TEST(cancel_hub, racing_fire_close_and_listen_run_each_listener_at_most_once) {
  for (int round = 0; round < 200; ++round) {
    cancel_hub h(0);
    std::atomic<int> runs{0};
    std::atomic<bool> closed{false};
    std::atomic<int> late{0};
    std::thread adder([&] {
      on_adder = true;
      for (int i = 0; i < 8; ++i) {
        cancel_hub::token t = 0;
        h.listen([&] {
          runs++;
          if (!on_adder && closed.load()) late++;
        }, t, i % 2 == 0);
      }
    });
    std::thread firer([&] { h.fire(); });
    std::thread closer([&] {
      h.close();
      closed = true;
    });
    adder.join();
    firer.join();
    closer.join();
    EXPECT_LE(runs.load(), 8);
    EXPECT_EQ(late.load(), 0);
  }
}

}  // namespace
}  // namespace ringrpc::detail

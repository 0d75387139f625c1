// server::wait(): returns when another thread stops the server, at once when it is not running;
// with wait_signals::stop the first SIGTERM drains and returns it, a second one during the drain
// exits 3 (the rules of ringrpc-server), and the previous handlers are back afterwards.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <thread>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;

server_options loopback() {
  server_options o;
  o.host = "127.0.0.1";
  o.port = 0;
  return o;
}

TEST(server_wait, returns_at_once_when_not_running) {
  server s(loopback());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(s.wait(), 0);
  s.start();
  s.stop();
  EXPECT_EQ(s.wait(wait_signals::stop), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(server_wait, returns_after_a_stop_from_another_thread) {
  server s(loopback());
  s.start();
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    s.stop();
  });
  EXPECT_EQ(s.wait(), 0);
  stopper.join();
  EXPECT_THROW(client::connect("127.0.0.1", s.port()), std::system_error) << "stopped: nothing listens";
}

TEST(server_wait, first_sigterm_drains_and_returns_it) {
  server s(loopback());
  s.add_method("slow", [](call_context& call) {
    std::this_thread::sleep_for(200ms);
    call.reply(std::string_view("done"));
  });
  s.start();
  auto c = client::connect("127.0.0.1", s.port());
  auto answer = c.call_future("slow", std::span<const std::byte>());
  std::thread signaller([] {
    std::this_thread::sleep_for(50ms);  // the call is in the handler by now
    ::kill(::getpid(), SIGTERM);
  });
  EXPECT_EQ(s.wait(wait_signals::stop), SIGTERM);
  signaller.join();
  const call_result r = answer.get();
  EXPECT_TRUE(r.ok()) << "an accepted call is answered by the drain: " << r.message;

  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL) << "the previous handler is back";
}

TEST(server_wait, second_signal_during_the_drain_exits_3) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        server s(loopback());
        s.add_method("slow", [](call_context& call) {
          std::this_thread::sleep_for(3s);
          call.reply(std::string_view("late"));
        });
        s.start();
        auto c = client::connect("127.0.0.1", s.port());
        auto answer = c.call_future("slow", std::span<const std::byte>());
        // Detached: the process ends in _exit(3) with it finished but unjoined, which
        // ThreadSanitizer would report as a leaked thread.
        std::thread([] {
          std::this_thread::sleep_for(50ms);
          ::kill(::getpid(), SIGINT);
          std::this_thread::sleep_for(100ms);  // the drain waits for "slow"
          ::kill(::getpid(), SIGINT);
        }).detach();
        s.wait(wait_signals::stop);
        std::_Exit(0);  // not reached: the second signal exits 3
      },
      ::testing::ExitedWithCode(3), "second stop signal during the drain");
}

}  // namespace
}  // namespace ringrpc

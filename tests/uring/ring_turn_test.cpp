// The one turn the ring loops share (src/uring/ring_turn.hpp), on a real ring: the enter hook
// runs before any completion is handed out, a wait plan's timeout and wait_nr reach the kernel,
// and a fatal enter goes to the policy instead of the reap.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "uring/ring_turn.hpp"

namespace ringrpc::detail {
namespace {

using namespace std::chrono_literals;

void queue_nop(ring& r, std::uint64_t tag) {
  io_uring_sqe* sqe = r.get_sqe();
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data64(sqe, tag);
}

// What a turn did, in order: "enter" ("enter:<rc>" when rc < 0; a success may count the SQEs
// submitted or not), then "cqe:<tag>" for each completion.
struct turn_log {
  std::vector<std::string> events;
  int fatal_rc = 0;

  bool turn(ring& r, const turn_wait& w) {
    return ring_turn(
        r, w, [this](int rc) { fatal_rc = rc; },
        [this](int rc) { events.push_back(rc < 0 ? "enter:" + std::to_string(rc) : "enter"); },
        [this](const io_uring_cqe& cqe) { events.push_back("cqe:" + std::to_string(cqe.user_data)); });
  }
};

TEST(RingTurn, TheEnterHookRunsBeforeTheCompletions) {
  ring r(8, probe_io_uring());
  queue_nop(r, 1);
  queue_nop(r, 2);
  turn_log log;
  ASSERT_TRUE(log.turn(r, turn_wait{.wait_nr = 2}));
  EXPECT_EQ(log.events, (std::vector<std::string>{"enter", "cqe:1", "cqe:2"}));
  EXPECT_EQ(log.fatal_rc, 0);
  // Reaped means seen: a second look finds nothing.
  EXPECT_EQ(r.for_each_cqe([](const io_uring_cqe&) {}), 0u);
}

TEST(RingTurn, ASubmitOnlyTurnStillReapsWhatCompletedMeanwhile) {
  ring r(8, probe_io_uring());
  queue_nop(r, 7);
  turn_log log;
  ASSERT_TRUE(log.turn(r, turn_wait{.block = false}));
  ASSERT_FALSE(log.events.empty());
  EXPECT_EQ(log.events.back(), "cqe:7");
}

TEST(RingTurn, ATimeoutIsNotFatalAndReachesTheHookAsEtime) {
  ring r(8, probe_io_uring());
  turn_log log;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(log.turn(r, turn_wait{.timeout = 5ms}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 4ms);
  EXPECT_EQ(log.events, (std::vector<std::string>{"enter:" + std::to_string(-ETIME)}));
  EXPECT_EQ(log.fatal_rc, 0);
}

TEST(RingTurn, AFatalEnterGoesToThePolicyAndReapsNothing) {
  ring r(8, probe_io_uring());
  // Make io_uring_enter fail for good: name the ring by its plain fd, then put /dev/null there.
  io_uring_unregister_ring_fd(r.raw());
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  ASSERT_EQ(::dup2(null_fd, r.fd()), r.fd());
  ::close(null_fd);
  queue_nop(r, 1);
  turn_log log;
  // The timeout bounds the test should the enter wrongly succeed.
  EXPECT_FALSE(log.turn(r, turn_wait{.timeout = 10ms}));
  EXPECT_TRUE(ring::fatal(log.fatal_rc)) << log.fatal_rc;
  EXPECT_TRUE(log.events.empty());
}

TEST(RingTurnDeathTest, TheLibraryPolicySaysWhichThreadAndTerminates) {
  const terminate_on_fatal reader{"reader", 3};
  const terminate_on_fatal acceptor{"acceptor"};
  EXPECT_DEATH(reader(-EBADF), "ringrpc: reader 3: io_uring_enter failed: Bad file descriptor");
  EXPECT_DEATH(acceptor(-EFAULT), "ringrpc: acceptor: io_uring_enter failed: Bad address");
}

}  // namespace
}  // namespace ringrpc::detail

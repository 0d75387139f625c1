// IORING_OP_FUTEX_WAKE through a ring (src/uring/ring_futex.hpp), as a reader wakes its pool's
// parked workers: the probe finds it where the kernel has it and not under RINGRPC_URING_AS_OF,
// and the SQE filled by hand wakes a thread parked on a real `parking`.
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "base/parking.hpp"
#include "uring/ring.hpp"
#include "uring/ring_futex.hpp"
#include "uring/uring_probe.hpp"

namespace ringrpc::detail {
namespace {

using namespace std::chrono_literals;

/// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : _name(name) { ::setenv(name, value, 1); }
  ~scoped_env() { ::unsetenv(_name); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* _name;
};

/// Whether thread `tid` of this process is blocked (state S in /proc).
bool asleep(pid_t tid) {
  if (tid == 0) return false;
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');  // the name may hold spaces; the state follows it
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'S';
}

bool kernel_has_futex_ops(const uring_features& f) {
  return f.kernel_major > 6 || (f.kernel_major == 6 && f.kernel_minor >= 7);
}

TEST(ring_futex, the_probe_finds_it_where_the_kernel_has_it) {
  const uring_features f = probe_io_uring();
  EXPECT_EQ(f.futex_wake, kernel_has_futex_ops(f)) << "kernel " << f.kernel_major << "." << f.kernel_minor;
}

TEST(ring_futex, an_older_kernel_named_in_the_environment_turns_newer_features_off) {
  const uring_features now = probe_io_uring();
  const scoped_env as_of("RINGRPC_URING_AS_OF", "6.1");
  const uring_features f = probe_io_uring();
  EXPECT_FALSE(f.futex_wake);
  // msg_ring into a DEFER_TASKRUN ring is safe from 6.3 on: not used as of 6.1.
  EXPECT_EQ(f.setup_flags & IORING_SETUP_DEFER_TASKRUN, 0u);
  // The kernel's own version is still reported as it is.
  EXPECT_EQ(f.kernel_major, now.kernel_major);
  EXPECT_EQ(f.kernel_minor, now.kernel_minor);
}

TEST(ring_futex, a_newer_kernel_named_in_the_environment_adds_nothing) {
  const uring_features now = probe_io_uring();
  const scoped_env as_of("RINGRPC_URING_AS_OF", "99.0");
  const uring_features f = probe_io_uring();
  EXPECT_EQ(f.futex_wake, now.futex_wake);
  EXPECT_EQ(f.setup_flags, now.setup_flags);
}

TEST(ring_futex, claim_wake_is_null_while_nobody_is_parked) {
  parking p;
  EXPECT_EQ(p.claim_wake(), nullptr);
  const std::uint32_t epoch = p.prepare_wait();
  p.cancel_wait();
  EXPECT_EQ(p.claim_wake(), nullptr);
  // Nothing moved: a waiter preparing now sees the same epoch.
  EXPECT_EQ(p.prepare_wait(), epoch);
  p.cancel_wait();
}

TEST(ring_futex, the_rings_wake_reaches_a_parked_thread) {
  const uring_features features = probe_io_uring();
  if (!features.futex_wake) GTEST_SKIP() << "this kernel has no IORING_OP_FUTEX_WAKE (Linux 6.7+)";
  ring r(8, features);
  parking p;
  std::atomic<pid_t> tid{0};
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    const std::uint32_t epoch = p.prepare_wait();
    p.wait(epoch);
    woke.store(true);
  });
  // Whatever fails below, the sleeper is woken the usual way and joined.
  struct joiner {
    parking& p;
    std::thread& t;
    ~joiner() {
      if (t.joinable()) {
        p.wake_all();
        t.join();
      }
    }
  } join_at_exit{p, sleeper};
  // Wake it only once it sleeps in the futex (its state is S: it has no other way to block),
  // so that the one wake counted below is the ring's.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!asleep(tid.load()) && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(asleep(tid.load())) << "the sleeper never parked";
  EXPECT_FALSE(woke.load());
  std::uint32_t* word = p.claim_wake();
  ASSERT_NE(word, nullptr);
  prep_futex_wake(r.get_sqe(), word, 1);
  ASSERT_EQ(r.submit_and_wait(std::chrono::seconds(10), 1), 0);
  int res = -1;
  EXPECT_EQ(r.for_each_cqe([&](const io_uring_cqe& c) { res = c.res; }), 1u);
  EXPECT_EQ(res, 1) << "woken by the ring's FUTEX_WAKE";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!woke.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(woke.load());
}

}  // namespace
}  // namespace ringrpc::detail

#pragma once
// What the coroutine tests (tests/server/coroutines_test.cpp, shard_coroutines_test.cpp) share:
// the name of the thread a step ran on, and a count of handler frames alive.

#include <pthread.h>

#include <atomic>
#include <string>

namespace ringrpc::test {

/// The calling thread's name ("rr-read/0", "rr-default/1", "rr-client/0"...).
inline std::string thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

/// Handler frames alive: each handler holds an alive_marker as a local, destroyed with its
/// frame's locals.
inline std::atomic<int> frames_alive{0};
struct alive_marker {
  alive_marker() { frames_alive.fetch_add(1); }
  ~alive_marker() { frames_alive.fetch_sub(1); }
  alive_marker(const alive_marker&) = delete;
  alive_marker& operator=(const alive_marker&) = delete;
};

}  // namespace ringrpc::test

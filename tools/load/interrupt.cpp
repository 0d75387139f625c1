#include "interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace ringrpc::load {

namespace {

// A signal handler can reach nothing but a global; lock-free, so setting it is async-signal-safe.
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
std::atomic<const char*> doomed[8];

void say(const char* text) {
  const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)n;
}

void on_sigint(int) {
  if (interrupted.exchange(true)) {
    for (auto& d : doomed) {
      if (const char* path = d.load()) ::unlink(path);
    }
    say("\nringrpc-load: second SIGINT: exiting without results\n");
    ::_exit(130);
  }
  say("\nringrpc-load: SIGINT: ending the run early (SIGINT again to exit at once)\n");
}

}  // namespace

void remove_on_forced_exit(const char* path) noexcept {
  for (auto& d : doomed) {
    const char* empty = nullptr;
    if (d.compare_exchange_strong(empty, path)) return;
  }
}

void forget_on_forced_exit(const char* path) noexcept {
  for (auto& d : doomed) {
    const char* expected = path;
    d.compare_exchange_strong(expected, nullptr);
  }
}

const std::atomic<bool>& install_interrupt_handler() {
  struct sigaction sa{};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  // A reader of --live - that goes away (`| head -1`) must not kill the run and its results:
  // the write fails with EPIPE instead, and the run goes on.
  ::signal(SIGPIPE, SIG_IGN);
  return interrupted;
}

}  // namespace ringrpc::load

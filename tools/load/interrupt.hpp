#pragma once
// SIGINT for a load run: the first ends the run early with every result, the second exits at
// once (as wrk and k6 behave).

#include <atomic>

namespace ringrpc::load {

/// Installs the SIGINT handler; the flag it returns turns true at the first SIGINT. A second
/// SIGINT exits the process with status 130 without results.
const std::atomic<bool>& install_interrupt_handler();

/// A file the second SIGINT removes before exiting (a result file not yet in place). The
/// string must live until forget_on_forced_exit(); at most 8 at a time, more are not removed.
void remove_on_forced_exit(const char* path) noexcept;
void forget_on_forced_exit(const char* path) noexcept;

}  // namespace ringrpc::load

#pragma once
// The one turn every ring loop takes: enter the kernel (submit, or submit and wait), judge what
// io_uring_enter said, reap the completions. The shard, the client loop, the acceptor and the
// load tool's workers differ in what they do around the turn, not in the turn itself, so the
// judgement of a failed enter and the reaping live here once.
//
// Header-only and free of indirection on purpose: the callables are template parameters taken
// by forwarding reference (no std::function, no virtual call, no allocation), so each loop's
// instantiation folds into its own body and its CQE handler stays inlined in for_each_cqe.

#include <chrono>
#include <utility>

#include "uring/ring.hpp"

namespace ringrpc::detail {

/// How a turn enters the kernel. `block == false` only submits (and, with DEFER_TASKRUN, runs
/// the task work that posts completions): a loop's first turn, or a turn with work already
/// waiting. Otherwise it submits and sleeps until `wait_nr` completions or `timeout`
/// (negative: no limit), in one syscall.
struct turn_wait {
  bool block = true;
  std::chrono::nanoseconds timeout{-1};
  unsigned wait_nr = 1;
};

/// The library's answer to a fatal io_uring_enter result: a ring thread cannot go on without
/// its ring, and nothing above it could rebuild one under the connections it holds. Prints
/// "ringrpc: WHO[ INDEX]: io_uring_enter failed: ..." and terminates. `index` (when >= 0)
/// tells the readers apart.
struct terminate_on_fatal {
  const char* who;
  int index = -1;
  // Out of line and cold: the hot loop keeps only the test and a call it never takes.
  [[noreturn, gnu::cold]] void operator()(int rc) const noexcept;
};

/// One turn of a ring loop:
///  1. enters the kernel as `w` says;
///  2. if the result is fatal (ring::fatal), calls `on_fatal(rc)` and returns false without
///     reaping (terminate_on_fatal never returns; a tool's policy may record why and stop);
///  3. otherwise calls `after_enter(rc)` — the loop's work that must see the kernel's answer
///     but precede its completions, e.g. the turn's clock read (rc may be -ETIME, -EINTR...);
///  4. calls `on_cqe(const io_uring_cqe&)` for each ready completion, advancing the CQ once.
/// `on_cqe` runs inside a noexcept reap: it must not throw.
template <class OnFatal, class AfterEnter, class OnCqe>
[[gnu::always_inline]] inline bool ring_turn(ring& r, const turn_wait& w, OnFatal&& on_fatal,
                                             AfterEnter&& after_enter, OnCqe&& on_cqe) {
  const int rc = w.block ? r.submit_and_wait(w.timeout, w.wait_nr) : r.submit();
  if (ring::fatal(rc)) [[unlikely]] {
    std::forward<OnFatal>(on_fatal)(rc);
    return false;
  }
  std::forward<AfterEnter>(after_enter)(rc);
  r.for_each_cqe(std::forward<OnCqe>(on_cqe));
  return true;
}

/// A turn with nothing to do between the enter and the reap.
template <class OnFatal, class OnCqe>
[[gnu::always_inline]] inline bool ring_turn(ring& r, const turn_wait& w, OnFatal&& on_fatal,
                                             OnCqe&& on_cqe) {
  return ring_turn(r, w, std::forward<OnFatal>(on_fatal), [](int) noexcept {},
                   std::forward<OnCqe>(on_cqe));
}

}  // namespace ringrpc::detail

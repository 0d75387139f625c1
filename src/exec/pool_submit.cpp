// Submission to a thread pool: the handshake with shutdown, and what each pool kind does with a
// task (queue it, hand it to an idle worker, grow, refuse). See worker_pool_impl.hpp.

#include <cstdint>
#include <thread>

#include "exec/worker_pool_impl.hpp"

namespace ringrpc::detail {

namespace {

// A number per thread, from 1, never reused. Constant-initialised thread_local: no TLS wrapper.
thread_local std::uint32_t tl_submitter_id = 0;
std::atomic<std::uint32_t> next_submitter_id{1};

std::uint32_t submitter_id() noexcept {
  std::uint32_t id = tl_submitter_id;
  if (id == 0) {
    id = next_submitter_id.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_submitter_id.fetch_add(1, std::memory_order_relaxed);  // wrapped
    tl_submitter_id = id;
  }
  return id;
}

}  // namespace

template <class Admit>
bool thread_pool::impl::gated(Admit&& admit_fn) noexcept {
  const std::uint32_t id = submitter_id();
  if (id <= announce_slots) {
    // Dekker with an asymmetric barrier; see worker_pool_impl.hpp.
    auto& inside = announce[id - 1].inside;
    inside.store(1, std::memory_order_relaxed);
    if (asymmetric) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    if (closed.load(std::memory_order_relaxed)) {
      inside.store(0, std::memory_order_release);
      return false;
    }
    admit_fn();
    inside.store(0, std::memory_order_release);
    return true;
  }
  auto& inside = gate[id % gate_shards].inside;
  inside.fetch_add(1, std::memory_order_seq_cst);
  if (closed.load(std::memory_order_seq_cst)) {
    inside.fetch_sub(1, std::memory_order_release);
    return false;
  }
  admit_fn();
  inside.fetch_sub(1, std::memory_order_release);
  return true;
}

bool thread_pool::try_submit(pool_task* t) noexcept {
  impl& p = *_impl;
  if (t == nullptr) return false;
  bool ok = false;
  // Closed: not started, or shut down; not a saturation refusal, not counted.
  if (!p.gated([&] { ok = p.admit(t); })) return false;
  if (!ok) p.refused();
  return ok;
}

bool thread_pool::submit_singleton(pool_task* t, bool wake_now) noexcept {
  impl& p = *_impl;
  if (t == nullptr) return false;
  // The wake is inside the gate too: once queued, the task may run at once and let its owner
  // destroy the pool (a coroutine's last resumption lets a stopping server go on), and
  // shutdown waits for submitters inside the gate, not for ones just past it.
  return p.gated([&] {
    p.queue.push_singleton(t);
    // A pool that may have shrunk to no thread at all starts one; otherwise a worker finishing
    // its task finds the singleton first.
    if (p.core_threads == 0) p.keep_one_thread();
    if (wake_now) wake(1);
  });
}

void thread_pool::wake(unsigned n) noexcept {
  if (n == 0) return;
  _impl->park.wake(n > static_cast<unsigned>(INT32_MAX) ? INT32_MAX : static_cast<int>(n));
}

std::uint32_t* thread_pool::claim_wake() noexcept { return _impl->park.claim_wake(); }

bool thread_pool::submit_now(pool_task* t) noexcept {
  if (!try_submit(t)) return false;
  wake(1);
  return true;
}

bool thread_pool::impl::admit(pool_task* t) noexcept {
  switch (opts.kind) {
    case pool_kind::fixed:
      if (hand_off) return reserve_and_push(t);
      return queue.push(t);
    case pool_kind::cached:
    case pool_kind::limited:
      // java.util.concurrent.ThreadPoolExecutor's order: core, queue, grow, refuse.
      if (threads.load(std::memory_order_relaxed) < core_threads && grow(t, core_threads)) return true;
      if (hand_off) return reserve_and_push(t) || grow(t, max_threads);
      if (queue.push(t)) {
        if (core_threads == 0) keep_one_thread();
        return true;
      }
      return grow(t, max_threads);
    case pool_kind::eager:
      // Idle worker first, then a new thread, then the queue.
      if (threads.load(std::memory_order_relaxed) < core_threads && grow(t, core_threads)) return true;
      if (reserve_and_push(t)) return true;
      if (grow(t, max_threads)) return true;
      if (hand_off || !queue.push(t)) return false;
      if (core_threads == 0) keep_one_thread();
      return true;
  }
  return false;
}

bool thread_pool::impl::reserve_and_push(pool_task* t) noexcept {
  if (!reserve_idle()) return false;
  // Reserved entries go to the ring only. In hand-off mode it has room for 2 x threads, more
  // than reservations can ever occupy; with a queue (eager) a full ring just undoes it.
  if (queue.push_reserved(t)) return true;
  available.fetch_add(1, std::memory_order_seq_cst);
  return false;
}

// A pool that may shrink to zero threads (core 0) must not strand what was just queued: the
// last worker, after deciding to exit, re-checks the queue (retire()); here the submitter,
// after pushing, re-checks the thread count. With a fence on both sides one of them sees
// the other.
void thread_pool::impl::keep_one_thread() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (threads.load(std::memory_order_seq_cst) == 0) grow(nullptr, max_threads);
}

bool thread_pool::impl::grow(pool_task* first, unsigned limit) noexcept {
  unsigned n = threads.load(std::memory_order_relaxed);
  do {
    if (n >= limit) return false;
  } while (!threads.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
  if (!start_thread(first)) return false;
  bump_largest(n + 1);
  return true;
}

// The caller has counted the thread in `threads`; undone here on failure.
bool thread_pool::impl::start_thread(pool_task* first) noexcept {
  std::lock_guard lock(lifecycle_mu);
  worker_slot* s = nullptr;
  // A free slot exists: `threads` <= max_threads counts every running slot, except a worker
  // that has just un-counted itself on its way out and marks its slot a moment later.
  for (;;) {
    for (unsigned i = 0; i < max_threads && !s; ++i) {
      if (slots[i].state.load(std::memory_order_acquire) != slot_running) s = &slots[i];
    }
    if (s) break;
    std::this_thread::yield();
  }
  if (s->thread.joinable()) s->thread.join();  // exited after keep_alive: already gone
  const bool deposit = first == nullptr && reserve_mode;
  if (deposit) available.fetch_add(1, std::memory_order_seq_cst);
  s->state.store(slot_running, std::memory_order_relaxed);
  try {
    s->thread = std::thread([this, s, first] { worker_main(*s, first); });
  } catch (...) {
    s->state.store(slot_free, std::memory_order_relaxed);
    if (deposit) available.fetch_sub(1, std::memory_order_seq_cst);
    threads.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  return true;
}

void thread_pool::impl::refused() noexcept {
  rejected.fetch_add(1, std::memory_order_relaxed);
  if (!report) return;
  const std::int64_t now = now_ns();
  std::int64_t last = last_report.load(std::memory_order_relaxed);
  if (last != never && now - last < report_interval_ns) return;
  if (!last_report.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  try {
    report(describe());
  } catch (...) {
    // A report is best effort; the refusal itself has been counted.
  }
}

}  // namespace ringrpc::detail

// A pool's worker loop: run what is queued, flush in bursts, park, and (cached, eager) exit after
// keep_alive idle. See worker_pool_impl.hpp for the accounting of idle workers.

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/thread_name.hpp"
#include "exec/worker_pool_impl.hpp"

namespace ringrpc::detail {

std::int64_t thread_pool::impl::run_one(worker_slot& s, pool_task* t, std::uint32_t& seq) noexcept {
  // Seqlock write: odd while the record changes. Copy the label before run(): `t` may be
  // gone once run() returns.
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.label_data.store(t->label.data(), std::memory_order_relaxed);
  s.label_size.store(t->label.size(), std::memory_order_relaxed);
  // The one clock read per task: the overload report and the heavy budget both use it.
  const std::int64_t stamp = task_stamp_ns();
  s.started_ns.store(stamp, std::memory_order_relaxed);
  seq += 2;
  s.seq.store(seq, std::memory_order_release);
  t->run(t);
  s.completed.add();
  return stamp;
}

thread_local const thread_pool::impl* thread_pool::impl::current = nullptr;

bool thread_pool::on_worker_thread() noexcept { return impl::current != nullptr; }
thread_pool* thread_pool::current() noexcept { return impl::current ? impl::current->self : nullptr; }

// "rr-default/3"; a pool of one thread drops the index ("rr-conn-events"). The pool name is
// what gets cut to fit (base/thread_name.hpp).
void thread_pool::impl::name_thread(unsigned index) noexcept {
  char role[16] = "rr-";
  const std::size_t n = std::string_view(name).copy(role + 3, sizeof(role) - 4);
  const std::string_view r(role, 3 + n);
  if (max_threads > 1) name_this_thread(r, index); else name_this_thread(r);
}

void thread_pool::impl::worker_main(worker_slot& s, pool_task* first) noexcept {
  current = this;
  name_thread(s.index);
  std::uint32_t seq = s.seq.load(std::memory_order_relaxed);
  // Started without a task: idle phase from the start (the starter deposited the token).
  bool idle = first == nullptr;
  std::int64_t idle_since = idle && shrinks ? now_ns() : 0;
  unsigned batch = 0;
  // The hook flushes finished work (the server's replies) in batches. Every burst_hook_every
  // tasks is right for short tasks; for long ones it would hold a reply back for that many
  // task durations while the worker stays busy (32 x 500 us = 16 ms). So each batch is timed
  // (one precise clock read per batch) and, while tasks average over slow_task_ns, the hook
  // runs after every task: its cost is then small beside the task's.
  unsigned flush_every = burst_hook_every;
  std::int64_t batch_started = now_ns();
  auto batch_done = [&]() noexcept {
    hook();
    const std::int64_t now = now_ns();
    flush_every = now - batch_started >= static_cast<std::int64_t>(batch) * slow_task_ns ? 1 : burst_hook_every;
    batch_started = now;
    batch = 0;
  };
  // Heavy over-share work takes at most a share of this worker's time while other work waits
  // (pool_queue.hpp); timed by the start stamps run_one reads anyway.
  heavy_budget budget(pool_queue::over_share_every);
  if (first) {
    budget.started(run_one(s, first, seq), false);
    batch = 1;
  }
  for (;;) {
    pool_entry e = 0;
    while (queue.pop(e, budget.may_go_ahead())) {
      pool_task* t = task_of(e);
      const bool reserved = (e & reserved_bit) != 0;
      const bool heavy = (e & heavy_bit) != 0;
      if (reserve_mode) {
        if (idle && !reserved) {
          available.fetch_sub(1, std::memory_order_seq_cst);
        } else if (!idle && reserved) {
          available.fetch_add(1, std::memory_order_seq_cst);
        }
        // Pass the baton: a batch of reserved entries needs only one wake() from the caller.
        if (idle && queue.has_work()) park.wake(1);
      }
      if (idle) batch_started = now_ns();  // a burst begins: time it from here, not from sleep
      idle = false;
      // Replies of the short tasks before it must not wait for a long one to end.
      if (heavy && batch != 0) batch_done();
      // run_one returns the stamp it read as the task started.
      budget.started(run_one(s, t, seq), heavy);
      if (heavy && queue.heavy_done()) park.wake(1);
      if (++batch >= flush_every) batch_done();
    }
    if (batch != 0) batch_done();
    budget.stopped(batch_started);  // batch_done's clock read, after the last task ended
    if (!idle) {
      idle = true;
      if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
      s.started_ns.store(0, std::memory_order_relaxed);
      if (shrinks) idle_since = now_ns();
    }
    const std::uint32_t epoch = park.prepare_wait();
    if (queue.has_work()) {
      park.cancel_wait();
      continue;
    }
    if (stopping.load(std::memory_order_acquire)) {
      park.cancel_wait();
      break;
    }
    // Only a thread above core_threads may time out; when none is (now), sleep untimed: a
    // thread started later has its own keep_alive and will be the one to go.
    if (!shrinks || threads.load(std::memory_order_relaxed) <= core_threads) {
      park.wait(epoch);
      continue;
    }
    const std::int64_t left = idle_since + keep_alive_ns - now_ns();
    if (left > 0) {
      park.wait_for(epoch, std::chrono::nanoseconds(left));
      continue;
    }
    park.cancel_wait();
    if (retire()) {
      s.state.store(slot_exited, std::memory_order_release);
      return;
    }
    idle_since = now_ns();  // a core thread, or work arrived: idle for another period
  }
  threads.fetch_sub(1, std::memory_order_seq_cst);
  s.state.store(slot_exited, std::memory_order_release);
}

// An idle worker whose keep_alive ran out: true if it un-counted itself and must exit.
bool thread_pool::impl::retire() noexcept {
  if (threads.load(std::memory_order_relaxed) <= core_threads) return false;
  if (reserve_mode && !reserve_idle()) return false;  // its token backs a reserved entry
  unsigned n = threads.load(std::memory_order_relaxed);
  do {
    if (n <= core_threads) {
      if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
      return false;
    }
  } while (!threads.compare_exchange_weak(n, n - 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
  std::atomic_thread_fence(std::memory_order_seq_cst);  // see keep_one_thread()
  if (!queue.has_work()) return true;
  n = threads.load(std::memory_order_relaxed);
  do {
    if (n >= max_threads) return true;  // others are there to take it
  } while (!threads.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
  if (reserve_mode) available.fetch_add(1, std::memory_order_seq_cst);
  return false;
}

}  // namespace ringrpc::detail

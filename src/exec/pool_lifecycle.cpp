// A thread pool's life: construction, start, running what is queued on a stopping thread, and
// shutdown (the heavy side of the handshake described in worker_pool_impl.hpp).

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "exec/worker_pool_impl.hpp"

namespace ringrpc::detail {

#if defined(__SANITIZE_THREAD__)
#define RINGRPC_POOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGRPC_POOL_TSAN 1
#endif
#endif

bool membarrier_usable() noexcept {
#if defined(RINGRPC_POOL_TSAN)
  return false;  // TSan models neither; keep to what it can at least see
#else
  static const bool usable = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return usable;
#endif
}

thread_pool::impl::impl(std::string n, const pool_options& o, pool_burst_hook hook,
                        pool_report_sink sink, std::chrono::milliseconds interval)
    : name(std::move(n)),
      opts(validate_pool_options(name, o, interval)),
      after_burst(std::move(hook)),
      report(std::move(sink)),
      report_interval_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()),
      max_threads(opts.threads),
      core_threads(opts.kind == pool_kind::fixed ? opts.threads : opts.core_threads),
      hand_off(opts.queue == 0),
      reserve_mode(opts.queue == 0 || opts.kind == pool_kind::eager),
      shrinks(opts.kind == pool_kind::cached || opts.kind == pool_kind::eager),
      keep_alive_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(opts.keep_alive).count()),
      asymmetric(membarrier_usable()),
      queue(opts.queue),
      slots(std::make_unique<worker_slot[]>(max_threads)) {
  for (unsigned i = 0; i < max_threads; ++i) slots[i].index = i;
}

void thread_pool::impl::start() {
  std::lock_guard lock(shutdown_mu);
  if (shut) throw std::logic_error(cat("thread pool '", name, "': start() after shutdown_and_join()"));
  if (started) return;
  queue.create(max_threads);
  if (queue.unbounded()) {
    std::fprintf(stderr, "ringrpc: pool '%s' has an unbounded queue; memory is its only limit\n",
                 name.c_str());
  }
  const unsigned initial = opts.kind == pool_kind::fixed ? max_threads : core_threads;
  for (unsigned i = 0; i < initial; ++i) {
    threads.fetch_add(1, std::memory_order_seq_cst);
    if (!start_thread(nullptr)) {
      stop_and_join();
      shut = true;
      throw std::runtime_error(
          cat("thread pool '", name, "': could not start thread ", i + 1, " of ", initial));
    }
    bump_largest(i + 1);
  }
  started = true;
  closed.store(false, std::memory_order_seq_cst);
}

std::size_t thread_pool::impl::run_queued_here() noexcept {
  // Reserving pools keep nothing waiting that no idle worker has claimed: leave them alone.
  // Singletons (connection-event lanes, inbox drains holding events) are left to the workers:
  // an event runs on the thread its policy names, and the workers run them before they exit.
  if (!queue.created() || reserve_mode) return 0;
  std::size_t n = 0;
  pool_entry e = 0;
  while (queue.pop_any(e)) {
    pool_task* t = task_of(e);
    t->run(t);
    ++n;
  }
  if (n != 0) hook();
  return n;
}

void thread_pool::impl::shutdown_and_join() {
  if (current == this) {
    throw std::logic_error(
        cat("thread pool '", name, "': shutdown_and_join() called from one of its own workers"));
  }
  std::lock_guard lock(shutdown_mu);
  if (shut) return;
  shut = true;
  closed.store(true, std::memory_order_seq_cst);
  stop_and_join();
}

void thread_pool::impl::stop_and_join() {
  // `closed` is set. Submitters that read it as false are announced; wait them out, so the
  // queue only shrinks from here on.
  if (asymmetric) {
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  for (auto& a : announce) {
    while (a.inside.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  for (auto& g : gate) {
    while (g.inside.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }
  stopping.store(true, std::memory_order_seq_cst);
  park.wake_all();
  std::lock_guard lock(lifecycle_mu);
  for (unsigned i = 0; i < max_threads; ++i) {
    if (slots[i].thread.joinable()) slots[i].thread.join();
    slots[i].state.store(slot_free, std::memory_order_relaxed);
  }
}

thread_pool::thread_pool(std::string name, pool_options options, pool_burst_hook after_burst,
                         pool_report_sink report, std::chrono::milliseconds report_interval)
    : _impl(new impl(std::move(name), options, std::move(after_burst), std::move(report),
                     report_interval)) {
  _impl->self = this;
}

thread_pool::~thread_pool() {
  shutdown_and_join();
  delete _impl;
}

void thread_pool::start() { _impl->start(); }
void thread_pool::shutdown_and_join() { _impl->shutdown_and_join(); }
std::size_t thread_pool::run_queued_here() noexcept { return _impl->run_queued_here(); }
bool thread_pool::has_queued_work() const noexcept { return _impl->queue.has_work(); }
const std::string& thread_pool::name() const noexcept { return _impl->name; }
const pool_options& thread_pool::options() const noexcept { return _impl->opts; }
void thread_pool::set_owner(const void* owner) noexcept { _impl->owner = owner; }
const void* thread_pool::owner() const noexcept { return _impl->owner; }

}  // namespace ringrpc::detail

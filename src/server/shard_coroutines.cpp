// Coroutine handler frames that stay on the shard that started them (docs/execution.md,
// "Coroutines on a shard"), and the stall detector for the user code a shard runs.
//
// A frame homed here is resumed on this thread: whoever completes what it awaits (a client's
// I/O thread today) posts the resumption into the shard's queue and wakes it; the loop runs
// the queue after the turn's completions, so the frame's next step (often its answer) leaves
// with that turn's submit. The queue's node lives in the awaiting frame's resume_slot: a
// resumption allocates nothing and is never refused while the loop runs.
//
// The stall detector times each stretch of user code with the coarse clock: one read (a few
// ns) when the stretch ends (shard.hpp, user_code_ran), against the mark set when it started:
// just before a direct handler or connection event, before a batch of resumptions (each then
// measured from the end of the one before), or at the turn's start. The coarse clock ticks at
// 1/HZ (4 ms with HZ=250): both ends of a stretch are rounded to a tick, so a stretch over
// 14 ms is always reported there and one between 6 and 14 ms may be.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>

#include "log/log.hpp"
#include "server/server_core.hpp"
#include "server/shard.hpp"

namespace ringrpc::detail {

namespace {

// What a posted resumption keeps in its slot's link.
struct shard_resumption {
  mpsc_node node;  // first: the queue hands back the node
  coro_abi::resume_slot* slot;
  const char* method;
};
static_assert(sizeof(shard_resumption) <= sizeof(coro_abi::resume_slot::link));
static_assert(alignof(shard_resumption) <= alignof(void*));

constexpr std::size_t method_bytes = 48;  // coro_abi::frame_context::method
constexpr std::int64_t stall_log_interval_ns = 1'000'000'000;

}  // namespace

bool shard::post_resumption(coro_abi::resume_slot& slot, const char* method) noexcept {
  if (on_its_thread() && !_resumptions_closed.load(std::memory_order_relaxed)) [[likely]] {
    // Completed here (a downstream's reply, a call refused on this thread): the loop runs its
    // queued resumptions before it may sleep, so no wake-up is needed, and the gate closes on
    // this thread too. A notify would cost an eventfd write: the flag it tests is still set
    // from the sleep this turn woke from.
    auto* r = new (slot.link) shard_resumption{};
    r->slot = &slot;
    r->method = method;
    _resumptions.push(&r->node);
    return true;
  }
  // The gate: close_coroutines() sets the flag, then waits for _posting to drop to 0; seq_cst
  // on both sides means that either this sees the flag or the closer sees this poster.
  _posting.fetch_add(1, std::memory_order_seq_cst);
  if (_resumptions_closed.load(std::memory_order_seq_cst)) {
    _posting.fetch_sub(1, std::memory_order_release);
    return false;
  }
  auto* r = new (slot.link) shard_resumption{};
  r->slot = &slot;
  r->method = method;
  _resumptions.push(&r->node);
  _waker.notify();
  _posting.fetch_sub(1, std::memory_order_release);
  return true;
}

bool shard::run_coroutines(std::size_t at_most) noexcept {
  if (_resumptions.empty()) return false;
  mark_user_code();
  // At most so many a turn: resumptions posted while these run wait for the next turn, so a
  // steady flow of them cannot keep the turn from ending (its answers leave at its end).
  for (std::size_t i = 0; i < at_most; ++i) {
    mpsc_node* n = _resumptions.pop();
    if (n == nullptr) return false;
    auto* r = reinterpret_cast<shard_resumption*>(n);
    // The frame may end in its resumption, taking its method buffer with it.
    char method[method_bytes];
    std::memcpy(method, r->method, method_bytes);
    method[method_bytes - 1] = '\0';
    r->slot->handle.resume();
    user_code_ran(method);
  }
  return true;
}

void shard::close_coroutines() noexcept {
  _resumptions_closed.store(true, std::memory_order_seq_cst);
  while (_posting.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  // Posted before the gate closed: they run here, the last this thread does for them. Frames
  // completing later resume on the thread that completes them (their home is gone).
  while (run_coroutines(SIZE_MAX)) {
  }
}

void shard::report_stall(std::string_view method, std::int64_t took_ns) noexcept {
  _counts[sc::shard_stalls].add();
  if (_core.options().metrics) {
    try {
      _core.metrics().local().stalled(method, took_ns);
    } catch (const std::bad_alloc&) {
      // This thread's block could not be made: the count above and the log still have it.
    }
  }
  if (_stretch_ns - _stall_logged_ns < stall_log_interval_ns && _stall_logged_ns != 0) {
    ++_stalls_unlogged;
    return;
  }
  _stall_logged_ns = _stretch_ns;
  log::warn("shard_stall", {{"method", method},
                            {"ms", took_ns / 1'000'000},
                            {"shard", static_cast<std::int64_t>(_index)},
                            {"not_logged", static_cast<std::int64_t>(_stalls_unlogged)},
                            {"msg", "user code held the shard's thread: every connection of the shard waited"}});
  _stalls_unlogged = 0;
}

}  // namespace ringrpc::detail

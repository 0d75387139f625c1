#pragma once
// Which call each thread is running user code for, so a stop whose drain timed out can answer
// the calls of handlers that ignore cancelled() on their behalf (server_stop.cpp) instead of
// dropping those answers with their connections.
//
// Each thread owns one slot, written by itself alone (one store before the handler, one
// exchange after): no lock and no line shared with other threads on the call path. The stopping
// thread walks every slot under the registry's mutex, which is otherwise taken only when a
// thread starts or ends, and by a thread whose call was claimed (wait_for_claims).

#include <atomic>
#include <cstdint>
#include <utility>

namespace ringrpc::detail {

struct call;
class server_core;

struct running_slot {
  /// The call whose handler runs on this thread, null when none, or `claimed` once a stopping
  /// server answered it: the handler's own answer is then dropped.
  std::atomic<call*> running{nullptr};
  std::atomic<const server_core*> server{nullptr};
  running_slot* next = nullptr;
  running_slot();
  ~running_slot();
  running_slot(const running_slot&) = delete;
  running_slot& operator=(const running_slot&) = delete;
};

/// Not a call: marks a slot whose call a stopping server has answered.
call* claimed_marker() noexcept;

/// This thread's slot.
running_slot& this_thread_slot() noexcept;

/// Returns once no claim_running_calls() is under way: a thread that found its call claimed
/// calls it before recycling the call, which the claiming thread may still be reading.
void wait_for_claims() noexcept;

/// Claims every call of `server` still running user code (at most one a thread) and calls
/// `answer(c, spare)` for each, with a call from `get_spare()` made before the claim (null:
/// no memory, the walk ends); a spare left unused is returned in `spare`. `c` stays valid
/// meanwhile: its thread is in user code, or in wait_for_claims(). Returns how many it claimed.
template <class Spare, class F>
std::uint64_t claim_running_calls(const server_core* server, call*& spare, Spare&& get_spare, F&& answer);

namespace running_calls_detail {
void lock_registry() noexcept;
void unlock_registry() noexcept;
running_slot* first_slot() noexcept;
}  // namespace running_calls_detail

template <class Spare, class F>
std::uint64_t claim_running_calls(const server_core* server, call*& spare, Spare&& get_spare, F&& answer) {
  std::uint64_t claimed = 0;
  running_calls_detail::lock_registry();
  for (running_slot* s = running_calls_detail::first_slot(); s != nullptr; s = s->next) {
    call* c = s->running.load(std::memory_order_acquire);
    if (c == nullptr || c == claimed_marker()) continue;
    if (s->server.load(std::memory_order_relaxed) != server) continue;
    if (spare == nullptr && (spare = get_spare()) == nullptr) break;
    // Won: the thread finds the marker when its handler returns and hands the call back
    // without answering it; until then the call (and its connection) stay as they are.
    if (!s->running.compare_exchange_strong(c, claimed_marker(), std::memory_order_acq_rel)) continue;
    answer(c, std::exchange(spare, nullptr));
    ++claimed;
  }
  running_calls_detail::unlock_registry();
  return claimed;
}

}  // namespace ringrpc::detail

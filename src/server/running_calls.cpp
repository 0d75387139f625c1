#include "server/running_calls.hpp"

#include <mutex>

namespace ringrpc::detail {

namespace {

std::mutex registry_mu;
running_slot* registry_head = nullptr;
// Its address only: never read or written as a call.
alignas(64) unsigned char marker_storage[1];

}  // namespace

running_slot::running_slot() {
  std::lock_guard lock(registry_mu);
  next = registry_head;
  registry_head = this;
}

running_slot::~running_slot() {
  std::lock_guard lock(registry_mu);
  for (running_slot** p = &registry_head; *p != nullptr; p = &(*p)->next) {
    if (*p == this) {
      *p = next;
      break;
    }
  }
}

call* claimed_marker() noexcept { return reinterpret_cast<call*>(&marker_storage); }

running_slot& this_thread_slot() noexcept {
  thread_local running_slot slot;
  return slot;
}

void wait_for_claims() noexcept { std::lock_guard lock(registry_mu); }

namespace running_calls_detail {
void lock_registry() noexcept { registry_mu.lock(); }
void unlock_registry() noexcept { registry_mu.unlock(); }
running_slot* first_slot() noexcept { return registry_head; }
}  // namespace running_calls_detail

}  // namespace ringrpc::detail

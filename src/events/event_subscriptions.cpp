// A queue's listener registry. Subscribing is rare and dispatching constant, so the list is
// copied on every change and the dispatch thread takes a new snapshot only when the version
// moved; once the queue runs, the union of the listeners' kinds is what post() lets in.

#include <memory>
#include <mutex>
#include <utility>

#include "events/event_queue.hpp"

namespace ringrpc::detail {

namespace {

constexpr std::uint32_t lifecycle_bits =
    event_kind_set{event_kind::server_started, event_kind::server_stopping,
                   event_kind::server_stopped, event_kind::endpoint_started,
                   event_kind::endpoint_stopped}
        .bits();

}  // namespace

void event_queue::subscribe(std::shared_ptr<event_listener> listener, event_kind_set kinds) {
  std::lock_guard lock(_subs_mutex);
  auto next = std::make_shared<subscription_list>(*_subs);
  next->push_back({std::move(listener), kinds});
  _subs = std::move(next);
  _subs_version.fetch_add(1, std::memory_order_release);
  if (_started) _accepted_kinds.fetch_or(kinds.bits(), std::memory_order_relaxed);
}

bool event_queue::unsubscribe(const event_listener* listener) {
  std::lock_guard lock(_subs_mutex);
  auto next = std::make_shared<subscription_list>();
  for (const subscription& s : *_subs) {
    if (s.listener.get() != listener) next->push_back(s);
  }
  if (next->size() == _subs->size()) return false;
  _subs = std::move(next);
  _subs_version.fetch_add(1, std::memory_order_release);
  if (_started) _accepted_kinds.store(wanted_kinds_locked(), std::memory_order_relaxed);
  return true;
}

std::uint32_t event_queue::wanted_kinds_locked() const noexcept {
  std::uint32_t bits = lifecycle_bits;
  for (const subscription& s : *_subs) bits |= s.kinds.bits();
  return bits;
}

}  // namespace ringrpc::detail

#pragma once
// A shard's calls that someone listens to for cancellation (cancel_hub: a handler's on_cancel
// hook, the client calls it made), found by connection and call id when a Cancel frame names
// one or its connection goes, and all at once when the server gives up on its calls. Only
// calls that made a hub are here; a shard none of whose calls did pays one uncontended lock
// per Cancel frame or lost connection, nothing per call.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/cancel_hub.hpp"

namespace ringrpc::detail {

struct connection;

class cancel_registry {
 public:
  /// Any thread (the one that made the hub). Throws std::bad_alloc.
  void add(const connection* conn, std::uint64_t call_id, std::shared_ptr<cancel_hub> hub) {
    std::lock_guard lock(_mu);
    _entries.push_back({conn, call_id, std::move(hub)});
  }
  /// The call was answered: forget it.
  void remove(const cancel_hub* hub) noexcept {
    std::shared_ptr<cancel_hub> last;  // released after the lock
    std::lock_guard lock(_mu);
    for (auto& e : _entries) {
      if (e.hub.get() == hub) {
        last = std::move(e.hub);
        e = std::move(_entries.back());
        _entries.pop_back();
        break;
      }
    }
  }
  /// Fires the hubs of `conn`'s call `call_id` (0: of every call of `conn`; null `conn`:
  /// every hub here). Listeners run on this thread, outside the lock.
  void fire(const connection* conn, std::uint64_t call_id) noexcept {
    std::vector<std::shared_ptr<cancel_hub>> due;
    {
      std::lock_guard lock(_mu);
      if (_entries.empty()) return;
      try {
        for (const auto& e : _entries) {
          if (conn == nullptr || (e.conn == conn && (call_id == 0 || e.call_id == call_id))) due.push_back(e.hub);
        }
      } catch (...) {
        // No memory to list them: the handlers still see cancelled() when they poll.
      }
    }
    for (auto& h : due) h->fire();
  }

 private:
  struct entry {
    const connection* conn;
    std::uint64_t call_id;
    std::shared_ptr<cancel_hub> hub;
  };
  std::mutex _mu;
  std::vector<entry> _entries;
};

}  // namespace ringrpc::detail

#pragma once
// Calls awaiting their reply on one client connection, found by call id without hashing.

#include <bit>
#include <cstdint>
#include <vector>

namespace ringrpc::detail {

/// Call ids on a connection are handed out in increasing order and calls finish roughly in
/// order, so the ids in flight form a narrow window: indexing a power-of-two array by the low
/// bits of the id finds each one directly. When two live ids would share a slot the table
/// doubles, so the steady state never allocates. Item needs a `std::uint64_t id`.
template <class Item>
class inflight_table {
 public:
  explicit inflight_table(std::size_t capacity = 64) : _slots(std::bit_ceil(capacity), nullptr) {}

  void insert(Item* item) {
    while (_slots[item->id & mask()] != nullptr) grow();
    _slots[item->id & mask()] = item;
    ++_size;
  }

  Item* find(std::uint64_t id) const noexcept {
    Item* it = _slots[id & mask()];
    return it != nullptr && it->id == id ? it : nullptr;
  }

  /// Removes and returns the item with `id`, or null.
  Item* take(std::uint64_t id) noexcept {
    Item*& slot = _slots[id & mask()];
    Item* it = slot;
    if (it == nullptr || it->id != id) return nullptr;
    slot = nullptr;
    --_size;
    return it;
  }

  std::size_t size() const noexcept { return _size; }

  /// Removes every item, passing each to `f`.
  template <class F>
  void drain(F&& f) {
    for (auto& slot : _slots) {
      if (slot != nullptr) {
        Item* it = slot;
        slot = nullptr;
        --_size;
        f(it);
      }
    }
  }

 private:
  std::size_t mask() const noexcept { return _slots.size() - 1; }

  // Rare (the window of live ids outgrew the table): doubles until every live id has a slot.
  void grow() {
    std::vector<Item*> live;
    for (Item* it : _slots) {
      if (it != nullptr) live.push_back(it);
    }
    for (std::size_t n = _slots.size() * 2;; n *= 2) {
      std::vector<Item*> fresh(n, nullptr);
      bool fits = true;
      for (Item* it : live) {
        Item*& slot = fresh[it->id & (n - 1)];
        if (slot != nullptr) {
          fits = false;
          break;
        }
        slot = it;
      }
      if (fits) {
        _slots.swap(fresh);
        return;
      }
    }
  }

  std::vector<Item*> _slots;
  std::size_t _size = 0;
};

}  // namespace ringrpc::detail

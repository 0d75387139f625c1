#pragma once
// Calls awaiting their reply on one connection, found by call id: the client runtime's calls
// (client_loop) and ringrpc-load's (tools/load/engine.cpp, whose call_window pools its slots
// and keys them here). Both are clients matching replies to requests in flight, and this
// header needs nothing of the client runtime, hence src/client/ rather than the load tool.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace ringrpc::detail {

/// Open-addressing table of `Item*` keyed by the `std::uint64_t` member `Key` (`id` unless
/// told otherwise), with linear probing. Bounded: it holds at most `max_items` (the
/// connection's max pending calls, or the load tool's depth), so it never has more than
/// bit_ceil(2 * max_items) slots. Within that its size follows the number of items only: it
/// doubles when more than half full and halves when less than an eighth full, whatever the ids
/// are. (An array indexed by the id's low bits had to double whenever one old call was still
/// waiting as the ids wrapped around it, so one stuck call among millions grew it without
/// bound.)
///
/// Ids are hashed (Fibonacci hashing) so that sequential ids spread evenly; removal shifts the
/// following entries back instead of leaving tombstones, so lookups stay short however long
/// the table lives. Owned by one thread. Ids must be unique among the items present. Templated
/// rather than virtual: the load tool looks up every reply here on its hot path.
template <class Item, std::uint64_t Item::*Key = &Item::id>
class inflight_table {
 public:
  static constexpr std::size_t min_slots = 64;

  enum class sizing {
    follows_count,  ///< grows and shrinks with the items in it (a client: max_pending_calls is large)
    fixed,          ///< all slots from the start: no allocation after construction (ringrpc-load)
  };

  explicit inflight_table(std::size_t max_items, sizing s = sizing::follows_count)
      : _max_items(std::max<std::size_t>(max_items, 1)),
        // Never more than half full at max_items, so never more than bit_ceil(2 * max_items).
        _min_slots(s == sizing::fixed ? std::bit_ceil(2 * _max_items)
                                      : std::min(min_slots, std::bit_ceil(2 * _max_items))),
        _slots(_min_slots, nullptr),
        _shift(shift_for(_min_slots)) {}

  /// False (nothing inserted) when max_items are in the table already.
  bool insert(Item* item) {
    if (_size >= _max_items) return false;
    if ((_size + 1) * 2 > _slots.size()) rehash(_slots.size() * 2);
    place(_slots, _shift, item);
    ++_size;
    return true;
  }

  Item* find(std::uint64_t id) const noexcept {
    for (std::size_t i = home(id, _shift);; i = (i + 1) & mask()) {
      Item* it = _slots[i];
      if (it == nullptr || it->*Key == id) return it;
    }
  }

  /// Removes and returns the item with `id`, or null.
  Item* take(std::uint64_t id) noexcept {
    std::size_t i = home(id, _shift);
    for (;; i = (i + 1) & mask()) {
      if (_slots[i] == nullptr) return nullptr;
      if (_slots[i]->*Key == id) break;
    }
    Item* found = _slots[i];
    // Backward-shift deletion: an entry further along the run may move into the hole when the
    // hole lies between its home slot and where it sits now.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask(); _slots[j] != nullptr; j = (j + 1) & mask()) {
      const std::size_t h = home(_slots[j]->*Key, _shift);
      if (((j - h) & mask()) >= ((j - hole) & mask())) {
        _slots[hole] = _slots[j];
        hole = j;
      }
    }
    _slots[hole] = nullptr;
    --_size;
    if (_slots.size() > _min_slots && _size * 8 < _slots.size()) {
      try {
        rehash(_slots.size() / 2);
      } catch (const std::bad_alloc&) {
        // Keeping the larger table is correct, only wasteful.
      }
    }
    return found;
  }

  std::size_t size() const noexcept { return _size; }
  std::size_t max_items() const noexcept { return _max_items; }
  /// Slots allocated (for tests and diagnostics): at most 4x the largest size() since the table
  /// last shrank and at most bit_ceil(2 * max_items), never below min(min_slots, that).
  std::size_t capacity() const noexcept { return _slots.size(); }

  template <class F>
  void for_each(F&& f) const {
    for (Item* it : _slots) {
      if (it != nullptr) f(*it);
    }
  }

  /// Removes every item, passing each to `f`, and gives back the memory of a grown table.
  template <class F>
  void drain(F&& f) {
    std::vector<Item*> slots(_min_slots, nullptr);
    slots.swap(_slots);
    _shift = shift_for(_min_slots);
    _size = 0;
    for (Item* it : slots) {
      if (it != nullptr) f(it);
    }
  }

 private:
  std::size_t mask() const noexcept { return _slots.size() - 1; }

  static unsigned shift_for(std::size_t slots) noexcept {
    return 64 - static_cast<unsigned>(std::countr_zero(slots));
  }

  static std::size_t home(std::uint64_t id, unsigned shift) noexcept {
    return static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ull) >> shift);
  }

  static void place(std::vector<Item*>& slots, unsigned shift, Item* item) noexcept {
    const std::size_t m = slots.size() - 1;
    std::size_t i = home(item->*Key, shift);
    while (slots[i] != nullptr) i = (i + 1) & m;
    slots[i] = item;
  }

  void rehash(std::size_t n) {
    std::vector<Item*> fresh(n, nullptr);
    const unsigned shift = shift_for(n);
    for (Item* it : _slots) {
      if (it != nullptr) place(fresh, shift, it);
    }
    _slots.swap(fresh);
    _shift = shift;
  }

  std::size_t _max_items;
  std::size_t _min_slots;
  std::vector<Item*> _slots;
  unsigned _shift;  // 64 - log2(slots): the top bits of the hash pick the home slot
  std::size_t _size = 0;
};

}  // namespace ringrpc::detail

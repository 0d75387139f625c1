#pragma once
// A connection's open streams by id, and the ids of those that ended last (docs/design/
// streams.md, "Stray frames"): frames for a stream that just ended are the messages the peer had
// in flight when the end crossed them, dropped quietly; frames for an id never opened are errors.
// Owned by the connection's shard thread; nothing here is shared.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace ringrpc::detail {

template <class T>
class stream_table {
 public:
  /// How many ended ids are remembered: more than a connection may have open (100), so even
  /// when all of them end at once (a stop, a burst of cancels) the frames the peer had in
  /// flight for each are known for late ones; past that, a frame for an ended id is as suspect
  /// as one for an id never opened.
  static constexpr std::size_t remembered_ends = 128;

  stream_table() = default;
  stream_table(const stream_table&) = delete;
  stream_table& operator=(const stream_table&) = delete;

  std::size_t size() const noexcept { return _size; }
  bool empty() const noexcept { return _size == 0; }

  /// The open stream `id`, or null.
  T* find(std::uint64_t id) const noexcept {
    if (_capacity == 0) return nullptr;
    for (std::size_t i = slot_of(id);; i = (i + 1) & (_capacity - 1)) {
      const entry& e = _slots[i];
      if (e.value == nullptr) return nullptr;
      if (e.id == id) return e.value;
    }
  }

  /// Adds `value` (not null) as stream `id`. False when the id is open already. Throws
  /// std::bad_alloc when growing fails (nothing is added then).
  bool insert(std::uint64_t id, T* value) {
    if (find(id) != nullptr) return false;
    // Grow at 3/4 full: probes stay short and an empty slot always ends a search.
    if ((_size + 1) * 4 > _capacity * 3) grow();
    place(id, value);
    ++_size;
    return true;
  }

  /// Removes stream `id` and remembers it as ended; returns what it held (null if not open).
  T* erase(std::uint64_t id) noexcept { return remove(id, true); }
  /// Removes stream `id` without remembering it: it never was open for the peer (refused).
  T* forget(std::uint64_t id) noexcept { return remove(id, false); }

  /// Remembers `id` as ended without its having been open here: an open the server refused.
  void remember_end(std::uint64_t id) noexcept { _ended[_ended_next++ % remembered_ends] = id; }
  /// True when `id` is one of the last `remembered_ends` ids erased or remembered (and not
  /// open again).
  bool recently_ended(std::uint64_t id) const noexcept {
    const std::size_t n = _ended_next < remembered_ends ? _ended_next : remembered_ends;
    for (std::size_t k = 0; k < n; ++k) {
      if (_ended[k] == id) return true;
    }
    return false;
  }

  /// Calls f(id, value) for every open stream; f must not change the table.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < _capacity; ++i) {
      if (_slots[i].value != nullptr) f(_slots[i].id, _slots[i].value);
    }
  }

 private:
  T* remove(std::uint64_t id, bool remember) noexcept {
    if (_capacity == 0) return nullptr;
    std::size_t i = slot_of(id);
    for (;; i = (i + 1) & (_capacity - 1)) {
      if (_slots[i].value == nullptr) return nullptr;
      if (_slots[i].id == id) break;
    }
    T* const gone = _slots[i].value;
    close_gap(i);
    --_size;
    if (remember) _ended[_ended_next++ % remembered_ends] = id;
    return gone;
  }

  struct entry {
    std::uint64_t id = 0;
    T* value = nullptr;  // null: the slot is free
  };

  std::size_t slot_of(std::uint64_t id) const noexcept {
    // Clients number streams 1, 2, 3...: a multiplicative hash spreads them over the slots.
    return static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ULL) >> (64 - std::countr_zero(_capacity)));
  }

  void place(std::uint64_t id, T* value) noexcept {
    std::size_t i = slot_of(id);
    while (_slots[i].value != nullptr) i = (i + 1) & (_capacity - 1);
    _slots[i] = {id, value};
  }

  void grow() {
    const std::size_t capacity = _capacity == 0 ? 8 : _capacity * 2;
    auto slots = std::make_unique<entry[]>(capacity);
    std::unique_ptr<entry[]> old = std::move(_slots);
    const std::size_t old_capacity = _capacity;
    _slots = std::move(slots);
    _capacity = capacity;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].value != nullptr) place(old[i].id, old[i].value);
    }
  }

  // Backward-shift deletion: entries after the freed slot move up when their home lets them, so
  // no tombstones accumulate under open/close churn.
  void close_gap(std::size_t hole) noexcept {
    const std::size_t mask = _capacity - 1;
    for (std::size_t j = (hole + 1) & mask; _slots[j].value != nullptr; j = (j + 1) & mask) {
      const std::size_t home = slot_of(_slots[j].id);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool home_after_hole = ((j - home) & mask) < ((j - hole) & mask);
      if (home_after_hole) continue;
      _slots[hole] = _slots[j];
      hole = j;
    }
    _slots[hole] = {};
  }

  std::unique_ptr<entry[]> _slots;
  std::size_t _capacity = 0;  // a power of two, or 0 before the first stream
  std::size_t _size = 0;
  std::array<std::uint64_t, remembered_ends> _ended{};
  std::size_t _ended_next = 0;
};

}  // namespace ringrpc::detail

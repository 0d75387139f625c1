#pragma once
// The open streams of one HTTP/2 client connection, by stream id (proto_h2.cpp). A client's
// stream ids are odd and go up by two, so id / 2 is a dense key: with linear probing from it a
// stream sits in its own slot unless one opened a whole table's length earlier is still open.
// Unlike std::unordered_map it allocates nothing per stream, only when the table doubles.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringrpc::load::h2_detail {

/// `T` has a member `std::int32_t id`, fixed while it is in the table. Holds pointers only.
template <class T>
class stream_table {
 public:
  T* find(std::int32_t id) const noexcept {
    for (std::size_t i = home(id);; i = next(i)) {
      T* s = _slots[i];
      if (s == nullptr || s->id == id) return s;
    }
  }

  /// `s->id` must not be in the table. Throws std::bad_alloc when the table cannot grow.
  void insert(T* s) {
    if ((_count + 1) * 2 > _slots.size()) grow();
    place(s);
    ++_count;
  }

  /// Removes the stream with `id`, if there is one.
  void erase(std::int32_t id) noexcept {
    std::size_t hole = home(id);
    while (_slots[hole] != nullptr && _slots[hole]->id != id) hole = next(hole);
    if (_slots[hole] == nullptr) return;
    _slots[hole] = nullptr;
    --_count;
    // Backward-shift deletion: an entry further along the run moves into the hole unless its
    // home lies cyclically in (hole, j], where a probe for it would stop before the hole.
    for (std::size_t j = next(hole); _slots[j] != nullptr; j = next(j)) {
      const std::size_t k = home(_slots[j]->id);
      const bool stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
      if (stays) continue;
      _slots[hole] = _slots[j];
      _slots[j] = nullptr;
      hole = j;
    }
  }

  std::size_t size() const noexcept { return _count; }

  template <class F>
  void for_each(F&& f) const {
    for (T* s : _slots) {
      if (s != nullptr) f(s);
    }
  }

 private:
  std::size_t home(std::int32_t id) const noexcept {
    return (static_cast<std::uint32_t>(id) >> 1) & (_slots.size() - 1);
  }
  std::size_t next(std::size_t i) const noexcept { return (i + 1) & (_slots.size() - 1); }

  void place(T* s) noexcept {
    std::size_t i = home(s->id);
    while (_slots[i] != nullptr) i = next(i);
    _slots[i] = s;
  }

  void grow() {
    std::vector<T*> old(_slots.size() * 2, nullptr);
    old.swap(_slots);
    for (T* s : old) {
      if (s != nullptr) place(s);
    }
  }

  std::vector<T*> _slots = std::vector<T*>(16, nullptr);  // a power of two, at most half full
  std::size_t _count = 0;
};

}  // namespace ringrpc::load::h2_detail

#pragma once
// The calls in flight on one ringrpc-load connection, by sequence number.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "client/inflight_table.hpp"

namespace ringrpc::load {

/// Send and receive times of the calls in flight on one connection, found by sequence number:
/// `max_in_flight` (the depth) slots, keyed in the client's bounded inflight_table, sized once
/// so that the run never allocates for it. (A window indexed by the low bits of the sequence
/// number had to double whenever one slow call was still in flight as the numbers wrapped
/// around it, without bound.)
class call_window {
 public:
  static constexpr std::uint64_t no_seq = std::numeric_limits<std::uint64_t>::max();
  struct slot {
    std::uint64_t seq = no_seq;
    std::int64_t intended_ns = 0;
    std::int64_t sent_ns = 0;
    std::uint32_t kind = 0;  ///< index into the run's request kinds, for --mix reports
    bool timed_out = false;
  };

  explicit call_window(std::size_t max_in_flight = 1);
  call_window(call_window&&) noexcept = default;
  call_window& operator=(call_window&&) noexcept = default;

  /// A free slot for `seq`, which must not be in the window; at most max_in_flight at a time.
  slot& insert(std::uint64_t seq) noexcept;
  slot* find(std::uint64_t seq) noexcept { return _table.find(seq); }
  /// Removes a slot returned by insert() or find().
  void erase(slot& s) noexcept;
  std::size_t size() const noexcept { return _table.size(); }
  std::size_t capacity() const noexcept { return _table.capacity(); }
  void clear() noexcept;

  template <class F>
  void for_each(F&& f) {
    _table.for_each(f);
  }
  template <class F>
  void for_each(F&& f) const {
    _table.for_each([&](const slot& s) { f(s); });
  }

 private:
  std::vector<slot> _slots;  // never resized: the table points into it
  std::vector<slot*> _free;
  detail::inflight_table<slot, &slot::seq> _table;
};

}  // namespace ringrpc::load

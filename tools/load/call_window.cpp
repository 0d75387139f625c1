#include "call_window.hpp"

#include <algorithm>

namespace ringrpc::load {

call_window::call_window(std::size_t max_in_flight)
    : _slots(std::max<std::size_t>(max_in_flight, 1)),
      _table(_slots.size(), detail::inflight_table<slot, &slot::seq>::sizing::fixed) {
  _free.reserve(_slots.size());
  for (slot& s : _slots) _free.push_back(&s);
}

call_window::slot& call_window::insert(std::uint64_t seq) noexcept {
  slot* s = _free.back();
  _free.pop_back();
  *s = slot{};
  s->seq = seq;
  _table.insert(s);  // cannot fail: the table holds as many as there are slots, and never grows
  return *s;
}

void call_window::erase(slot& s) noexcept {
  _table.take(s.seq);
  s = slot{};
  _free.push_back(&s);
}

void call_window::clear() noexcept {
  _table.drain([this](slot* s) {
    *s = slot{};
    _free.push_back(s);
  });
}

}  // namespace ringrpc::load

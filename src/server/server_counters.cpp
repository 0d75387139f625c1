// The counter table as data (ringrpc/server_counters.hpp) and server_stats' accessors. They are
// defined here, in libringrpc, so the names a program sees are those of the library that made
// the values, and server_stats' layout never depends on how many counters there are.

#include "ringrpc/server_counters.hpp"

#include <algorithm>
#include <array>

namespace ringrpc {

namespace {

#define RINGRPC_COUNTER_INFO(name, kind, metric, label_key, label_value, metric_help, help) \
  server_counter_info{server_counter::name, counter_kind::kind, #name,                     \
                      std::string_view(help).empty() ? metric_help : help,                \
                      metric, label_key, label_value, metric_help},

constexpr std::array<server_counter_info, server_counter_count> table{
    {RINGRPC_SERVER_COUNTERS(RINGRPC_COUNTER_INFO)}};

#undef RINGRPC_COUNTER_INFO

// Entry i is counter i: the enum and the array are made from the same list.
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (static_cast<std::size_t>(table[i].id) != i) return false;
  }
  return true;
}
static_assert(in_enum_order());

}  // namespace

std::span<const server_counter_info> server_counters() noexcept { return table; }

std::uint64_t server_stats::operator[](server_counter c) const noexcept {
  const auto i = static_cast<std::size_t>(c);
  return i < _values.size() ? _values[i] : 0;
}

std::optional<std::uint64_t> server_stats::get(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < _values.size() && i < table.size(); ++i) {
    if (table[i].name == name) return _values[i];
  }
  return std::nullopt;
}

std::vector<server_stats::entry> server_stats::entries() const {
  std::vector<entry> out;
  const std::size_t n = std::min(_values.size(), table.size());
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back({table[i], _values[i]});
  return out;
}

}  // namespace ringrpc

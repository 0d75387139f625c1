#pragma once
// Method name -> handler, frozen when the server starts so lookups need no lock.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ringrpc/server.hpp"

namespace ringrpc::detail {

class method_table {
 public:
  /// Before start only. Throws std::invalid_argument on an empty or duplicate name.
  void add(std::string name, method_handler handler);

  /// Any thread after start. No allocation: the lookup hashes the view directly.
  std::optional<std::uint32_t> find(std::string_view name) const noexcept {
    auto it = _index.find(name);
    if (it == _index.end()) return std::nullopt;
    return it->second;
  }

  const method_handler& handler(std::uint32_t i) const noexcept { return _entries[i].handler; }
  std::string_view name(std::uint32_t i) const noexcept { return _entries[i].name; }
  std::size_t size() const noexcept { return _entries.size(); }

 private:
  struct view_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  struct entry {
    std::string name;
    method_handler handler;
  };
  std::vector<entry> _entries;
  std::unordered_map<std::string, std::uint32_t, view_hash, std::equal_to<>> _index;
};

}  // namespace ringrpc::detail

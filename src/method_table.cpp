#include "method_table.hpp"

#include <stdexcept>

namespace ringrpc::detail {

void method_table::add(std::string name, method_handler handler) {
  if (name.empty()) throw std::invalid_argument("method name must not be empty");
  if (!handler) throw std::invalid_argument("method '" + name + "' has no handler");
  if (_index.contains(name)) throw std::invalid_argument("method '" + name + "' is already registered");
  _index.emplace(name, static_cast<std::uint32_t>(_entries.size()));
  _entries.push_back({std::move(name), std::move(handler)});
}

}  // namespace ringrpc::detail

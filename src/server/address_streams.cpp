#include "server/address_streams.hpp"

#include <algorithm>

namespace ringrpc::detail {

std::shared_ptr<address_streams::count> address_streams::of(const std::string& host) {
  std::lock_guard lock(_mu);
  std::weak_ptr<count>& slot = _by_host[host];
  if (std::shared_ptr<count> live = slot.lock()) return live;
  auto fresh = std::make_shared<count>();
  slot = fresh;
  if (_by_host.size() >= _prune_at) {
    prune();
    _prune_at = std::max<std::size_t>(64, _by_host.size() * 2);
  }
  return fresh;
}

unsigned address_streams::open_from(const std::string& host) const {
  std::lock_guard lock(_mu);
  const auto it = _by_host.find(host);
  if (it == _by_host.end()) return 0;
  const std::shared_ptr<count> live = it->second.lock();
  return live ? live->open() : 0;
}

void address_streams::prune() noexcept {
  std::erase_if(_by_host, [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace ringrpc::detail

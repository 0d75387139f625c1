#include "server/peer_limits.hpp"

#include <algorithm>

namespace ringrpc::detail {

void peer_limits::refill(entry& e, std::int64_t now_ns) const noexcept {
  if (_rate == 0) return;
  const double add = static_cast<double>(now_ns - e.refilled_ns) * 1e-9 * _rate;
  e.tokens = std::min<double>(_burst, e.tokens + add);
  e.refilled_ns = now_ns;
}

void peer_limits::prune(std::int64_t now_ns) noexcept {
  for (auto it = _by_address.begin(); it != _by_address.end();) {
    refill(it->second, now_ns);
    const bool idle = it->second.open == 0 && it->second.handshakes == 0 &&
                      (_rate == 0 || it->second.tokens >= _burst);
    it = idle ? _by_address.erase(it) : std::next(it);
  }
}

peer_limits::entry* peer_limits::find_or_add(const std::string& address, std::int64_t now_ns) {
  auto it = _by_address.find(address);
  if (it != _by_address.end()) return &it->second;
  if (_by_address.size() >= max_entries) prune(now_ns);
  if (_by_address.size() >= max_entries) return nullptr;  // untracked, see max_entries
  entry fresh;
  fresh.tokens = _burst;
  fresh.refilled_ns = now_ns;
  return &_by_address.emplace(address, fresh).first->second;
}

void peer_limits::erase_if_unused(std::unordered_map<std::string, entry>::iterator it) noexcept {
  // Kept while its bucket refills: a connect-close loop must not reset its own limit.
  if (it->second.open == 0 && it->second.handshakes == 0 && _rate == 0) _by_address.erase(it);
}

peer_limits::verdict peer_limits::admit(const std::string& address, std::int64_t now_ns) {
  if (_max_open == 0 && _rate == 0) return verdict::admitted;
  std::lock_guard lock(_mu);
  entry* found = find_or_add(address, now_ns);
  if (found == nullptr) return verdict::admitted;
  entry& e = *found;
  if (_max_open != 0 && e.open >= _max_open) return verdict::too_many;
  if (_rate != 0) {
    refill(e, now_ns);
    if (e.tokens < 1) return verdict::too_fast;
    e.tokens -= 1;
  }
  ++e.open;
  return verdict::admitted;
}

void peer_limits::release(const std::string& address) noexcept {
  if (_max_open == 0 && _rate == 0) return;
  std::lock_guard lock(_mu);
  auto it = _by_address.find(address);
  if (it == _by_address.end() || it->second.open == 0) return;
  --it->second.open;
  erase_if_unused(it);
}

peer_limits::handshake_verdict peer_limits::admit_handshake(const std::string& address, std::int64_t now_ns) {
  if (_max_handshakes == 0) return handshake_verdict::uncounted;
  std::lock_guard lock(_mu);
  entry* e = find_or_add(address, now_ns);
  if (e == nullptr) return handshake_verdict::uncounted;
  if (e->handshakes >= _max_handshakes) return handshake_verdict::refused;
  ++e->handshakes;
  return handshake_verdict::counted;
}

void peer_limits::end_handshake(const std::string& address) noexcept {
  std::lock_guard lock(_mu);
  auto it = _by_address.find(address);
  if (it == _by_address.end() || it->second.handshakes == 0) return;
  --it->second.handshakes;
  erase_if_unused(it);
}

unsigned peer_limits::handshakes_from(const std::string& address) const {
  std::lock_guard lock(_mu);
  auto it = _by_address.find(address);
  return it == _by_address.end() ? 0 : it->second.handshakes;
}

unsigned peer_limits::open_from(const std::string& address) const {
  std::lock_guard lock(_mu);
  auto it = _by_address.find(address);
  return it == _by_address.end() ? 0 : it->second.open;
}

}  // namespace ringrpc::detail

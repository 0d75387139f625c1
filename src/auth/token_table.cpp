#include "auth/token_table.hpp"

namespace ringrpc::detail {

token_table::token_table(const std::vector<bearer_token>& tokens) {
  _sets.push_back(std::make_unique<const std::vector<bearer_token>>(tokens));
  _current.store(_sets.back().get(), std::memory_order_release);
}

void token_table::replace(std::vector<bearer_token> tokens) {
  auto next = std::make_unique<const std::vector<bearer_token>>(std::move(tokens));
  std::lock_guard lock(_replacing);
  _sets.reserve(_sets.size() + 1);  // the push below cannot throw after `next` is published
  _current.store(next.get(), std::memory_order_release);
  _sets.push_back(std::move(next));
}

const bearer_token* token_table::match(std::string_view presented) const noexcept {
  const bearer_token* found = nullptr;
  // Every token is compared in full, whatever matched before: the time taken tells an
  // observer how long the configured tokens are, not how much of one it guessed.
  for (const bearer_token& t : current()) {
    unsigned diff = presented.size() != t.token.size() ? 1u : 0u;
    for (std::size_t i = 0; i < t.token.size(); ++i) {
      const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
      diff |= p ^ static_cast<unsigned char>(t.token[i]);
    }
    // Kept from being turned into an early exit: the compiler must assume `diff` is read.
    asm volatile("" : "+r"(diff));
    if (diff == 0 && found == nullptr) found = &t;
  }
  return found;
}

bool token_table::allows(const bearer_token& t, std::string_view method) noexcept {
  if (t.methods.empty()) return true;
  for (const std::string& m : t.methods) {
    if (method == m || (method.size() > m.size() && method.starts_with(m) && method[m.size()] == '.')) return true;
  }
  return false;
}

}  // namespace ringrpc::detail

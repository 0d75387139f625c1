#pragma once
// The bearer tokens a port accepts: the RPC port's (call_guard) and the admin port's
// (libringrpc_ops) alike.

#include <atomic>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "ringrpc/authorizer.hpp"
#include "base/shared_internal.hpp"

namespace ringrpc::detail {

/// The accepted bearer tokens. Lookup time depends on the configured tokens' lengths only,
/// never on where the presented token first differs or which token it matches.
///
/// replace() (a reloaded tokens file) swaps in a new set while reader threads look tokens up:
/// readers load one pointer (acquire, a plain load on x86: no write, no lock per call) and the
/// sets replaced are kept until the table goes, so a reader still matching against an old set
/// never reads freed memory. Reloads are operator actions (SIGHUP), so what is kept is a few
/// sets of at most 10,000 tokens each, not a growing cost per call.
class RINGRPC_SHARED_INTERNAL token_table {
 public:
  explicit token_table(const std::vector<bearer_token>& tokens);
  bool empty() const noexcept { return current().empty(); }
  /// The token equal to `presented`, or null. Valid as long as the table.
  const bearer_token* match(std::string_view presented) const noexcept;
  /// True when `t` may call `method` (bearer_token::methods).
  static bool allows(const bearer_token& t, std::string_view method) noexcept;
  /// Any thread: calls checked from now on use `tokens`.
  void replace(std::vector<bearer_token> tokens);

 private:
  const std::vector<bearer_token>& current() const noexcept { return *_current.load(std::memory_order_acquire); }
  std::mutex _replacing;  // replace() only; readers never take it
  std::vector<std::unique_ptr<const std::vector<bearer_token>>> _sets;  // every set ever current
  std::atomic<const std::vector<bearer_token>*> _current;
};

}  // namespace ringrpc::detail

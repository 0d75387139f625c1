#pragma once
// What a call must pass on the reader thread before it is queued, beyond the frame itself: its
// metadata within the caps, a bearer token the server accepts (when it checks tokens), and the
// server's and its endpoint's authorizers. Refusals are counted here. Calls from connections
// with no identity, no metadata and no checks configured never come here (shard::dispatch).

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/sharded_counter.hpp"
#include "server/call.hpp"
#include "ringrpc/authorizer.hpp"
#include "ringrpc/server.hpp"
#include "auth/auth_limiter.hpp"
#include "auth/token_table.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace ringrpc::detail {

struct connection;

class call_guard {
 public:
  explicit call_guard(const server_options& o);

  /// Before start().
  void set_authorizer(std::shared_ptr<const authorizer> a) noexcept {
    _authorizer = std::move(a);
    _every_call.store(!_tokens.empty() || _authorizer != nullptr, std::memory_order_relaxed);
  }
  /// True when every call must come here (tokens or a server-wide authorizer).
  bool checks_every_call() const noexcept { return _every_call.load(std::memory_order_relaxed); }
  /// Any thread, while running: the bearer tokens accepted from now on (a reloaded tokens
  /// file). Connections stay open; a call already admitted keeps the identity it got.
  void replace_tokens(std::vector<bearer_token> tokens) {
    const bool checking = !tokens.empty() || _authorizer != nullptr;
    _tokens.replace(std::move(tokens));
    _every_call.store(checking, std::memory_order_release);
  }

  /// What a refusal asks of the reader beyond its status and message.
  struct refusal {
    std::uint32_t retry_after_ms = 0;  ///< the address's tokens are refused unchecked this long
    bool close = false;                ///< the connection has had auth_failures.per_connection
  };
  /// Reader thread: checks the metadata, resolves who the caller is (k.peer) and asks the
  /// server's authorizer. status::ok, or the refusal's status with `why` (and `r`) set.
  /// `now_ns`: the steady clock, for the failed-authentication budget.
  status admit_caller(connection& c, call& k, const frame_view& v, std::int64_t now_ns, std::string& why,
                      refusal& r);
  /// Reader thread: the endpoint's own authorizer, after admit_caller.
  status admit_endpoint(const authorizer& a, const call& k, const frame_view& v, std::string& why) noexcept;

  /// Counts a refusal by its status.
  void count(status s) noexcept {
    if (s == status::unauthenticated) _unauthenticated.add();
    else if (s == status::permission_denied) _permission_denied.add();
    else _bad_metadata.add();
  }
  std::uint64_t unauthenticated() const noexcept { return _unauthenticated.get(); }
  std::uint64_t permission_denied() const noexcept { return _permission_denied.get(); }
  std::uint64_t bad_metadata() const noexcept { return _bad_metadata.get(); }
  std::uint64_t auth_limited() const noexcept { return _auth_limited.get(); }
  std::uint64_t auth_closed() const noexcept { return _auth_closed.get(); }

 private:
  status decide(const authorizer& a, const authorization_request& r, std::string& why,
                const char* whose) const noexcept;
  status check_token(connection& c, call& k, std::string_view method, const std::optional<std::string_view>& value,
                     std::int64_t now_ns, std::string& why, refusal& r);
  void note_auth_failure(connection& c, refusal& r) noexcept;
  const metadata_limits _limits;
  token_table _tokens;
  std::shared_ptr<const authorizer> _authorizer;
  // Read per call: one byte, not the table and the pointer. Atomic because a tokens reload may
  // turn checking on while readers run; a relaxed load costs what a plain one does.
  std::atomic<bool> _every_call{false};
  sharded_counter _unauthenticated, _permission_denied, _bad_metadata, _auth_limited, _auth_closed;
  auth_limiter _limiter;
};

}  // namespace ringrpc::detail

#pragma once
// The server's interceptor chain (ringrpc/interceptor.hpp) around one call's handler. Engaged
// only when server_options::interceptors is non-empty: server_calls.cpp keeps it in a
// std::optional, so a server without interceptors pays two tests per call (and an
// empty optional's destruction) and nothing else.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ringrpc/interceptor.hpp"
#include "ringrpc/metadata.hpp"

namespace ringrpc {
class call_context;
}

namespace ringrpc::detail {

struct call;

/// Key/value notes server interceptors attach to a call for its handler
/// (call_context::annotate / annotation).
struct call_annotations {
  std::vector<metadata_entry> items;
};

/// One call going through the chain: before_call in order on construction, after_call in
/// reverse for those that ran (complete(), or deferred_complete() for a deferred answer).
class intercepted_call {
 public:
  /// Runs the chain's before_call; a refusal or a throw answers the call through `ctx`.
  intercepted_call(const server_interceptors& chain, call_context& ctx, call& c) noexcept;
  intercepted_call(const intercepted_call&) = delete;
  intercepted_call& operator=(const intercepted_call&) = delete;
  /// True when every before_call let the call through: run the handler.
  bool admitted() const noexcept { return _admitted; }
  /// The handler has returned (not deferred) and the answer is encoded: after_call, each.
  void complete(call_context& ctx, call& c) noexcept;

 private:
  const server_interceptors& _chain;
  call_annotations _notes;
  bool _admitted = true;
};

/// A deferred call of an intercepted chain was answered (its reply encoded, not yet sent):
/// after_call for each interceptor whose before_call ran. `c.intercepted_count` says how many.
void deferred_complete(const server_interceptors& chain, call& c) noexcept;

}  // namespace ringrpc::detail

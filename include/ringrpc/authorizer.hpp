#pragma once
/// \file The authorizer seam: admits or refuses each call by who the caller is and what it calls.
///
/// A server may have one (server::set_authorizer) and every endpoint one of its own
/// (endpoint_options::authorizer); a call must pass the server's, then its endpoint's. Bearer
/// tokens, when the server checks them (server_options::bearer_tokens), are checked before
/// either: a call without an accepted token is answered `unauthenticated` and no authorizer
/// sees it.
///
/// **An authorizer runs on the server's I/O (reader) thread, for every call, before the call is
/// queued.** It must be cheap and must never block: no I/O, no locks others hold for long, no
/// waiting on anything — a slow authorizer stalls every connection of that reader. Decide from
/// what is at hand (the identity, the method, the metadata) and data prepared beforehand (an
/// immutable table swapped in by pointer, say). It may run on several reader threads at once,
/// so it must be thread-safe; authorize() is noexcept (make_authorizer turns an exception from
/// its function into `permission_denied`).
///
/// Refusals are answered at once — `unauthenticated` (no usable identity) or
/// `permission_denied` (identity known, not allowed) — the call does not run, the connection
/// stays open, they are counted (server_stats::calls_unauthenticated / calls_permission_denied,
/// `ringrpc_rpc_calls_rejected_total{path=...}`) and posted as call_rejected events, which the
/// log writes rate-limited.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/peer_identity.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// A bearer token the server accepts (server_options::bearer_tokens) and the subject name a
/// call carrying it gets as peer_identity::token_subject. The token is a secret: ringrpc never
/// logs it, prints it or shows it on a status page.
struct bearer_token {
  std::string token;    ///< RFC 6750 b64token characters, e.g. 32 random bytes in base64url
  std::string subject;  ///< e.g. "billing-batch"; non-empty
  /// Empty: the token may call every method. Otherwise only these: an entry "NAME" allows the
  /// method "NAME" and every "NAME.x" (an endpoint), "Greeter.SayHello" that method alone;
  /// other calls with this token are answered permission_denied.
  std::vector<std::string> methods;
};

enum class authorization {
  allow,
  unauthenticated,    ///< nothing (usable) proved: answered status::unauthenticated
  permission_denied,  ///< known caller, not allowed: answered status::permission_denied
};

/// What an authorizer decides on. Views valid during the call to authorize() only.
struct authorization_request {
  std::string_view method;              ///< the full method name, e.g. "Greeter.SayHello"
  const peer_identity* peer = nullptr;  ///< null: plaintext without an accepted token
  metadata_view metadata;               ///< the call's metadata (checked against the caps)
};

class authorizer {
 public:
  virtual ~authorizer() = default;
  /// See the file comment: reader thread, cheap, non-blocking, thread-safe.
  virtual authorization authorize(const authorization_request& request) const noexcept = 0;
};

/// An authorizer from a function (same rules). An exception from `decide` counts as
/// permission_denied.
std::shared_ptr<const authorizer> make_authorizer(
    std::function<authorization(const authorization_request&)> decide);

/// Allows calls whose peer proved something (a verified certificate or an accepted token);
/// others are `unauthenticated`.
std::shared_ptr<const authorizer> require_authenticated();

}  // namespace ringrpc

RINGRPC_API_END

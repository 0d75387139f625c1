#pragma once
// ringrpc-call over TLS: `ringrpcs://HOST:PORT` and the flags that say whom to trust.

#include <memory>
#include <string>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::tools {

struct tls_flags {
  std::string cacert;  ///< --cacert: CAs to verify the server with ("" = the system's)
  std::string cert;    ///< --cert/--key: a client certificate for mutual TLS
  std::string key;
  bool insecure = false;  ///< --insecure: no verification
  bool any() const { return insecure || !cacert.empty() || !cert.empty() || !key.empty(); }
};

/// Strips "ringrpcs://" (returns true) or "ringrpc://" and a trailing '/' from `target`. Throws
/// std::invalid_argument, with what to give instead, for any other scheme or a path.
bool take_scheme(std::string& target);

/// The client TLS layer for these flags; throws std::runtime_error with a one-line reason
/// (also when this ringrpc-call was built without TLS).
std::shared_ptr<record_layer> make_client_tls(const tls_flags& flags);

}  // namespace ringrpc::tools

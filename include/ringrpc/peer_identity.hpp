#pragma once
/// \file Who is calling: the identity a connection (and a call's bearer token) proved.
///
/// A plaintext connection has no identity of its own. A TLS connection gets one after its
/// handshake (the certificate the peer presented, and whether it verified against the trusted
/// CAs). A call carrying an accepted bearer token (`authorization: Bearer <token>` metadata,
/// docs/security.md) sees the connection's identity with `token_subject` set to the subject
/// name configured for that token. The authorizer decides with it; handlers read it through
/// call_context::peer(); connection events carry the connection's part in peer_info.
///
/// Immutable once published: shared between threads by `std::shared_ptr<const peer_identity>`
/// or by a pointer valid for the call (call_context::peer()).

#include <string>
#include <vector>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

struct peer_identity {
  /// The certificate subject as a one-line distinguished name (RFC 2253 order), e.g.
  /// "CN=billing,O=Example"; empty without a certificate.
  std::string subject;
  /// Subject alternative names of the certificate, by type, in certificate order.
  std::vector<std::string> dns_names;     ///< e.g. "billing.internal"
  std::vector<std::string> uris;          ///< e.g. "spiffe://example.org/billing"
  std::vector<std::string> ip_addresses;  ///< textual, e.g. "10.0.0.7" or "fd00::7"
  /// True when the peer presented a certificate and it verified against the server's trusted
  /// CAs (mutual TLS). False for plaintext, and for TLS without a client certificate: then the
  /// certificate fields above are empty.
  bool certificate_verified = false;
  /// The subject name configured for the bearer token this call carried and the server
  /// accepted; empty when the call carried none (or the server checks no tokens).
  std::string token_subject;

  /// True when anything at all was proved: a verified certificate or an accepted token.
  bool authenticated() const noexcept { return certificate_verified || !token_subject.empty(); }
};

}  // namespace ringrpc

RINGRPC_API_END

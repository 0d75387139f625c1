#pragma once
/// \file TLS for ringrpc (library ringrpc-tls, pkg-config `ringrpc-tls`): OpenSSL 3 driven over
/// memory buffers, so the io_uring loops keep receiving into their provided buffers and writing
/// with their own gathered writes; no OpenSSL call ever touches a socket or blocks.
///
///   ringrpc::server_options o;
///   o.tls = ringrpc::tls_context::server({.cert_file = "server.pem", .key_file = "server.key"});
///   o.tls_port = 7443;  // beside the plaintext `port`
///
/// The option structs are plain data (the configuration reads them without linking OpenSSL).

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/record_layer.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// `[tls]` of the configuration: a server's certificates and policy.
struct tls_options {
  std::string cert_file;   ///< PEM: the server's certificate, then its chain
  std::string key_file;    ///< PEM: the private key of cert_file
  std::string ca_file;     ///< PEM: CAs that sign client certificates (mutual TLS)
  bool require_client_cert = false;  ///< refuse clients without a certificate signed by ca_file
  std::string min_version = "1.2";   ///< "1.2" or "1.3"
  std::string ciphers;     ///< TLS 1.2 cipher list (OpenSSL syntax); "" = OpenSSL's default
  std::string ciphersuites;  ///< TLS 1.3 suites; "" = OpenSSL's default
  bool enabled() const noexcept { return !cert_file.empty(); }
};

/// A client's trust and identity.
struct tls_client_options {
  std::string ca_file;      ///< PEM CAs to verify the server with; "" = the system's store
  std::string cert_file;    ///< client certificate for mutual TLS (optional)
  std::string key_file;
  std::string server_name;  ///< SNI and the name verified; "" = the host connected to
  bool insecure = false;    ///< skip verification (tests only: anyone can pose as the server)
  std::string min_version = "1.2";
  /// ALPN protocols offered, in order of preference; empty = {"ringrpc/1"} (e.g. {"h2"} or
  /// {"http/1.1"} for a load client of other servers, which refuse an offer they cannot match).
  std::vector<std::string> alpn;
  /// Keep OpenSSL's record buffers (~34 KiB) for the session's life instead of freeing them
  /// whenever no record is in flight: no malloc and free per record, for a client whose
  /// connections are never idle (ringrpc-load), at that memory per connection.
  bool keep_record_buffers = false;
};

/// A certificate, key or policy that cannot be used; what() is one line naming the file.
class tls_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The certificates and settings of one side, shared by all its connections. Thread-safe.
class tls_context final : public record_layer {
 public:
  /// Loads and checks everything at once: a missing, unreadable, expired or not yet valid
  /// certificate, a key that does not match it, an unusable CA file or policy throw tls_error.
  static std::shared_ptr<tls_context> server(const tls_options& options);
  static std::shared_ptr<tls_context> client(const tls_client_options& options);
  ~tls_context() override;

  /// Re-reads the files named at creation (SIGHUP). New handshakes use the new certificates;
  /// sessions already made keep theirs. On an error throws tls_error and keeps the old ones.
  void reload();

  std::string_view name() const noexcept override { return "userspace OpenSSL"; }
  std::unique_ptr<record_session> new_server_session() override;
  /// ALPN "ringrpc/1" when offered, else "h2" (gRPC clients, docs/grpc.md).
  std::unique_ptr<record_session> new_server_session_with_h2() override;
  /// ALPN "http/1.1" (a client offering only other protocols, such as only h2, is refused).
  std::unique_ptr<record_session> new_http_server_session() override;
  std::size_t session_bytes() const noexcept override;
  /// A client session; `host` is verified (and sent as SNI) unless server_name overrides it.
  std::unique_ptr<record_session> new_client_session(std::string_view host) override;
  /// "CN=... (expires 2027-01-01)": the certificate in use, for logs and /status.
  std::string certificate_summary() const;

  struct impl;
  explicit tls_context(std::unique_ptr<impl> i) noexcept;

 private:
  enum class speaks : unsigned char { frames, frames_or_h2, http };
  std::unique_ptr<record_session> accepting_session(speaks what);
  std::unique_ptr<impl> _impl;
};

/// Reads what a DER certificate says about its holder (subject, DNS/URI/IP alternative names);
/// no verification. Empty for bytes that are no certificate. (Outside bytes: fuzzed.)
peer_certificate_identity identity_of_der_certificate(std::string_view der);

/// "ringrpc/1", the ALPN protocol id ringrpc offers and selects.
inline constexpr std::string_view tls_alpn = "ringrpc/1";

}  // namespace ringrpc

RINGRPC_API_END

#pragma once
// One connection's TLS session over memory BIOs (see README.md).

#include <openssl/ssl.h>

#include <string>
#include <string_view>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::tls_detail {

class openssl_session final : public record_session {
 public:
  /// Takes ownership of `ssl` (already configured as client or server).
  explicit openssl_session(SSL* ssl);
  ~openssl_session() override;
  openssl_session(const openssl_session&) = delete;
  openssl_session& operator=(const openssl_session&) = delete;

  outcome receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                  std::vector<std::byte>& out) override;
  outcome seal(std::span<const std::byte> plain, std::vector<std::byte>& out) override;
  outcome start(std::vector<std::byte>& out) override;
  outcome close_notify(std::vector<std::byte>& out) override;
  bool established() const noexcept override { return _established; }
  std::string error() const override { return _error; }
  bool peer_unverified() const noexcept override;
  bool holds_partial_record() const noexcept override;
  peer_certificate_identity peer_identity() const override;
  std::string describe() const override;
  std::string_view negotiated_protocol() const noexcept override;

 private:
  outcome handshake(std::vector<std::byte>& out);
  outcome fail(int ssl_error, const char* during);
  void drain(std::vector<std::byte>& out);

  SSL* _ssl;
  BIO* _in;   // ciphertext received, read by OpenSSL
  BIO* _out;  // ciphertext OpenSSL produced, for us to send
  bool _established = false;
  bool _said_anything = false;  // drain() has given the peer bytes of ours
  std::string _error;
};

/// Everything OpenSSL's error queue holds, one line (and the queue emptied).
std::string take_openssl_errors();

/// Identity of a parsed certificate.
peer_certificate_identity identity_of(X509* cert);

}  // namespace ringrpc::tls_detail

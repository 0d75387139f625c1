#pragma once
// gRPC inside TLS: a TLS connection whose handshake chose ALPN "h2" keeps its TLS session, and
// a gRPC session takes the plaintext. Bytes in: TLS, then HTTP/2, out come frames; frames out:
// HTTP/2, then TLS records. What the gRPC session says on its own (SETTINGS, acknowledgements,
// GOAWAY) is sealed into records on the way.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/grpc_session.hpp"
#include "ringrpc/record_layer.hpp"

namespace ringrpc::detail::grpc {

class over_tls final : public record_session {
 public:
  /// `tls` is established; `inner` takes its plaintext from now on.
  over_tls(std::unique_ptr<record_session> tls, std::unique_ptr<session> inner) noexcept
      : _tls(std::move(tls)), _inner(std::move(inner)) {}

  /// Plaintext `tls` already produced (in the receive that finished its handshake): through the
  /// gRPC session, its frames appended to `frames` and its own bytes sealed into `out`.
  outcome take_plaintext(std::span<const std::byte> plain, std::vector<std::byte>& frames,
                         std::vector<std::byte>& out);

  outcome receive(std::span<const std::byte> in, std::vector<std::byte>& frames,
                  std::vector<std::byte>& out) override;
  outcome seal(std::span<const std::byte> frames, std::vector<std::byte>& out) override;
  outcome start(std::vector<std::byte>& out) override { return _tls->start(out); }
  bool established() const noexcept override { return _tls->established(); }
  std::string error() const override;
  bool peer_unverified() const noexcept override { return _tls->peer_unverified(); }
  bool holds_partial_record() const noexcept override {
    return _tls->holds_partial_record() || _inner->holds_partial_record();
  }
  peer_certificate_identity peer_identity() const override { return _tls->peer_identity(); }
  std::string describe() const override { return _tls->describe() + ", HTTP/2 (gRPC)"; }
  outcome close_notify(std::vector<std::byte>& out) override;
  std::string_view negotiated_protocol() const noexcept override { return _tls->negotiated_protocol(); }

  session& inner() noexcept { return *_inner; }

 private:
  std::unique_ptr<record_session> _tls;
  std::unique_ptr<session> _inner;
  std::vector<std::byte> _plain;  // plaintext between the two, reused
  std::vector<std::byte> _said;   // what the gRPC session said, before sealing
};

}  // namespace ringrpc::detail::grpc

#pragma once
// One load connection's TLS: a client record_session (OpenSSL over memory buffers) between the
// ring's recv/send and the codec. Ciphertext arrives in the provided buffers and leaves in the
// connection's batches; no call blocks or touches the socket.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::load {

class tls_transport {
 public:
  enum class result : unsigned char { ok, closed, failed };

  /// A session for a connection to `host` (SNI and the verified name), its ClientHello queued.
  /// Null if the layer makes no session (out of memory, say).
  static std::unique_ptr<tls_transport> open(record_layer& layer, std::string_view host, std::int64_t now_ns);

  /// Ciphertext from the socket; the plaintext it completes is in plain() afterwards.
  result receive(std::span<const std::byte> in);
  std::span<const std::byte> plain() const noexcept { return _plain; }

  /// Turns a batch of plaintext requests into what goes on the wire: handshake records queued by
  /// receive(), then the requests sealed. Before the handshake ends the requests are held back
  /// (the batch then carries only handshake bytes, or nothing). False when the records could
  /// not be sealed (see error()): the connection is unusable.
  bool wrap(std::vector<std::byte>& batch);

  bool established() const noexcept { return _session->established(); }
  std::string error() const { return _seal_error.empty() ? _session->error() : _seal_error; }
  /// "tls_verify" when our verification refused the server's certificate, else "tls_handshake".
  std::string failure_kind() const;
  /// The server refused the handshake because of our certificate (none given, or one it does
  /// not trust): its alert says so.
  bool refused_our_certificate() const;
  /// Whether the first bytes the server sent were TLS records (0x14..0x17, 0x03): false for a
  /// plaintext server answering a ClientHello.
  bool peer_spoke_tls() const noexcept { return _peer_spoke_tls; }

  std::int64_t handshake_started_ns = 0;
  bool handshake_counted = false;  // its duration or failure is recorded once

 private:
  explicit tls_transport(std::unique_ptr<record_session> s) noexcept : _session(std::move(s)) {}

  std::unique_ptr<record_session> _session;
  std::vector<std::byte> _plain;
  std::vector<std::byte> _records;  // handshake messages, alerts: sent with the next batch
  std::vector<std::byte> _held;     // requests issued before the handshake ended
  bool _first_bytes_seen = false;
  bool _peer_spoke_tls = true;
  std::string _seal_error;
};

}  // namespace ringrpc::load

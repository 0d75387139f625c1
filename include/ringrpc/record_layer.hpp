#pragma once
/// \file The record layer seam: what sits between a connection's socket bytes and its frames.
///
/// Plaintext connections have no record layer (bytes are frames). A TLS listener gives each
/// connection a record_session made by the server's record_layer: today userspace OpenSSL over
/// memory buffers (ringrpc/tls.hpp, library ringrpc-tls); a kernel-TLS (SOL_TLS) layer could
/// implement the same interface and hand the socket to the kernel after the handshake.
///
/// The core library only calls these interfaces; it never links a TLS library.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// What a peer proved about itself in the handshake (its verified certificate), empty if it
/// presented none.
struct peer_certificate_identity {
  std::string subject;                 ///< RFC 2253 text, e.g. "CN=client-1,O=example"
  std::vector<std::string> dns_names;  ///< subjectAltName DNS entries
  std::vector<std::string> uris;       ///< subjectAltName URI entries (e.g. SPIFFE ids)
  std::vector<std::string> ips;        ///< subjectAltName IP entries, as text
  bool empty() const noexcept { return subject.empty() && dns_names.empty() && uris.empty() && ips.empty(); }
};

/// One connection's record state. Owned by one thread at a time (the server's shard thread, or
/// a client's loop); no call blocks or does I/O: bytes go in and come out through the vectors.
/// Every function may throw std::bad_alloc (growing a vector); the connection then fails.
class record_session {
 public:
  enum class outcome : unsigned char {
    ok,      ///< go on (the handshake may still be under way: see established())
    closed,  ///< the peer ended the session cleanly (close_notify)
    failed,  ///< protocol error or refused peer: see error(); `out` may hold an alert to send
  };
  virtual ~record_session() = default;

  /// Bytes received from the socket. Appends the plaintext they complete to `plain` and any
  /// bytes that must go to the peer (handshake messages, alerts, tickets) to `out`.
  virtual outcome receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                          std::vector<std::byte>& out) = 0;
  /// Plaintext to send: appends its records to `out`. Only once established().
  virtual outcome seal(std::span<const std::byte> plain, std::vector<std::byte>& out) = 0;
  /// A client's first flight (ClientHello) into `out`; a server's session needs no start.
  virtual outcome start(std::vector<std::byte>& out) = 0;
  /// The handshake is complete: application data flows.
  virtual bool established() const noexcept = 0;
  /// Why the session failed ("" if it did not).
  virtual std::string error() const = 0;
  /// The session failed because the peer's certificate did not verify (an unknown CA, expired,
  /// another name), not for any other reason; always false where nothing is verified.
  virtual bool peer_unverified() const noexcept { return false; }
  /// Part of a record from the peer is held and the rest has not come (the server's
  /// frame-stall timeout applies to it as to part of a frame). False if the layer cannot tell.
  virtual bool holds_partial_record() const noexcept { return false; }
  /// The peer's verified certificate (after the handshake).
  virtual peer_certificate_identity peer_identity() const = 0;
  /// "TLSv1.3 TLS_AES_256_GCM_SHA384", for logs and /connections.
  virtual std::string describe() const = 0;
  /// An orderly end of our side (the server stopping, an idle connection closed): appends the
  /// close_notify alert to `out`, so the peer can tell the end from a truncation. Only once
  /// established(); a record layer without one appends nothing.
  virtual outcome close_notify(std::vector<std::byte>& out) {
    (void)out;
    return outcome::ok;
  }
  /// The application protocol the handshake agreed on (ALPN: "ringrpc/1", "h2"), or "" if
  /// none was (a peer that offered none, a layer without ALPN). Only once established().
  virtual std::string_view negotiated_protocol() const noexcept { return {}; }
};

/// Makes sessions for one listener (or one client). Thread-safe: new_server_session() is called
/// by every reader thread.
class record_layer {
 public:
  virtual ~record_layer() = default;
  /// What does the record work, for /status and the start-up log ("userspace OpenSSL").
  virtual std::string_view name() const noexcept = 0;
  /// A session for a newly accepted connection, or null if none can be made now.
  virtual std::unique_ptr<record_session> new_server_session() = 0;
  /// The same, but ALPN may also select "h2" when the client does not offer "ringrpc/1": the
  /// server asks for these while it serves gRPC (server_options::grpc), and serves a
  /// connection whose negotiated_protocol() is "h2" as gRPC. Null if this layer makes none
  /// (the server then uses new_server_session(), and gRPC clients cannot use TLS).
  virtual std::unique_ptr<record_session> new_server_session_with_h2() { return nullptr; }
  /// The same for a connection that speaks HTTP/1.1 instead of frames (the admin port, served
  /// with the listener's certificate): ALPN selects "http/1.1" where new_server_session()
  /// selects "ringrpc/1". Null if this layer makes none.
  virtual std::unique_ptr<record_session> new_http_server_session() { return nullptr; }
  /// A session for a connection this side opened to `host` (SNI and the name verified), or
  /// null if this layer makes no client sessions.
  virtual std::unique_ptr<record_session> new_client_session(std::string_view /*host*/) { return nullptr; }
  /// Bytes one session holds while idle and during its handshake, as charged to the server's
  /// memory budget (an estimate: the library allocates them itself).
  virtual std::size_t session_bytes() const noexcept = 0;
};

}  // namespace ringrpc

RINGRPC_API_END

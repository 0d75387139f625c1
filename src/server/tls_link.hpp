#pragma once
// A TLS connection's record state on its shard: the session (record_layer.hpp) and the
// ciphertext waiting to be written. Plaintext connections have none; a TLS one keeps it in its
// rare part, so the connection struct stays the size of a plaintext one.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/tls_write_state.hpp"
#include "grpc/grpc_session.hpp"
#include "ringrpc/record_layer.hpp"
#include "server/memory_budget.hpp"

namespace ringrpc::detail {

/// Owned by the connection (freed with it); used by the shard's thread only (reader and
/// responder run there), so no field is shared. The reader's side adds to `pending` (handshake
/// flights, alerts, tickets); the responder seals replies after it (tls_write_state).
struct tls_link : tls_write_state {
  std::unique_ptr<record_session> session;
  grpc::session* grpc = nullptr;  // gRPC's HTTP/2 session: `session`, or inside it (shard_grpc.cpp)
  bool encrypted = true;           // `session` is TLS (false: gRPC on the plaintext port)
  std::int64_t handshake_started_ns = 0;
  std::size_t charged = 0;  // what this link has charged to the memory budget
  bool handshaking = true;  // holds one of the server's handshake slots while true
  bool handshake_per_address = false;  // ... and one of its address's (peer_limits) while true
  bool announced = false;   // endpoints were told "connected" (so they hear "disconnected")
  bool write_ref = false;   // a write is out and holds a reference on the connection
  bool said_close_notify = false;  // our close_notify went out (shard::say_close_notify)
  bool peer_closed = false;        // the peer's close_notify came: ours answers it once nothing is owed
  bool frames_waiting = false;     // in the shard's list of sessions with frames for it

  /// What the session holds: a TLS session the layer's estimate, a gRPC session what it counts.
  std::size_t session_bytes(const record_layer* tls) const noexcept {
    return (encrypted && tls != nullptr ? tls->session_bytes() : 0) + (grpc != nullptr ? grpc->held_bytes() : 0);
  }

  /// Brings what this link has charged to `a`'s budget up to date (the reader and the
  /// responder each use their own account; both settle with the one server-wide total).
  void recharge(memory_budget::account& a, const record_layer* tls) noexcept {
    const std::size_t now = session_bytes(tls) + pending.capacity() + cipher.capacity();
    a.charge(static_cast<std::int64_t>(now) - static_cast<std::int64_t>(charged));
    charged = now;
  }
};

}  // namespace ringrpc::detail

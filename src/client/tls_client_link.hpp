#pragma once
// A client connection's TLS state: the record session (ringrpc/record_layer.hpp, made by
// ringrpc-tls) and the ciphertext of its writes. Loop thread only.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::detail {

struct tls_client_link {
  std::unique_ptr<record_session> session;
  /// Ciphertext the session produced on its own (handshake, alerts): the next write starts
  /// with it.
  std::vector<std::byte> pending;
  /// The write in flight: `pending`, then the sealed frames at the head of the queue; `sent`
  /// of it written so far (a partial write sends the rest next).
  std::vector<std::byte> cipher;
  std::size_t sent = 0;
  std::size_t sealed = 0;  // queued frame bytes `cipher` carries: written once it is all out
  std::vector<std::byte> plain;  // scratch: a receive's plaintext, or frames to seal together
  bool in_flight = false;
};

struct client_conn;
/// Gives a new connection its TLS session for `host`. Throws std::system_error when `layer`
/// makes no client sessions.
void attach_tls(client_conn& c, record_layer& layer, const std::string& host);

}  // namespace ringrpc::detail

#pragma once
// A client connection's TLS state: the record session (ringrpc/record_layer.hpp, made by
// ringrpc-tls) and the ciphertext of its writes. Loop thread only.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/tls_write_state.hpp"
#include "ringrpc/record_layer.hpp"

namespace ringrpc::detail {

/// The session, and its writes as tls_write_state keeps them (request frames sealed after what
/// the session said on its own).
struct tls_client_link : tls_write_state {
  std::unique_ptr<record_session> session;
  std::vector<std::byte> plain;  // scratch: a receive's plaintext, or frames to seal together
  bool in_flight = false;
};

struct client_conn;
/// Gives a new connection its TLS session for `host`. Throws std::system_error when `layer`
/// makes no client sessions.
void attach_tls(client_conn& c, record_layer& layer, const std::string& host);

}  // namespace ringrpc::detail

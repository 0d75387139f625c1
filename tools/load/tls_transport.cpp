#include "tls_transport.hpp"

#include <cstdint>
#include <new>

namespace ringrpc::load {

std::unique_ptr<tls_transport> tls_transport::open(record_layer& layer, std::string_view host, std::int64_t now_ns) {
  std::unique_ptr<record_session> s = layer.new_client_session(host);
  if (s == nullptr) return nullptr;
  std::unique_ptr<tls_transport> t(new tls_transport(std::move(s)));
  t->handshake_started_ns = now_ns;
  if (t->_session->start(t->_records) == record_session::outcome::failed) return nullptr;
  return t;
}

tls_transport::result tls_transport::receive(std::span<const std::byte> in) {
  _plain.clear();
  if (!_first_bytes_seen && !in.empty()) {
    _first_bytes_seen = true;
    const auto type = static_cast<std::uint8_t>(in[0]);
    // A TLS record starts with its content type (20..23) and the major version 3.
    _peer_spoke_tls = type >= 0x14 && type <= 0x17 && (in.size() < 2 || static_cast<std::uint8_t>(in[1]) == 0x03);
  }
  switch (_session->receive(in, _plain, _records)) {
    case record_session::outcome::ok: return result::ok;
    case record_session::outcome::closed: return result::closed;
    case record_session::outcome::failed: break;
  }
  return result::failed;
}

bool tls_transport::wrap(std::vector<std::byte>& batch) {
  if (batch.empty() && _records.empty() && (_held.empty() || !_session->established())) return true;
  if (!_session->established() || !_held.empty()) {
    _held.insert(_held.end(), batch.begin(), batch.end());
    batch.clear();
  }
  batch.swap(_records);  // handshake bytes first; the requests (if not held) after them
  record_session::outcome sealed = record_session::outcome::ok;
  try {
    if (_session->established()) {
      if (!_held.empty()) {
        sealed = _session->seal(_held, batch);
        _held.clear();
      } else if (!_records.empty()) {
        sealed = _session->seal(_records, batch);
      }
    }
  } catch (const std::bad_alloc&) {
    _seal_error = "out of memory sealing TLS records";
    sealed = record_session::outcome::failed;
  }
  _records.clear();
  if (sealed != record_session::outcome::failed) return true;
  if (_seal_error.empty()) _seal_error = "sealing TLS records failed: " + _session->error();
  batch.clear();  // a batch missing records would desynchronise the stream
  return false;
}

std::string tls_transport::failure_kind() const {
  // Not the error text: the server's "certificate required" alert names a certificate too, and
  // is not our verification failing.
  return _session->peer_unverified() ? "tls_verify" : "tls_handshake";
}

bool tls_transport::refused_our_certificate() const {
  // The alerts a server sends about the client's certificate (RFC 8446 6.2), as OpenSSL names
  // them in the error text: "tlsv13 alert certificate required", "alert unknown ca", ...
  const std::string why = _session->error();
  for (const char* alert : {"alert certificate required", "alert unknown ca", "alert bad certificate",
                            "alert certificate unknown"}) {
    if (why.find(alert) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ringrpc::load

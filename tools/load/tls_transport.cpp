#include "tls_transport.hpp"

#include <cstdint>

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

void tls_transport::wrap(std::vector<std::byte>& batch) {
  if (batch.empty() && _records.empty() && (_held.empty() || !_session->established())) return;
  if (!_session->established() || !_held.empty()) {
    _held.insert(_held.end(), batch.begin(), batch.end());
    batch.clear();
  }
  batch.swap(_records);  // handshake bytes first; the requests (if not held) after them
  if (_session->established()) {
    if (!_held.empty()) {
      _session->seal(_held, batch);
      _held.clear();
    } else if (!_records.empty()) {
      _session->seal(_records, batch);
    }
  }
  _records.clear();
}

std::string tls_transport::failure_kind() const {
  const std::string why = _session->error();
  return why.find("certificate") != std::string::npos ? "tls_verify" : "tls_handshake";
}

}  // namespace ringrpc::load

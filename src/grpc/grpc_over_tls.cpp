#include "grpc/grpc_over_tls.hpp"

namespace ringrpc::detail::grpc {

namespace {

// Keeps a buffer a burst grew from pinning its memory.
void trim(std::vector<std::byte>& v) noexcept {
  v.clear();
  if (v.capacity() > 256 * 1024) std::vector<std::byte>().swap(v);
}

}  // namespace

record_session::outcome over_tls::take_plaintext(std::span<const std::byte> plain, std::vector<std::byte>& frames,
                                                 std::vector<std::byte>& out) {
  _said.clear();
  const outcome inner = _inner->receive(plain, frames, _said);
  // What the gRPC session said goes out even when it failed: its GOAWAY says why.
  const outcome sealed = _said.empty() ? outcome::ok : _tls->seal(_said, out);
  trim(_said);
  if (inner != outcome::ok) return inner;
  return sealed;
}

record_session::outcome over_tls::receive(std::span<const std::byte> in, std::vector<std::byte>& frames,
                                          std::vector<std::byte>& out) {
  _plain.clear();
  const outcome r = _tls->receive(in, _plain, out);
  if (r == outcome::failed) return r;
  const outcome inner = _plain.empty() ? outcome::ok : take_plaintext(_plain, frames, out);
  trim(_plain);
  if (inner != outcome::ok) return inner;
  return r;  // `closed`: the peer's close_notify
}

record_session::outcome over_tls::seal(std::span<const std::byte> frames, std::vector<std::byte>& out) {
  _said.clear();
  const outcome inner = _inner->seal(frames, _said);
  const outcome sealed = _said.empty() ? outcome::ok : _tls->seal(_said, out);
  trim(_said);
  if (inner != outcome::ok) return inner;
  return sealed;
}

record_session::outcome over_tls::close_notify(std::vector<std::byte>& out) {
  _said.clear();
  if (_inner->close_notify(_said) == outcome::ok && !_said.empty()) (void)_tls->seal(_said, out);
  trim(_said);
  return _tls->close_notify(out);
}

std::string over_tls::error() const {
  std::string e = _inner->error();
  return e.empty() ? _tls->error() : e;
}

}  // namespace ringrpc::detail::grpc

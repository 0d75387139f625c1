// A TLS server session fed whatever a peer sends instead of (or after the start of) a
// handshake (src/tls/openssl_session.cpp): it must fail cleanly, never read past what it was
// given or hand out plaintext from an unfinished handshake. The input is cut into up to three
// receives, as a socket's reads would cut it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/tls.hpp"

namespace {

std::shared_ptr<ringrpc::tls_context> context() {
  static std::shared_ptr<ringrpc::tls_context> ctx = [] {
    // A throw-away certificate for this run (no private key lives in the repository).
    char tmpl[] = "/tmp/ringrpc-tls-fuzz.XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    const std::string cmd = "cd " + dir +
                            " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
                            " -keyout k.pem -out c.pem -days 2 -subj /CN=fuzz >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) std::abort();
    ringrpc::tls_options o;
    o.cert_file = dir + "/c.pem";
    o.key_file = dir + "/k.pem";
    auto c = ringrpc::tls_context::server(o);
    std::system(("rm -rf " + dir).c_str());
    return c;
  }();
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto session = context()->new_server_session();
  std::vector<std::byte> plain, out;
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const std::size_t cuts[] = {size / 3, size - size / 3, size};
  std::size_t at = 0;
  for (const std::size_t end : cuts) {
    if (end <= at) continue;
    const auto r = session->receive({p + at, end - at}, plain, out);
    at = end;
    if (r == ringrpc::record_session::outcome::failed) break;
  }
  // Nobody completes a handshake without the server's key: no plaintext may appear.
  if (!session->established() && !plain.empty()) std::abort();
  return 0;
}

// Certificates from peers (src/tls/identity.cpp): a client's or a server's DER certificate is
// parsed for its subject and alternative names, the identity an authorizer decides on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ringrpc/tls.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto id = ringrpc::identity_of_der_certificate(
      std::string_view(reinterpret_cast<const char*>(data), size));
  // Names are bytes from the certificate: looked at, so a bad length would be caught here.
  std::size_t total = id.subject.size();
  for (const auto& v : {&id.dns_names, &id.uris, &id.ips}) {
    for (const auto& s : *v) total += s.size();
  }
  return total > size * 8 + 1024 ? 1 : 0;  // names cannot be much longer than their input
}

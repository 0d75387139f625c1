#pragma once
// Certificates for the TLS tests, made by the openssl CLI into a temporary directory once per
// test program (no private key is committed): a CA, a server certificate for localhost and
// 127.0.0.1, a client certificate with URI, DNS and IP names, and one from another CA.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "ringrpc/tls.hpp"

namespace ringrpc::test {

class certs {
 public:
  certs() {
    char tmpl[] = "/tmp/ringrpc-tls-unit.XXXXXX";
    dir = ::mkdtemp(tmpl);
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=unit-ca");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other.key -out other.pem -days 2 -subj /CN=other-ca");
    sign("server", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1");
    sign("client", "ca", "/CN=client-1", "URI:spiffe://unit/client-1,DNS:client-1.unit,IP:10.0.0.7");
    sign("stranger", "other", "/CN=stranger", "DNS:stranger.unit");
  }
  ~certs() { std::filesystem::remove_all(dir); }
  std::string operator()(const char* name) const { return dir + "/" + name; }
  std::string dir;

 private:
  void run(const std::string& cmd) const {
    const std::string full = "cd " + dir + " && " + cmd + " >/dev/null 2>&1";
    if (std::system(full.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  void sign(const char* name, const char* ca, const char* subj, const char* san) const {
    const std::string n = name;
    std::ofstream(dir + "/" + n + ".ext") << "subjectAltName=" << san << "\n";
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + n + ".key -out " + n +
        ".csr -subj " + subj);
    run("openssl x509 -req -in " + n + ".csr -CA " + ca + ".pem -CAkey " + ca + ".key -CAcreateserial -out " + n +
        ".pem -days 2 -extfile " + n + ".ext");
  }
};

inline const certs& files() {
  static const certs c;
  return c;
}

/// The server side of these certificates; `mutual` also asks every client for one signed by
/// the test CA.
inline tls_options server_tls(bool mutual) {
  tls_options t;
  t.cert_file = files()("server.pem");
  t.key_file = files()("server.key");
  if (mutual) {
    t.ca_file = files()("ca.pem");
    t.require_client_cert = true;
  }
  return t;
}


}  // namespace ringrpc::test

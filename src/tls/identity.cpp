// What a certificate says about its holder: the subject and the subjectAltName entries a
// policy can match (DNS names, URIs such as SPIFFE ids, IP addresses).
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <memory>

#include "ringrpc/tls.hpp"
#include "tls/openssl_session.hpp"

namespace ringrpc {
namespace tls_detail {

namespace {

std::string text_of(const ASN1_STRING* s) {
  if (s == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<std::size_t>(ASN1_STRING_length(s)));
}

std::string ip_text(const ASN1_OCTET_STRING* s) {
  char buf[INET6_ADDRSTRLEN] = {};
  const int len = ASN1_STRING_length(s);
  if (len == 4 && inet_ntop(AF_INET, ASN1_STRING_get0_data(s), buf, sizeof(buf))) return buf;
  if (len == 16 && inet_ntop(AF_INET6, ASN1_STRING_get0_data(s), buf, sizeof(buf))) return buf;
  return {};  // malformed: not an address, not an identity
}

std::string subject_of(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  if (b == nullptr) throw std::bad_alloc();
  std::string out;
  if (X509_NAME_print_ex(b, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    if (n > 0) out.assign(data, static_cast<std::size_t>(n));
  }
  BIO_free(b);
  return out;
}

}  // namespace

peer_certificate_identity identity_of(X509* cert) {
  peer_certificate_identity id;
  id.subject = subject_of(cert);
  using names_ptr = std::unique_ptr<GENERAL_NAMES, decltype([](GENERAL_NAMES* n) { GENERAL_NAMES_free(n); })>;
  names_ptr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (names) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
      switch (g->type) {
        case GEN_DNS: id.dns_names.push_back(text_of(g->d.dNSName)); break;
        case GEN_URI: id.uris.push_back(text_of(g->d.uniformResourceIdentifier)); break;
        case GEN_IPADD:
          if (auto t = ip_text(g->d.iPAddress); !t.empty()) id.ips.push_back(std::move(t));
          break;
        default: break;
      }
    }
  }
  ERR_clear_error();
  return id;
}

}  // namespace tls_detail

peer_certificate_identity identity_of_der_certificate(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509* cert = d2i_X509(nullptr, &p, static_cast<long>(der.size()));
  if (cert == nullptr) {
    ERR_clear_error();
    return {};
  }
  peer_certificate_identity id;
  try {
    id = tls_detail::identity_of(cert);
  } catch (...) {
    X509_free(cert);
    throw;
  }
  X509_free(cert);
  return id;
}

}  // namespace ringrpc

// Certificates and policy of one side: loaded and checked up front so a bad file is a clear
// start-up error, swapped whole on reload so handshakes in progress keep a consistent set.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "ringrpc/tls.hpp"
#include "tls/openssl_session.hpp"

namespace ringrpc {

namespace {

// ALPN's wire form: each protocol name prefixed by its length (names of 1..255 bytes).
std::vector<unsigned char> alpn_wire(const std::vector<std::string>& names) {
  std::vector<unsigned char> wire;
  for (const std::string& n : names) {
    if (n.empty() || n.size() > 255) throw tls_error("TLS: ALPN protocol names take 1..255 bytes");
    wire.push_back(static_cast<unsigned char>(n.size()));
    wire.insert(wire.end(), n.begin(), n.end());
  }
  return wire;
}

using ctx_ptr = std::shared_ptr<SSL_CTX>;

[[noreturn]] void fail(const std::string& what) {
  const std::string why = tls_detail::take_openssl_errors();
  throw tls_error(why.empty() ? what : what + " (" + why + ")");
}

// ENOENT and EACCES said plainly before OpenSSL's own wording.
void check_readable(const std::string& path, const char* what) {
  if (path.empty()) throw tls_error(std::string("TLS: no ") + what + " file given");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw tls_error(std::string("TLS: cannot read the ") + what + " file " + path + ": " + std::strerror(errno));
  }
  std::fclose(f);
}

std::string time_text(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "?";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void check_validity(X509* cert, const std::string& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    throw tls_error("TLS: the certificate in " + path + " expired on " + time_text(X509_get0_notAfter(cert)));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    throw tls_error("TLS: the certificate in " + path + " is not valid before " +
                    time_text(X509_get0_notBefore(cert)));
  }
}

int version_of(const std::string& v) {
  if (v == "1.2" || v.empty()) return TLS1_2_VERSION;
  if (v == "1.3") return TLS1_3_VERSION;
  throw tls_error("TLS: min_version must be \"1.2\" or \"1.3\", not \"" + v + "\"");
}

// A session's SSL app data, when set, names what it speaks besides (or instead of) ringrpc/1:
// the admin port's HTTP sessions, and the RPC port's sessions while gRPC is served. It points
// at one of these constants, never at anything to free.
constexpr std::string_view http_alpn = "http/1.1";
constexpr std::string_view h2_alpn = "h2";

// The protocol `wanted` if the client's ALPN list (wire form) offers it.
bool offered(const unsigned char* in, unsigned inlen, std::string_view wanted, const unsigned char** out,
             unsigned char* outlen) {
  for (unsigned i = 0; i < inlen;) {
    const unsigned len = in[i];
    if (i + 1 + len > inlen) break;
    if (std::string_view(reinterpret_cast<const char*>(in + i + 1), len) == wanted) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return true;
    }
    i += 1 + len;
  }
  return false;
}

// Server side of ALPN: ringrpc/1 (http/1.1 for an HTTP session) when offered, else h2 where
// gRPC is served; a client that offers only other protocols speaks something else and is
// refused; one that offers none is served frames (ALPN is optional).
int select_alpn(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned inlen, void*) {
  const auto* also = static_cast<const char*>(SSL_get_app_data(ssl));
  if (also == http_alpn.data()) {
    return offered(in, inlen, http_alpn, out, outlen) ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  if (offered(in, inlen, tls_alpn, out, outlen)) return SSL_TLSEXT_ERR_OK;
  if (also == h2_alpn.data() && offered(in, inlen, h2_alpn, out, outlen)) return SSL_TLSEXT_ERR_OK;
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void load_identity(SSL_CTX* ctx, const std::string& cert_file, const std::string& key_file) {
  check_readable(cert_file, "certificate");
  check_readable(key_file, "private key");
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    fail("TLS: " + cert_file + " holds no usable PEM certificate");
  }
  check_validity(SSL_CTX_get0_certificate(ctx), cert_file);
  // Parsed apart from installing it: "not a key" and "another certificate's key" differ.
  BIO* in = BIO_new_file(key_file.c_str(), "r");
  EVP_PKEY* key = in != nullptr ? PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(in);
  if (key == nullptr) fail("TLS: " + key_file + " holds no usable PEM private key");
  const int used = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    throw tls_error("TLS: the private key in " + key_file + " does not match the certificate in " + cert_file);
  }
}

ctx_ptr make_server_ctx(const tls_options& o) {
  ctx_ptr ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) throw std::bad_alloc();
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, version_of(o.min_version));
  // Buffers are freed while a connection is idle: an idle TLS connection stays small.
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION);
  if (!o.ciphers.empty() && SSL_CTX_set_cipher_list(c, o.ciphers.c_str()) != 1) {
    fail("TLS: no usable cipher in \"" + o.ciphers + "\"");
  }
  if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(c, o.ciphersuites.c_str()) != 1) {
    fail("TLS: no usable TLS 1.3 suite in \"" + o.ciphersuites + "\"");
  }
  load_identity(c, o.cert_file, o.key_file);
  if (!o.ca_file.empty()) {
    check_readable(o.ca_file, "CA");
    if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1) {
      fail("TLS: " + o.ca_file + " holds no usable PEM CA certificate");
    }
    // Tell clients which CAs we accept, so one with several certificates picks the right one.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(c, names);
    }
  } else if (o.require_client_cert) {
    throw tls_error("TLS: require_client_cert needs a CA file (ca) to verify client certificates with");
  }
  if (o.require_client_cert) {
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else if (!o.ca_file.empty()) {
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);  // a certificate, if sent, must verify
  }
  SSL_CTX_set_alpn_select_cb(c, select_alpn, nullptr);
  ERR_clear_error();
  return ctx;
}

ctx_ptr make_client_ctx(const tls_client_options& o) {
  ctx_ptr ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) throw std::bad_alloc();
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, version_of(o.min_version));
  if (!o.keep_record_buffers) SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
  if (!o.cert_file.empty() || !o.key_file.empty()) load_identity(c, o.cert_file, o.key_file);
  if (!o.insecure) {
    if (!o.ca_file.empty()) {
      check_readable(o.ca_file, "CA");
      if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1) {
        fail("TLS: " + o.ca_file + " holds no usable PEM CA certificate");
      }
    } else if (SSL_CTX_set_default_verify_paths(c) != 1) {
      fail("TLS: the system's CA store cannot be loaded");
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  }
  static const unsigned char alpn[] = {9, 'r', 'i', 'n', 'g', 'r', 'p', 'c', '/', '1'};
  if (o.alpn.empty()) {
    SSL_CTX_set_alpn_protos(c, alpn, sizeof(alpn));
  } else {
    const std::vector<unsigned char> wire = alpn_wire(o.alpn);
    SSL_CTX_set_alpn_protos(c, wire.data(), static_cast<unsigned>(wire.size()));
  }
  ERR_clear_error();
  return ctx;
}

}  // namespace

struct tls_context::impl {
  bool is_server = true;
  tls_options server_options;
  tls_client_options client_options;
  mutable std::mutex mu;  // guards `ctx`: taken once per new session, never per record
  ctx_ptr ctx;

  ctx_ptr current() const {
    std::lock_guard lock(mu);
    return ctx;
  }
};

tls_context::tls_context(std::unique_ptr<impl> i) noexcept : _impl(std::move(i)) {}
tls_context::~tls_context() = default;

std::shared_ptr<tls_context> tls_context::server(const tls_options& options) {
  auto i = std::make_unique<impl>();
  i->is_server = true;
  i->server_options = options;
  i->ctx = make_server_ctx(options);
  return std::make_shared<tls_context>(std::move(i));
}

std::shared_ptr<tls_context> tls_context::client(const tls_client_options& options) {
  auto i = std::make_unique<impl>();
  i->is_server = false;
  i->client_options = options;
  i->ctx = make_client_ctx(options);
  return std::make_shared<tls_context>(std::move(i));
}

void tls_context::reload() {
  ctx_ptr next = _impl->is_server ? make_server_ctx(_impl->server_options) : make_client_ctx(_impl->client_options);
  // Sessions made from the old context hold a reference of their own to it (SSL_new).
  std::lock_guard lock(_impl->mu);
  _impl->ctx.swap(next);
}

// A session on the accepting side; its app data tells select_alpn what else it may pick.
std::unique_ptr<record_session> tls_context::accepting_session(speaks what) {
  const ctx_ptr ctx = _impl->current();
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  // Read only for which constant it is.
  if (what == speaks::http) SSL_set_app_data(ssl, const_cast<char*>(http_alpn.data()));
  if (what == speaks::frames_or_h2) SSL_set_app_data(ssl, const_cast<char*>(h2_alpn.data()));
  return std::make_unique<tls_detail::openssl_session>(ssl);
}

std::unique_ptr<record_session> tls_context::new_server_session() { return accepting_session(speaks::frames); }

std::unique_ptr<record_session> tls_context::new_server_session_with_h2() {
  return accepting_session(speaks::frames_or_h2);
}

std::unique_ptr<record_session> tls_context::new_http_server_session() { return accepting_session(speaks::http); }

std::unique_ptr<record_session> tls_context::new_client_session(std::string_view host) {
  const ctx_ptr ctx = _impl->current();
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  const auto& o = _impl->client_options;
  const std::string name = o.server_name.empty() ? std::string(host) : o.server_name;
  auto session = std::make_unique<tls_detail::openssl_session>(ssl);
  unsigned char ip[16];
  const bool is_ip = inet_pton(AF_INET, name.c_str(), ip) == 1 || inet_pton(AF_INET6, name.c_str(), ip) == 1;
  if (!is_ip && !name.empty()) SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI takes names only
  if (!o.insecure && !name.empty()) {
    if (is_ip) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    else SSL_set1_host(ssl, name.c_str());
  }
  return session;
}

std::size_t tls_context::session_bytes() const noexcept {
  // An SSL object with its handshake state and (while in use) its record buffers, measured
  // with OpenSSL 3.0 on x86-64: ~6 KiB idle with released buffers, ~40 KiB mid-handshake.
  return 40 * 1024;
}

std::string tls_context::certificate_summary() const {
  const ctx_ptr ctx = _impl->current();
  X509* cert = SSL_CTX_get0_certificate(ctx.get());
  if (cert == nullptr) return "no certificate";
  const auto id = tls_detail::identity_of(cert);
  return id.subject + " (expires " + time_text(X509_get0_notAfter(cert)) + ")";
}

}  // namespace ringrpc

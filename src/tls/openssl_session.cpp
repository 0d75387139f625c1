// A TLS session whose transport is two memory BIOs: receive() writes the ciphertext the ring
// received into one and reads plaintext out of OpenSSL; seal() writes plaintext into OpenSSL
// and collects the records from the other. The handshake advances inside the same calls.
#include "tls/openssl_session.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace ringrpc::tls_detail {

namespace {

// SSL_read's unit: one TLS record's plaintext at most.
constexpr std::size_t read_chunk = 16 * 1024;
// The least a read asks for, so a record split across receives is not taken a byte at a time.
constexpr std::size_t min_read = 512;

}  // namespace

std::string take_openssl_errors() {
  std::string out;
  char buf[256];
  while (const unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

openssl_session::openssl_session(SSL* ssl) : _ssl(ssl) {
  _in = BIO_new(BIO_s_mem());
  _out = BIO_new(BIO_s_mem());
  if (_in == nullptr || _out == nullptr) {
    BIO_free(_in);
    BIO_free(_out);
    SSL_free(_ssl);
    throw std::bad_alloc();
  }
  // An empty memory BIO reports "retry", so OpenSSL says WANT_READ instead of EOF.
  BIO_set_mem_eof_return(_in, -1);
  BIO_set_mem_eof_return(_out, -1);
  SSL_set_bio(_ssl, _in, _out);  // the SSL owns both from here
}

openssl_session::~openssl_session() { SSL_free(_ssl); }

void openssl_session::drain(std::vector<std::byte>& out) {
  const std::size_t pending = BIO_ctrl_pending(_out);
  if (pending == 0) return;
  const std::size_t at = out.size();
  out.resize(at + pending);  // may throw: the session is then failed by the caller
  const int n = BIO_read(_out, out.data() + at, static_cast<int>(pending));
  out.resize(at + (n > 0 ? static_cast<std::size_t>(n) : 0));
  _said_anything = _said_anything || n > 0;
}

bool openssl_session::holds_partial_record() const noexcept {
  // OpenSSL reads a record's header, then its body, into its read buffer as the bytes come;
  // what it holds of an unfinished record counts as pending (so does ciphertext not yet read
  // out of the BIO, which receive() never leaves behind).
  return _error.empty() && (BIO_ctrl_pending(_in) > 0 || SSL_has_pending(_ssl) == 1);
}

record_session::outcome openssl_session::fail(int ssl_error, const char* during) {
  std::string why = take_openssl_errors();
  if (why.empty()) {
    why = ssl_error == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "SSL error " + std::to_string(ssl_error);
  }
  const long verify = SSL_get_verify_result(_ssl);
  if (verify != X509_V_OK) {
    why.append(" (certificate: ").append(X509_verify_cert_error_string(verify)).append(")");
  }
  if (_error.empty()) _error = std::string("TLS ").append(during).append(" failed: ").append(why);
  return outcome::failed;
}

bool openssl_session::peer_unverified() const noexcept {
  // With verification off (--insecure) OpenSSL still records a verify result, which must not
  // be blamed for a failure it did not cause.
  return !_error.empty() && (SSL_get_verify_mode(_ssl) & SSL_VERIFY_PEER) != 0 &&
         SSL_get_verify_result(_ssl) != X509_V_OK;
}

record_session::outcome openssl_session::handshake(std::vector<std::byte>& out) {
  const int rc = SSL_do_handshake(_ssl);
  drain(out);  // the next flight, or the alert that explains a failure
  if (rc == 1) {
    _established = true;
    return outcome::ok;
  }
  const int err = SSL_get_error(_ssl, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return outcome::ok;
  if (!_said_anything && SSL_is_server(_ssl) == 1) {
    // The peer's first bytes were not a handshake we could answer, and OpenSSL sends no alert
    // to bytes that do not look like TLS at all (plaintext, an HTTP request). A client on the
    // wrong port learns more from the first bytes of a TLS record than from a bare FIN, which
    // a crash or a full server also produce: a fatal unexpected_message alert (RFC 8446 5.1,
    // what OpenSSL sends to a record it did not expect).
    constexpr unsigned char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a};
    const auto* b = reinterpret_cast<const std::byte*>(alert);
    out.insert(out.end(), b, b + sizeof(alert));
    _said_anything = true;
  }
  return fail(err, "handshake");
}

record_session::outcome openssl_session::start(std::vector<std::byte>& out) { return handshake(out); }

record_session::outcome openssl_session::receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                                                 std::vector<std::byte>& out) {
  if (!_error.empty()) return outcome::failed;
  // A memory BIO copies: the caller's buffer (a provided ring buffer) can go back at once.
  while (!in.empty()) {
    const int n = BIO_write(_in, in.data(), static_cast<int>(std::min<std::size_t>(in.size(), 1u << 30)));
    if (n <= 0) throw std::bad_alloc();
    in = in.subspan(static_cast<std::size_t>(n));
  }
  if (!_established) {
    if (handshake(out) == outcome::failed) return outcome::failed;
    if (!_established) return outcome::ok;
  }
  for (;;) {
    // Plaintext never outnumbers the ciphertext it came from, so what is decrypted but unread
    // plus what waits in the BIO bounds what this read can return. Growing `plain` by that,
    // not by a whole record, spares zero-filling 16 KiB per reply; and with nothing left
    // (no partial record inside OpenSSL either) the read that would only say WANT_READ is
    // skipped. A record whose start OpenSSL already holds may yield more than the bound:
    // the rest is then pending and the loop comes back for it.
    const std::size_t avail = static_cast<std::size_t>(SSL_pending(_ssl)) + BIO_ctrl_pending(_in);
    if (avail == 0 && SSL_has_pending(_ssl) == 0) {
      drain(out);
      return outcome::ok;
    }
    const std::size_t want = std::clamp<std::size_t>(avail, min_read, read_chunk);
    const std::size_t at = plain.size();
    plain.resize(at + want);
    std::size_t got = 0;
    const int rc = SSL_read_ex(_ssl, plain.data() + at, want, &got);
    plain.resize(at + got);
    if (rc == 1) continue;
    const int err = SSL_get_error(_ssl, rc);
    drain(out);  // post-handshake messages: tickets, key updates
    if (err == SSL_ERROR_WANT_READ) return outcome::ok;
    if (err == SSL_ERROR_ZERO_RETURN) return outcome::closed;
    return fail(err, "receive");
  }
}

record_session::outcome openssl_session::close_notify(std::vector<std::byte>& out) {
  if (!_error.empty() || !_established) return outcome::failed;
  // One call: it writes our close_notify into the memory BIO and returns 0 (the peer's has not
  // come) or 1 (it had); we do not wait for the peer's, the socket is closed after this.
  if (SSL_shutdown(_ssl) < 0) {
    ERR_clear_error();
    return outcome::failed;
  }
  drain(out);
  return outcome::ok;
}

record_session::outcome openssl_session::seal(std::span<const std::byte> plain, std::vector<std::byte>& out) {
  if (!_error.empty()) return outcome::failed;
  while (!plain.empty()) {
    std::size_t written = 0;
    // Into a memory BIO, which grows: a write never waits for the socket.
    if (SSL_write_ex(_ssl, plain.data(), plain.size(), &written) != 1) {
      const int err = SSL_get_error(_ssl, 0);
      drain(out);
      return fail(err, "send");
    }
    plain = plain.subspan(written);
  }
  drain(out);
  return outcome::ok;
}

peer_certificate_identity openssl_session::peer_identity() const {
  X509* cert = SSL_get0_peer_certificate(_ssl);
  if (cert == nullptr || SSL_get_verify_result(_ssl) != X509_V_OK) return {};
  return identity_of(cert);
}

std::string openssl_session::describe() const {
  std::string s = SSL_get_version(_ssl);
  if (const SSL_CIPHER* c = SSL_get_current_cipher(_ssl)) s.append(" ").append(SSL_CIPHER_get_name(c));
  return s;
}

std::string_view openssl_session::negotiated_protocol() const noexcept {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(_ssl, &p, &len);
  return p != nullptr ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
}

}  // namespace ringrpc::tls_detail

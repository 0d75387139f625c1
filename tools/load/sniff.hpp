#pragma once
// What a server speaks when its first reply does not parse as the URL's protocol: one line a
// person can act on ("this looks like an HTTP/1.1 server; try http://...").

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "peer_sniff.hpp"
#include "protocol.hpp"

namespace ringrpc::load {

/// tools/common/peer_sniff.hpp, shared with ringrpc-call.
using tools::sniff_protocol;

/// One line for a first reply that did not parse as `t`'s protocol: what it looks like, the
/// URL to try, or else the codec's complaint and the first bytes, escaped.
std::string diagnose_reply(const target& t, std::span<const std::byte> front, std::string_view codec_error);

/// One line for a server that sent nothing at all within `seconds` on any connection.
std::string diagnose_silence(const target& t, double seconds, unsigned connections);

/// One line for a server that closed a connection before answering any request of the run.
std::string diagnose_close(const target& t);

/// HOST:PORT as a URL authority: IPv6 literals in brackets.
std::string authority_of(const target& t);

/// The scheme that speaks `scheme` over TLS ("http" -> "https", "h2c" -> "h2", ...).
std::string tls_scheme_of(std::string_view scheme);
/// `t` as the URL of its protocol over TLS: what to try when a plaintext URL meets a TLS port.
std::string tls_url_of(const target& t);
/// One line for a TLS target whose server answered the ClientHello with plaintext.
std::string diagnose_plaintext_reply(const target& t);
/// One line for a plaintext target whose server answered that the port expects TLS (nginx's
/// HTTP 400 "The plain HTTP request was sent to HTTPS port").
std::string diagnose_tls_port(const target& t);

}  // namespace ringrpc::load

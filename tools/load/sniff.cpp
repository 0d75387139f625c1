#include "sniff.hpp"

#include <cstdint>
#include <cstdio>

#include "peer_sniff.hpp"

namespace ringrpc::load {

namespace {

// What ringrpc-load knows of each scheme it speaks: its protocol's name in a diagnosis, and the
// scheme of the same protocol over TLS.
struct scheme_facts {
  std::string_view scheme, protocol, tls_scheme;
};
constexpr scheme_facts known_schemes[] = {
    {"http", "HTTP/1.1", "https"},
    {"redis", "Redis (RESP)", "rediss"},
    {"ringrpc", "ringrpc", "ringrpcs"},
    {"echo", "echo", "echo"},
    {"h2c", "HTTP/2 (h2c)", "h2"},
    {"grpc", "gRPC (HTTP/2)", "grpcs"},
};

const scheme_facts* facts_of(std::string_view scheme) {
  for (const scheme_facts& f : known_schemes) {
    if (f.scheme == scheme) return &f;
  }
  return nullptr;
}

std::string protocol_name(std::string_view scheme) {
  const scheme_facts* f = facts_of(scheme);
  return std::string(f != nullptr ? f->protocol : scheme);
}

}  // namespace

std::string tls_scheme_of(std::string_view scheme) {
  const scheme_facts* f = facts_of(scheme);
  return std::string(f != nullptr ? f->tls_scheme : scheme);
}

std::string tls_url_of(const target& t) {
  std::string url = tls_scheme_of(t.scheme);
  url.append("://").append(authority_of(t));
  if (t.scheme == "ringrpc") {
    url.append(1, '/').append(t.path.empty() ? std::string("METHOD") : t.path);
  } else if (t.scheme != "redis" && t.scheme != "echo") {
    url.append(t.path.empty() ? std::string("/") : t.path);
  }
  return url;
}

std::string diagnose_plaintext_reply(const target& t) {
  std::string plain = t.scheme;
  plain.append("://").append(authority_of(t));
  return "the server at " + authority_of(t) + " answered the TLS handshake in plaintext: it does not speak TLS " +
         "on this port; try " + plain + (t.scheme == "ringrpc" ? "/METHOD" : (t.scheme == "redis" ? "" : "/"));
}

std::string diagnose_tls_port(const target& t) {
  return "the first reply from " + authority_of(t) + " says the plain HTTP request was sent to an HTTPS port: " +
         "this looks like a TLS server; try " + tls_url_of(t);
}

std::string authority_of(const target& t) {
  std::string out;
  if (t.host.find(':') != std::string::npos) {
    out.append(1, '[').append(t.host).append(1, ']');
  } else {
    out = t.host;
  }
  out.append(1, ':').append(std::to_string(t.port));
  return out;
}

std::string diagnose_reply(const target& t, std::span<const std::byte> front, std::string_view codec_error) {
  const std::string where = authority_of(t);
  std::string line = "the first reply from " + where + " is not " + protocol_name(t.scheme);
  const std::string_view looks = sniff_protocol(front);
  const bool speaks_h2 = t.scheme == "h2c" || t.scheme == "grpc";
  if (!looks.empty() && looks != t.scheme && !(looks == "h2" && speaks_h2)) {
    line.append(": this looks like ").append(tools::server_kind(looks));
    if (looks == "http") {
      line += "; try http://" + where + "/";
    } else if (looks == "redis") {
      line += "; try redis://" + where;
    } else if (looks == "ringrpc") {
      line += "; try ringrpc://" + where + "/METHOD";
    } else if (looks == "h2") {
      line += "; try h2c://" + where + "/ or grpc://" + where + "/package.Service/Method";
    } else if (looks == "tls") {
      line += "; try " + tls_url_of(t);
    }
    return line;
  }
  // The parser's complaint may quote the server's bytes: escaped too, so the line stays one line.
  if (!codec_error.empty()) {
    const auto* p = reinterpret_cast<const std::byte*>(codec_error.data());
    line.append(" (").append(tools::escape_bytes({p, codec_error.size()}, 200)).append(")");
  }
  line += "; it starts with \"" + tools::escape_bytes(front, 32) + "\"";
  return line;
}

std::string diagnose_close(const target& t) {
  std::string line = authority_of(t) + " closed the connection without answering the first request: it does not " +
                     "seem to speak " + protocol_name(t.scheme);
  // A TLS port hangs up on plaintext without a byte (redis does): say what to try.
  if (!t.tls && tls_scheme_of(t.scheme) != t.scheme) line += " (if it expects TLS, try " + tls_url_of(t) + ")";
  return line;
}

std::string diagnose_silence(const target& t, double seconds, unsigned connections) {
  char head[160];
  std::snprintf(head, sizeof head, "no byte came back in %.0f s on any of %u connection(s) to ", seconds,
                connections);
  std::string line = head;
  line += authority_of(t) + ": it does not seem to speak " + protocol_name(t.scheme) +
          " (Redis and HTTP servers wait silently for a request they can parse); for calls slower than that, "
          "give --timeout";
  return line;
}

}  // namespace ringrpc::load

#include "sniff.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace ringrpc::load {

namespace {

std::string_view text_of(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::uint8_t at(std::span<const std::byte> b, std::size_t i) { return static_cast<std::uint8_t>(b[i]); }

// A RESP reply: a type byte, then a printable start (an error may quote the bytes it did not
// understand further on, so only the start is checked), ended by CRLF if it is all here.
bool looks_like_resp(std::string_view s) {
  if (s.size() < 3 || std::string_view("+-:$*_").find(s.front()) == std::string_view::npos) return false;
  const auto printable = [](unsigned char c) { return c > 0x20 && c < 0x7f; };
  if (!printable(static_cast<unsigned char>(s[1])) || !printable(static_cast<unsigned char>(s[2]))) return false;
  return s.find("\r\n") != std::string_view::npos || s.size() < 512;
}

// An HTTP/2 frame header (9 bytes) on stream 0 of type SETTINGS or GOAWAY: what a server that
// expects the HTTP/2 preface sends before hanging up on anything else.
bool looks_like_h2(std::span<const std::byte> b) {
  if (b.size() < 9) return false;
  const std::uint32_t length = (std::uint32_t{at(b, 0)} << 16) | (std::uint32_t{at(b, 1)} << 8) | at(b, 2);
  const std::uint8_t type = at(b, 3);
  const bool stream0 = (at(b, 5) & 0x7f) == 0 && at(b, 6) == 0 && at(b, 7) == 0 && at(b, 8) == 0;
  return stream0 && length <= 16384 && (type == 0x04 || type == 0x07);
}

// A ringrpc frame: a little-endian u32 length of a plausible FlatBuffers body whose root offset
// (the body's first u32) points inside it.
bool looks_like_ringrpc(std::span<const std::byte> b) {
  if (b.size() < 8) return false;
  auto u32 = [&](std::size_t i) {
    return std::uint32_t{at(b, i)} | (std::uint32_t{at(b, i + 1)} << 8) | (std::uint32_t{at(b, i + 2)} << 16) |
           (std::uint32_t{at(b, i + 3)} << 24);
  };
  const std::uint32_t length = u32(0);
  const std::uint32_t root = u32(4);
  return length >= 8 && length <= (1u << 20) && root >= 4 && root < length;
}

std::string escaped(std::span<const std::byte> b, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < std::min(b.size(), limit); ++i) {
    const auto c = at(b, i);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

std::string protocol_name(std::string_view scheme) {
  if (scheme == "http") return "HTTP/1.1";
  if (scheme == "redis") return "Redis (RESP)";
  if (scheme == "ringrpc") return "ringrpc";
  if (scheme == "echo") return "echo";
  if (scheme == "h2c") return "HTTP/2 (h2c)";
  if (scheme == "grpc") return "gRPC (HTTP/2)";
  return std::string(scheme);
}

}  // namespace

std::string tls_scheme_of(std::string_view scheme) {
  if (scheme == "http") return "https";
  if (scheme == "redis") return "rediss";
  if (scheme == "ringrpc") return "ringrpcs";
  if (scheme == "h2c") return "h2";
  if (scheme == "grpc") return "grpcs";
  return std::string(scheme);
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

std::string_view sniff_protocol(std::span<const std::byte> front) noexcept {
  const std::string_view s = text_of(front);
  if (s.starts_with("HTTP/1.")) return "http";
  if (s.starts_with("SSH-")) return "ssh";
  if (front.size() >= 2 && (at(front, 0) == 0x15 || at(front, 0) == 0x16) && at(front, 1) == 0x03) return "tls";
  if (looks_like_h2(front)) return "h2";
  if (looks_like_resp(s)) return "redis";
  if (looks_like_ringrpc(front)) return "ringrpc";
  return "";
}

std::string diagnose_reply(const target& t, std::span<const std::byte> front, std::string_view codec_error) {
  const std::string where = authority_of(t);
  std::string line = "the first reply from " + where + " is not " + protocol_name(t.scheme);
  const std::string_view looks = sniff_protocol(front);
  const bool speaks_h2 = t.scheme == "h2c" || t.scheme == "grpc";
  if (!looks.empty() && looks != t.scheme && !(looks == "h2" && speaks_h2)) {
    line += ": this looks like ";
    if (looks == "http") {
      line += "an HTTP/1.1 server; try http://" + where + "/";
    } else if (looks == "redis") {
      line += "a Redis server; try redis://" + where;
    } else if (looks == "ringrpc") {
      line += "a ringrpc server; try ringrpc://" + where + "/METHOD";
    } else if (looks == "h2") {
      line += "an HTTP/2 server; try h2c://" + where + "/ or grpc://" + where + "/package.Service/Method";
    } else if (looks == "tls") {
      line += "a TLS server; try " + tls_url_of(t);
    } else {
      line += "an SSH server";
    }
    return line;
  }
  // The parser's complaint may quote the server's bytes: escaped too, so the line stays one line.
  if (!codec_error.empty()) {
    const auto* p = reinterpret_cast<const std::byte*>(codec_error.data());
    line.append(" (").append(escaped({p, codec_error.size()}, 200)).append(")");
  }
  line += "; it starts with \"" + escaped(front, 32) + "\"";
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

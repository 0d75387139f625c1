#include "peer_sniff.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace ringrpc::tools {

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

}  // namespace

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

std::string_view server_kind(std::string_view sniffed) noexcept {
  if (sniffed == "http") return "an HTTP/1.1 server";
  if (sniffed == "redis") return "a Redis server";
  if (sniffed == "ringrpc") return "a ringrpc server";
  if (sniffed == "h2") return "an HTTP/2 server";
  if (sniffed == "tls") return "a TLS server";
  if (sniffed == "ssh") return "an SSH server";
  return "";
}

std::string escape_bytes(std::span<const std::byte> b, std::size_t limit) {
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

}  // namespace ringrpc::tools

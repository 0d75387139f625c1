#include "byte_text.hpp"

#include <cstdint>

namespace ringrpc::tools {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";
constexpr char b64_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string to_hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += hex_digits[b >> 4];
    out += hex_digits[b & 0xf];
  }
  return out;
}

std::string from_hex(std::string_view text) {
  std::string out;
  int high = -1;
  for (const char c : text) {
    if (is_space(c)) continue;
    const int v = hex_value(c);
    if (v < 0) throw std::invalid_argument(std::string("--hex: '").append(1, c).append("' is not a hex digit"));
    if (high < 0) {
      high = v;
    } else {
      out += static_cast<char>((high << 4) | v);
      high = -1;
    }
  }
  if (high >= 0) throw std::invalid_argument("--hex: an odd number of hex digits");
  return out;
}

std::string to_base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
                            (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8) |
                            static_cast<unsigned char>(bytes[i + 2]);
    out += b64_digits[(n >> 18) & 63];
    out += b64_digits[(n >> 12) & 63];
    out += b64_digits[(n >> 6) & 63];
    out += b64_digits[n & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += b64_digits[(n >> 18) & 63];
    out += b64_digits[(n >> 12) & 63];
    out += rest == 2 ? b64_digits[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string from_base64(std::string_view text) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t digits = 0;
  bool padding = false;
  for (const char c : text) {
    if (is_space(c)) continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = b64_value(c);
    if (v < 0 || padding) {
      throw std::invalid_argument(std::string("--base64: '").append(1, c).append("' is not base64 here"));
    }
    ++digits;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (digits % 4 == 1) throw std::invalid_argument("--base64: the text is cut short");
  return out;
}

std::string encode(byte_encoding e, std::string_view bytes) {
  switch (e) {
    case byte_encoding::hex: return to_hex(bytes);
    case byte_encoding::base64: return to_base64(bytes);
    case byte_encoding::raw: break;
  }
  return std::string(bytes);
}

std::string decode(byte_encoding e, std::string_view text) {
  switch (e) {
    case byte_encoding::hex: return from_hex(text);
    case byte_encoding::base64: return from_base64(text);
    case byte_encoding::raw: break;
  }
  return std::string(text);
}

}  // namespace ringrpc::tools

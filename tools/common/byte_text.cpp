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

void append_escaped(std::string& out, unsigned char c) {
  if (c == '\r') {
    out += "\\r";
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\t') {
    out += "\\t";
  } else {
    out += "\\x";
    out += hex_digits[c >> 4];
    out += hex_digits[c & 0xf];
  }
}

// The length of the UTF-8 sequence of a printable character starting at s[i], or 0 when there
// is none (a stray byte, a truncated or overlong sequence, a surrogate, a C1 control).
std::size_t printable_utf8(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xc0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xc2 && c <= 0xdf && cont(1)) return c == 0xc2 && b(1) < 0xa0 ? 0 : 2;  // C2 80-9F: C1
  if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
    if ((c == 0xe0 && b(1) < 0xa0) || (c == 0xed && b(1) >= 0xa0)) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
    if ((c == 0xf0 && b(1) < 0x90) || (c == 0xf4 && b(1) >= 0x90)) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

std::string printable(std::string_view text, bool multiline) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7f) || (multiline && (c == '\n' || c == '\t'))) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? printable_utf8(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      append_escaped(out, c);
      ++i;
    }
  }
  return out;
}

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

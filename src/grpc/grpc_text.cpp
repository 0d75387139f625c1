#include "grpc/grpc_text.hpp"

#include <array>

namespace ringrpc::detail::grpc {

void method_of_path(std::string_view path, std::string& method) {
  method.clear();
  if (path.size() < 2 || path[0] != '/') return;
  path.remove_prefix(1);
  const auto slash = path.find('/');
  if (slash == std::string_view::npos) {
    method.assign(path);
    return;
  }
  const std::string_view service = path.substr(0, slash);
  const std::string_view name = path.substr(slash + 1);
  if (service.empty() || name.empty() || name.find('/') != std::string_view::npos) return;
  method.reserve(path.size());
  method.append(service).append(1, '.').append(name);
}

std::optional<std::uint64_t> parse_timeout(std::string_view text) noexcept {
  if (text.size() < 2 || text.size() > 9) return std::nullopt;
  std::uint64_t n = 0;
  for (const char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  // At most 8 digits: 99,999,999 hours in microseconds still fits in 64 bits. A call's timeout
  // of 0 means "none" to the server; a client's zero (or sub-microsecond) timeout means "due
  // now", so it becomes 1 µs.
  std::uint64_t us = 0;
  switch (text.back()) {
    case 'H': us = n * 3'600'000'000ull; break;
    case 'M': us = n * 60'000'000ull; break;
    case 'S': us = n * 1'000'000ull; break;
    case 'm': us = n * 1'000ull; break;
    case 'u': us = n; break;
    case 'n': us = n / 1'000; break;
    default: return std::nullopt;
  }
  return std::max<std::uint64_t>(us, 1);
}

std::string percent_encode(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

namespace {

constexpr char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<signed char, 256> b64_values() {
  std::array<signed char, 256> v{};
  for (auto& x : v) x = -1;
  for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(b64_alphabet[i])] = static_cast<signed char>(i);
  return v;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char ch : bytes) {
    acc = acc << 8 | static_cast<unsigned char>(ch);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(b64_alphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(b64_alphabet[(acc << (6 - bits)) & 63]);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  static constexpr auto values = b64_values();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char ch : text) {
    const int v = values[static_cast<unsigned char>(ch)];
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace ringrpc::detail::grpc

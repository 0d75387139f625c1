#pragma once
// UTF-8 validation for text that leaves the process (log lines, metric labels, JSON): one bad
// byte from a peer must not make a whole page or line unreadable.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringrpc::detail {

/// Length of the valid UTF-8 sequence at s[i], or 0 if there is none (overlong forms,
/// surrogates and code points past U+10FFFF are not valid).
inline std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xe0) == 0xc0) {
    n = 2;
    cp = b0 & 0x1f;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3;
    cp = b0 & 0x0f;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  static constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_length[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/// True when all of `s` is valid UTF-8.
inline bool is_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Appends `s` to `out` so that the text stays valid UTF-8: each valid multi-byte sequence as it
/// is, each byte that starts none as `replacement` (U+FFFD in the output's notation), and each
/// ASCII byte through `ascii(out, c)`, which escapes what the output's format needs.
template <class Ascii>
void append_utf8_escaped(std::string& out, std::string_view s, std::string_view replacement,
                         Ascii ascii) {
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) < 0x80) {
      ascii(out, c);
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += replacement;
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
}

}  // namespace ringrpc::detail

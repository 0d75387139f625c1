#pragma once
// Escapes for quoted text that leaves the process (logfmt and JSON log lines, TOML in config
// diagnostics): the C-style escapes they share, and \xHH or \u00HH for other control bytes.

#include <string>
#include <string_view>

namespace ringrpc::detail {

/// `prefix` then `c` as two lowercase hex digits.
inline void append_hex_byte(std::string& out, std::string_view prefix, unsigned char c) {
  static constexpr char hex[] = "0123456789abcdef";
  out += prefix;
  out += hex[c >> 4];
  out += hex[c & 0xf];
}

/// One byte of a quoted value: \" \\ \n \r \t, any other control byte as `hex_prefix` and two
/// hex digits ("\\x" in logfmt, "\\u00" in JSON and TOML); every other byte as it is.
inline void append_escaped_ascii(std::string& out, char c, std::string_view hex_prefix) {
  const auto u = static_cast<unsigned char>(c);
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (u < 0x20 || u == 0x7f) {
        append_hex_byte(out, hex_prefix, u);
      } else {
        out += c;
      }
  }
}

}  // namespace ringrpc::detail

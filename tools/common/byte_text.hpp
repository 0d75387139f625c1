#pragma once
// Bytes as text for the command line: how ringrpc-call takes and prints the payloads of
// untyped methods (--hex, --base64; raw by default), and what a server sends, safely.

#include <stdexcept>
#include <string>
#include <string_view>

namespace ringrpc::tools {

enum class byte_encoding { raw, hex, base64 };

/// Lowercase hex, two digits a byte.
std::string to_hex(std::string_view bytes);
/// Hex digits of either case; ASCII whitespace between them is skipped (so `xxd -p` output
/// works). Throws std::invalid_argument on anything else or an odd number of digits.
std::string from_hex(std::string_view text);

/// Standard base64 (RFC 4648, section 4) with padding.
std::string to_base64(std::string_view bytes);
/// Standard or URL-safe alphabet, padding optional, whitespace skipped. Throws
/// std::invalid_argument on other characters or an impossible length.
std::string from_base64(std::string_view text);

/// `text` from a peer made safe to print on a terminal: control characters (C0, DEL, and C1
/// as UTF-8 encodes them) and bytes that are not UTF-8 become \r, \n, \t or \xNN, so that
/// an ESC, BEL or CR cannot set the title, clear the screen or overwrite what is shown.
/// Printable UTF-8 passes unchanged; with `multiline`, so do newlines and tabs.
std::string printable(std::string_view text, bool multiline = false);

std::string encode(byte_encoding e, std::string_view bytes);
std::string decode(byte_encoding e, std::string_view text);

}  // namespace ringrpc::tools

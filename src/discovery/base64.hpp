#pragma once
// Base64 (RFC 4648, with padding) for the etcd JSON gateway, which carries keys and values as
// base64 strings. Written here because neither libcurl nor nlohmann-json exposes it, and
// linking libcrypto for two short functions would add a dependency to the library.

#include <optional>
#include <string>
#include <string_view>

namespace ringrpc::discovery::detail {

std::string base64_encode(std::string_view bytes);
/// nullopt for anything but canonical padded base64 (wrong length, stray characters).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace ringrpc::discovery::detail

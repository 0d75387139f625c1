#pragma once
// What protocol a peer speaks, told from the first bytes it sent: how ringrpc-load explains a
// first reply that does not parse, and how ringrpc-call explains a server that is not ringrpc.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ringrpc::tools {

/// The protocol the bytes look like, as a scheme ("http", "redis", "ringrpc", "h2", "tls",
/// "ssh"), or "" when none is recognised. Looks at the first bytes only.
std::string_view sniff_protocol(std::span<const std::byte> front) noexcept;

/// "an HTTP/1.1 server", "a Redis server", "a TLS server", ... for a sniff_protocol() result;
/// "" for "".
std::string_view server_kind(std::string_view sniffed) noexcept;

/// At most `limit` of `bytes` as one line of printable ASCII: \r, \n, \", \\ and \xNN for the
/// rest. For quoting what a peer sent in a message.
std::string escape_bytes(std::span<const std::byte> bytes, std::size_t limit);

}  // namespace ringrpc::tools

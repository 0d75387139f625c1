#pragma once
// The text gRPC puts in HTTP/2 headers, both ways: the method a :path names, grpc-timeout,
// grpc-message's percent-encoding and the base64 of "-bin" metadata (docs/grpc.md, "The
// mapping"). Pure functions: no session, no allocation beyond the strings they return or fill.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ringrpc::detail::grpc {

/// The ringrpc method a :path names, into `method` (its capacity reused: a stream record's
/// string serves call after call): "/Service/Method" is the typed method "Service.Method",
/// "/name" the raw method "name". Empty for anything else (no leading '/', an empty segment,
/// more than two segments): the call is then answered UNIMPLEMENTED. Throws std::bad_alloc.
void method_of_path(std::string_view path, std::string& method);

/// grpc-timeout: 1 to 8 ASCII digits and a unit (H M S m u n), as microseconds (a timeout
/// below 1 µs, zero included, is 1 µs: the call is due at once, not unbounded). nullopt if
/// malformed.
std::optional<std::uint64_t> parse_timeout(std::string_view text) noexcept;

/// grpc-message's encoding: bytes 0x20-0x7E other than '%' pass, the rest become %XX.
std::string percent_encode(std::string_view text);

/// Standard base64 without padding, as gRPC sends "-bin" values.
std::string base64_encode(std::string_view bytes);
/// Standard base64, padded or not (gRPC accepts both). nullopt if it is not base64.
std::optional<std::string> base64_decode(std::string_view text);

/// True for a key whose value gRPC carries in base64.
inline bool binary_key(std::string_view key) noexcept {
  return key.size() > 4 && key.substr(key.size() - 4) == "-bin";
}

}  // namespace ringrpc::detail::grpc

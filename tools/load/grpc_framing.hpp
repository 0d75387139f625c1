#pragma once
// gRPC over HTTP/2, the parts above the HTTP/2 frames: the 5-byte message prefix of a call's
// DATA, and what the trailers (grpc-status) make of a finished call. Pure logic, fed bytes
// from the server: ringrpc-load's grpc:// codec (proto_h2.cpp) and its fuzz target use it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringrpc::load {

/// The request body of a gRPC call: the message after its prefix (uncompressed flag, length).
std::vector<std::byte> grpc_frame_message(std::span<const std::byte> message);
/// Writes the prefix into the first 5 bytes of `body`, for the message that follows them.
void grpc_frame_prefix(std::span<std::byte> body) noexcept;

/// Follows the length-prefixed messages of one call's response body across DATA chunks,
/// counting them without keeping their bytes.
class grpc_message_reader {
 public:
  explicit grpc_message_reader(std::uint64_t max_message_bytes = 4u << 20) noexcept : _max(max_message_bytes) {}

  /// Feeds a chunk of the body; false (and error() says why) once it cannot be gRPC framing.
  bool feed(std::span<const std::byte> chunk) noexcept;
  /// Feeds the front of `chunk` up to the end of the current message, no further: the bytes
  /// taken, with `ended` set when a message ended with them (grpc:// --stream answers one message
  /// per parse). A framing error stops it, as feed() does.
  std::size_t feed_to_message_end(std::span<const std::byte> chunk, bool& ended) noexcept;
  /// Whether the body ended between messages (a cut message is an error).
  bool at_boundary() const noexcept { return _prefix_have == 0 && _left == 0; }
  std::uint64_t messages() const noexcept { return _messages; }
  const char* error() const noexcept { return _error; }
  /// The error is a message larger than the limit (--max-body), not bad framing.
  bool too_large() const noexcept { return _too_large; }
  void reset() noexcept { *this = grpc_message_reader(_max); }

 private:
  std::uint64_t _max;
  std::uint64_t _left = 0;  // bytes of the current message still to come
  std::uint64_t _messages = 0;
  unsigned char _prefix[5] = {};
  unsigned _prefix_have = 0;
  const char* _error = nullptr;
  // A flag, not a comparison of _error with a literal: the same literal may have a different
  // address in another translation unit (it does under AddressSanitizer).
  bool _too_large = false;
};

/// "0".."16" as a gRPC status code; nullopt for anything else.
std::optional<unsigned> parse_grpc_status(std::string_view value) noexcept;

/// The error kind a report shows for a gRPC status: "grpc_not_found", "grpc_unavailable", ...
/// ("grpc_status_N" for codes past the defined ones).
std::string grpc_status_kind(unsigned code);

/// What one finished gRPC call amounts to, from its HTTP status, its grpc-status header or
/// trailer (empty when absent) and its body's framing: "" for success, else the error kind.
std::string grpc_call_outcome(unsigned http_status, std::string_view grpc_status, const grpc_message_reader& body);

}  // namespace ringrpc::load

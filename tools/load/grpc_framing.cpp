#include "grpc_framing.hpp"

#include <algorithm>
#include <array>
#include <charconv>

namespace ringrpc::load {

std::vector<std::byte> grpc_frame_message(std::span<const std::byte> message) {
  std::vector<std::byte> out(5 + message.size());
  std::copy(message.begin(), message.end(), out.begin() + 5);
  grpc_frame_prefix(out);
  return out;
}

void grpc_frame_prefix(std::span<std::byte> body) noexcept {
  const auto n = static_cast<std::uint32_t>(body.size() - 5);
  body[0] = std::byte{0};  // not compressed: ringrpc-load offers no grpc-encoding
  body[1] = static_cast<std::byte>(n >> 24);
  body[2] = static_cast<std::byte>(n >> 16);
  body[3] = static_cast<std::byte>(n >> 8);
  body[4] = static_cast<std::byte>(n);
}

bool grpc_message_reader::feed(std::span<const std::byte> chunk) noexcept {
  if (_error != nullptr) return false;
  while (!chunk.empty()) {
    if (_left > 0) {
      const auto take = std::min<std::uint64_t>(_left, chunk.size());
      _left -= take;
      chunk = chunk.subspan(static_cast<std::size_t>(take));
      continue;
    }
    _prefix[_prefix_have++] = static_cast<unsigned char>(chunk.front());
    chunk = chunk.subspan(1);
    if (_prefix_have < 5) continue;
    _prefix_have = 0;
    if (_prefix[0] > 1) {
      _error = "bad gRPC message flag";
      return false;
    }
    const std::uint64_t n = (std::uint64_t{_prefix[1]} << 24) | (std::uint64_t{_prefix[2]} << 16) |
                            (std::uint64_t{_prefix[3]} << 8) | _prefix[4];
    if (n > _max) {
      _error = "gRPC message over --max-body";
      _too_large = true;
      return false;
    }
    _left = n;
    ++_messages;
  }
  return true;
}

std::size_t grpc_message_reader::feed_to_message_end(std::span<const std::byte> chunk, bool& ended) noexcept {
  ended = false;
  std::size_t used = 0;
  while (used < chunk.size() && _error == nullptr) {
    if (_left > 0) {
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(_left, chunk.size() - used));
      _left -= take;
      used += take;
      ended = _left == 0;
      return used;
    }
    // The prefix a byte at a time through feed(): it is 5 bytes, the body is taken whole above.
    if (!feed(chunk.subspan(used++, 1))) return used;
    if (_prefix_have == 0 && _left == 0) {  // an empty message: ended with its prefix
      ended = true;
      return used;
    }
  }
  return used;
}

std::optional<unsigned> parse_grpc_status(std::string_view value) noexcept {
  unsigned code = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), code);
  if (value.empty() || ec != std::errc{} || end != value.data() + value.size() || code > 16) return std::nullopt;
  if (value.size() > 1 && value.front() == '0') return std::nullopt;
  return code;
}

std::string grpc_status_kind(unsigned code) {
  // The names of grpc/status.h's codes, as gRPC's own tools print them (lowercased).
  static constexpr std::array<const char*, 17> names = {
      "ok", "cancelled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
      "already_exists", "permission_denied", "resource_exhausted", "failed_precondition", "aborted",
      "out_of_range", "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated"};
  if (code < names.size()) return std::string("grpc_").append(names[code]);
  return std::string("grpc_status_").append(std::to_string(code));
}

std::string grpc_call_outcome(unsigned http_status, std::string_view grpc_status, const grpc_message_reader& body) {
  if (http_status != 200) return std::string("http_").append(std::to_string(http_status));
  if (grpc_status.empty()) return "grpc_no_status";
  const auto code = parse_grpc_status(grpc_status);
  if (!code) return "grpc_bad_status";
  if (*code != 0) return grpc_status_kind(*code);
  if (body.too_large()) return "reply_too_large";
  if (body.error() != nullptr || !body.at_boundary()) return "grpc_bad_message";
  return "";
}

}  // namespace ringrpc::load

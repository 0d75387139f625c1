#include "client/reply_outcome.hpp"

#include <cstddef>
#include <string>

namespace ringrpc::detail {

bool response_metadata_ok(const metadata_limits& caps, const frame_view& v, std::string& why) {
  const std::size_t header_count = v.metadata != nullptr ? v.metadata->size() : 0;
  const std::size_t trailer_count = v.trailers != nullptr ? v.trailers->size() : 0;
  if (header_count + trailer_count > caps.max_entries) {
    why = "response metadata: " + std::to_string(header_count) + " headers and " +
          std::to_string(trailer_count) + " trailers exceed " + std::string(caps.entries_option) + " (" +
          std::to_string(caps.max_entries) + ")";
    return false;
  }
  std::size_t counted_bytes = 0;
  for (const wire_metadata* list : {v.metadata, v.trailers}) {
    if (list == nullptr) continue;
    metadata_limits left = caps;
    left.max_bytes = static_cast<std::uint32_t>(caps.max_bytes - counted_bytes);
    const metadata_check check = check_metadata(*list, left);
    if (!check.ok()) {
      why = std::string(list == v.metadata ? "response headers: " : "response trailers: ") +
            describe(check, *list, caps);
      return false;
    }
    counted_bytes += check.bytes;
  }
  return true;
}

call_outcome outcome_of_answer(const frame_view& v, const metadata_limits& caps, std::string& refused) {
  call_outcome o;
  if ((v.metadata != nullptr || v.trailers != nullptr) && !response_metadata_ok(caps, v, refused)) [[unlikely]] {
    o.error = call_error::protocol_error;
    o.message = refused;
  } else if (v.kind == wire::Kind::Reply || v.kind == wire::Kind::Pong) {
    o.payload = v.payload;
    o.headers = metadata_view(v.metadata);
    o.trailers = metadata_view(v.trailers);
  } else if (v.kind == wire::Kind::Error) {
    o.error = call_error::server_status;
    o.code = v.code == status::ok ? status::internal : v.code;
    o.message = v.message;
    o.retry_after_ms = v.retry_after_ms;
    o.headers = metadata_view(v.metadata);
    o.trailers = metadata_view(v.trailers);
    o.details = v.details;
  } else {
    o.error = call_error::protocol_error;
    o.message = "server answered with an unexpected frame kind";
  }
  return o;
}

}  // namespace ringrpc::detail

#include "ringrpc/status.hpp"

namespace ringrpc {

std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::unknown_method: return "unknown_method";
    case status::bad_request: return "bad_request";
    case status::frame_too_large: return "frame_too_large";
    case status::server_busy: return "server_busy";
    case status::deadline_exceeded: return "deadline_exceeded";
    case status::shutting_down: return "shutting_down";
    case status::internal: return "internal";
    case status::cancelled: return "cancelled";
    case status::unauthenticated: return "unauthenticated";
    case status::permission_denied: return "permission_denied";
  }
  return "unknown_status";
}

}  // namespace ringrpc

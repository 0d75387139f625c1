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
    case status::not_found: return "not_found";
    case status::invalid_argument: return "invalid_argument";
    case status::already_exists: return "already_exists";
    case status::failed_precondition: return "failed_precondition";
    case status::unavailable: return "unavailable";
    case status::unimplemented: return "unimplemented";
    case status::resource_exhausted: return "resource_exhausted";
    case status::aborted: return "aborted";
    case status::out_of_range: return "out_of_range";
    case status::data_loss: return "data_loss";
    case status::unknown: return "unknown";
  }
  return "unknown_status";
}

int grpc_code(status s) noexcept {
  // google.rpc.Code: OK 0, CANCELLED 1, UNKNOWN 2, INVALID_ARGUMENT 3, DEADLINE_EXCEEDED 4,
  // NOT_FOUND 5, ALREADY_EXISTS 6, PERMISSION_DENIED 7, RESOURCE_EXHAUSTED 8,
  // FAILED_PRECONDITION 9, ABORTED 10, OUT_OF_RANGE 11, UNIMPLEMENTED 12, INTERNAL 13,
  // UNAVAILABLE 14, DATA_LOSS 15, UNAUTHENTICATED 16.
  switch (s) {
    case status::ok: return 0;
    case status::unknown_method: return 12;    // gRPC answers an unknown method UNIMPLEMENTED
    case status::bad_request: return 3;        // the request could not be taken as sent
    case status::frame_too_large: return 8;    // gRPC: a message over the size limit
    case status::server_busy: return 14;       // retry after the hint
    case status::deadline_exceeded: return 4;
    case status::shutting_down: return 14;     // another server may take it
    case status::internal: return 13;
    case status::cancelled: return 1;
    case status::unauthenticated: return 16;
    case status::permission_denied: return 7;
    case status::not_found: return 5;
    case status::invalid_argument: return 3;
    case status::already_exists: return 6;
    case status::failed_precondition: return 9;
    case status::unavailable: return 14;
    case status::unimplemented: return 12;
    case status::resource_exhausted: return 8;
    case status::aborted: return 10;
    case status::out_of_range: return 11;
    case status::data_loss: return 15;
    case status::unknown: return 2;
  }
  return 2;
}

}  // namespace ringrpc

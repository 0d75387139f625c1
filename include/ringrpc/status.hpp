#pragma once
/// \file Status codes carried in reply frames, shared by the server and the client.

#include <cstdint>
#include <string_view>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// The status of a finished call as the server reports it. The numeric values are the wire
/// values (docs/protocol.md) and never change meaning.
enum class status : std::uint16_t {
  ok = 0,
  unknown_method = 1,     ///< no method of that name is registered
  bad_request = 2,        ///< the frame failed verification or made no sense
  frame_too_large = 3,    ///< the length prefix exceeded the receiver's max frame bytes
  server_busy = 4,        ///< a queue was full; retry after the hint in the reply
  deadline_exceeded = 5,  ///< the call's time budget ran out before it could run
  shutting_down = 6,      ///< the server is stopping and takes no new calls
  internal = 7,           ///< the handler threw; the message carries what()
  cancelled = 8,          ///< the caller cancelled the call
  /// The call carried no credentials, or ones the server does not accept (a missing or unknown
  /// bearer token; an authorizer that found no usable identity). Not run.
  unauthenticated = 9,
  /// The caller's identity is known, and it may not call this method (an authorizer said so,
  /// or a handler did). Not run, when the authorizer refused it.
  permission_denied = 10,
  // Added with response metadata (issue 28); a peer that predates them reads the number and
  // names it "unknown_status" (docs/protocol.md, "Status codes", for what each old peer does).
  // Each means what gRPC's code of the same name means; grpc_code() gives that code.
  not_found = 11,            ///< the thing the call names does not exist
  invalid_argument = 12,     ///< the request is well-formed but its content is not acceptable
  already_exists = 13,       ///< what the call would create is there already
  failed_precondition = 14,  ///< the system is not in the state the call needs; do not retry as is
  unavailable = 15,          ///< the service cannot serve now; retrying later may succeed
  unimplemented = 16,        ///< the method exists but does not support this operation
  resource_exhausted = 17,   ///< a quota or limit of the service ran out
  aborted = 18,              ///< a conflict (e.g. a transaction); retry at a higher level
  out_of_range = 19,         ///< past the valid range (e.g. reading past the end)
  data_loss = 20,            ///< unrecoverable loss or corruption of data
  unknown = 21,              ///< an error the handler cannot classify
};

/// Stable lower-case name, e.g. "server_busy"; "unknown_status" for values not listed above
/// (a client keeps such a number in call_outcome::code: a newer server may send it).
std::string_view to_string(status s) noexcept;

/// The gRPC status code (google.rpc.Code, 0..16) that means the same, for bridges and logs;
/// 2 (UNKNOWN) for values not listed above. The table is in docs/protocol.md ("Status codes").
int grpc_code(status s) noexcept;

}  // namespace ringrpc

RINGRPC_API_END

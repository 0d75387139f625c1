#pragma once
/// \file Status codes carried in reply frames, shared by the server and the client.

#include <cstdint>
#include <string_view>

#include "ringrpc/cxx20.hpp"

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
};

/// Stable lower-case name, e.g. "server_busy"; "unknown_status" for values not listed above.
std::string_view to_string(status s) noexcept;

}  // namespace ringrpc

#pragma once
// What a caller gets for a server's answer to one call: the client runtime (client_loop) and a
// shard's downstream calls (server/shard_downstreams.cpp) read answers the same way.

#include <string>
#include <string_view>

#include "ringrpc/client.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace ringrpc::detail {

/// An outcome of the caller's own making (no answer from the server): the error, its message,
/// and status::cancelled for a cancellation.
inline call_outcome failed_outcome(call_error e, std::string_view why) noexcept {
  call_outcome o;
  o.error = e;
  o.message = why;
  if (e == call_error::cancelled) o.code = status::cancelled;
  return o;
}

/// What every call of a connection gets when the server answers call id 0 with an Error (a
/// connection-level error, e.g. a frame of ours too large): the server closes next.
inline call_outcome connection_error_outcome(const frame_view& v) noexcept {
  call_outcome o;
  o.error = call_error::server_status;
  o.code = v.code;
  o.message = v.message;
  return o;
}

/// Headers and trailers of one answer, together within `caps`, each list with well-formed
/// unique keys (the rules a server applies to request metadata). False with `why` otherwise.
bool response_metadata_ok(const metadata_limits& caps, const frame_view& v, std::string& why);

/// The outcome of answer `v` to a call (a Reply, a Pong or an Error frame; any other kind is a
/// protocol error). Its views point into `v`'s frame, and into `refused` when the answer's
/// metadata is past `caps` (that call fails, its connection goes on).
call_outcome outcome_of_answer(const frame_view& v, const metadata_limits& caps, std::string& refused);

}  // namespace ringrpc::detail

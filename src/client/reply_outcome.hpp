#pragma once
// What a caller gets for a server's answer to one call: the client runtime (client_loop) and a
// shard's downstream calls (server/shard_downstreams.cpp) read answers the same way.

#include <string>

#include "ringrpc/client.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace ringrpc::detail {

/// Headers and trailers of one answer, together within `caps`, each list with well-formed
/// unique keys (the rules a server applies to request metadata). False with `why` otherwise.
bool response_metadata_ok(const metadata_limits& caps, const frame_view& v, std::string& why);

/// The outcome of answer `v` to a call (a Reply, a Pong or an Error frame; any other kind is a
/// protocol error). Its views point into `v`'s frame, and into `refused` when the answer's
/// metadata is past `caps` (that call fails, its connection goes on).
call_outcome outcome_of_answer(const frame_view& v, const metadata_limits& caps, std::string& refused);

}  // namespace ringrpc::detail

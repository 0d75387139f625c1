#pragma once
// Built-in methods of ringrpc-server beyond add_builtin_methods (ringrpc/server.hpp): the ones
// that answer with response metadata and error details, so a protocol client can check them
// against docs/protocol.md (3.2, 3.3, section 9). Not in add_builtin_methods: servers that
// embed the built-ins keep exactly the endpoints they had.

namespace ringrpc {
class server;
}

namespace ringrpc::detail {

/// Registers "mirror" (replies with the payload; the request's metadata but `authorization`
/// comes back as response headers, then trailer `pairs` = how many) and "fail" (payload
/// "CODE[ DETAILS]": an Error with that status and those details, metadata mirrored).
void add_response_metadata_methods(server& s);

/// Registers the streaming built-ins (builtin_streams.cpp): "generate" (server stream; request
/// "N BYTES" -> N messages of BYTES bytes, BYTES at most 1 MiB) and "echo_stream" (bidi: every
/// message comes back, in order, held back by the client's credit). Throws as
/// server::add_stream_method does (std::logic_error on a server with interceptors).
void add_stream_methods(server& s);

}  // namespace ringrpc::detail

#pragma once
/// \file Server reflection: a built-in endpoint that tells tools which typed services a server
/// has and hands out their schemas, so `ringrpc-call` needs no local copy of them (like gRPC
/// server reflection). docs/services.md documents the two methods.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/endpoint.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class server;

/// One served service and the binary schema (`flatc --binary --schema`, a .bfbs) declaring it.
/// Generated headers provide these: `Greeter::schema()`.
struct schema_blob {
  std::string_view service;            ///< unqualified service name, e.g. "Greeter"; empty: all in the schema
  std::span<const std::uint8_t> bfbs;  ///< must stay valid while the server runs; 8-byte aligned
};

/// The endpoint's name and its two methods.
inline constexpr char reflection_endpoint_name[] = "reflection";
/// Payload ignored. Reply: UTF-8 JSON
/// `{"services":[{"name":"Greeter","full_name":"example.Greeter","methods":[{"name":"SayHello",
/// "method":"Greeter.SayHello","id":2542658764,"request":"example.HelloRequest",
/// "reply":"example.HelloReply","doc":"Says hello."}]}]}`, services and methods sorted by
/// name; "doc" (the method's /// comment, lines joined by spaces) only where the schema has one;
/// "streaming" ("server", "client" or "bidi") only for a streaming method.
inline constexpr char reflection_list_method[] = "reflection.list";
/// Payload: a service name (unqualified or fully qualified). Reply: the .bfbs declaring it;
/// `bad_request` when no served schema declares it.
inline constexpr char reflection_schema_method[] = "reflection.schema";

/// Registers the "reflection" endpoint on `s` serving `schemas`. Throws std::invalid_argument
/// when a blob is not a valid binary schema, does not declare the service it names, two blobs
/// declare the same service, or a service name is reused across namespaces; and whatever
/// server::register_endpoint throws.
void add_reflection(server& s, std::vector<schema_blob> schemas, endpoint_options options = {});

/// The "reflection.list" reply for `schemas` (what the endpoint answers). Same errors.
std::string reflection_list_json(const std::vector<schema_blob>& schemas);

}  // namespace ringrpc

RINGRPC_API_END

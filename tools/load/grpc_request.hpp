#pragma once
// A gRPC request message from JSON, converted against a .proto file with libprotobuf's own
// parser (compiler::Importer) and dynamic messages: no generated code, no hand-written protobuf.

#include <memory>
#include <string>
#include <vector>

namespace ringrpc::load {

class message_template;

/// The serialized request of `method` ("pkg.Service/Method", as in a grpc:// URL's path without
/// the leading '/') from `json` (proto3 JSON mapping). `proto_file` is found on `includes`
/// (like protoc's -I; its own directory is searched too). Throws std::invalid_argument naming
/// the file, the line and what is wrong. The method must be unary, or bidi streaming when
/// `bidi_stream` (--stream: one of its messages).
std::string grpc_request_from_json(const std::string& proto_file, const std::vector<std::string>& includes,
                                   const std::string& method, const std::string& json, bool bidi_stream = false);

/// The same request from `json` with placeholders (message_template.hpp), compiled once: each
/// call appends its values as protobuf fields after the fixed part (grpc_template.cpp). Throws
/// std::invalid_argument as above, and for a placeholder the request type cannot hold.
std::shared_ptr<const message_template> grpc_template_from_json(const std::string& proto_file,
                                                                const std::vector<std::string>& includes,
                                                                const std::string& method, const std::string& json);

}  // namespace ringrpc::load

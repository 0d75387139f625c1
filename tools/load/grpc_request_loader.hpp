#pragma once
// A .proto file loaded and one request converted from JSON into a dynamic message, kept alive
// with the descriptor pool and factory it needs: shared by grpc_request.cpp (the bytes) and
// grpc_template.cpp (the plan of a templated request).

#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/dynamic_message.h>

#include <memory>
#include <string>
#include <vector>

namespace ringrpc::load {

namespace pb = google::protobuf;

/// See grpc_request_from_json for the arguments and errors.
class loaded_request {
 public:
  loaded_request(const std::string& proto_file, const std::vector<std::string>& includes, const std::string& method,
                 const std::string& json, bool bidi_stream = false);
  loaded_request(const loaded_request&) = delete;
  loaded_request& operator=(const loaded_request&) = delete;

 private:
  // Declared in the order they depend on each other: destroyed request first, tree last.
  pb::compiler::DiskSourceTree _tree;
  std::unique_ptr<pb::compiler::MultiFileErrorCollector> _errors;
  std::unique_ptr<pb::compiler::Importer> _importer;
  std::unique_ptr<pb::DynamicMessageFactory> _factory;

 public:
  std::unique_ptr<pb::Message> request;  ///< the converted request; its descriptor lives in the pool above
};

}  // namespace ringrpc::load

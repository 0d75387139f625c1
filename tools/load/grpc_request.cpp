#include "grpc_request.hpp"

#include "grpc_request_loader.hpp"

#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

namespace ringrpc::load {

namespace {

// Collects the parser's complaints so they end up in one exception, not on stderr.
class collect_errors final : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& message) override {
    if (!text.empty()) text += "; ";
    text += file + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  std::string text;
};

}  // namespace

loaded_request::loaded_request(const std::string& proto_file, const std::vector<std::string>& includes,
                               const std::string& method, const std::string& json, bool bidi_stream) {
  const std::filesystem::path file(proto_file);
  if (!std::filesystem::is_regular_file(file)) throw std::invalid_argument("cannot read --proto " + proto_file);
  for (const std::string& dir : includes) _tree.MapPath("", dir);
  const std::string dir = file.has_parent_path() ? file.parent_path().string() : std::string(".");
  _tree.MapPath("", dir);
  auto errors = std::make_unique<collect_errors>();
  const collect_errors& collected = *errors;
  _errors = std::move(errors);  // the importer keeps using it
  _importer = std::make_unique<pb::compiler::Importer>(&_tree, _errors.get());
  const pb::FileDescriptor* fd = _importer->Import(file.filename().string());
  if (fd == nullptr) throw std::invalid_argument("--proto " + proto_file + ": " + collected.text);

  const auto slash = method.find('/');
  if (slash == std::string::npos) throw std::invalid_argument("'" + method + "' is not package.Service/Method");
  const std::string full = method.substr(0, slash) + "." + method.substr(slash + 1);
  const pb::MethodDescriptor* m = _importer->pool()->FindMethodByName(full);
  if (m == nullptr) {
    throw std::invalid_argument("--proto " + proto_file + " has no method " + full +
                                " (give the service with its package: package.Service/Method)");
  }
  if (bidi_stream && !(m->client_streaming() && m->server_streaming())) {
    throw std::invalid_argument(full + " is not a bidi streaming method; --stream loads bidi methods");
  }
  if (!bidi_stream && (m->client_streaming() || m->server_streaming())) {
    throw std::invalid_argument(full + " is a streaming method; ringrpc-load calls unary methods (bidi ones with --stream)");
  }
  _factory = std::make_unique<pb::DynamicMessageFactory>(_importer->pool());
  request.reset(_factory->GetPrototype(m->input_type())->New());
  const auto status = pb::util::JsonStringToMessage(json, request.get());
  if (!status.ok()) {
    throw std::invalid_argument("--data is not a " + m->input_type()->full_name() + ": " +
                                std::string(status.message()));
  }
}

std::string grpc_request_from_json(const std::string& proto_file, const std::vector<std::string>& includes,
                                   const std::string& method, const std::string& json, bool bidi_stream) {
  const loaded_request loaded(proto_file, includes, method, json, bidi_stream);
  std::string bytes;
  if (!loaded.request->SerializeToString(&bytes)) throw std::invalid_argument("cannot serialize the request");
  return bytes;
}

}  // namespace ringrpc::load

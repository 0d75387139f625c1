#pragma once
// --method --data with placeholders: the FlatBuffers plan (message_template.hpp).

#include <memory>
#include <string>

#include "message_template.hpp"

namespace ringrpc::tools {
class typed_schema;
}  // namespace ringrpc::tools

namespace ringrpc::load {

/// The request table `type` of `schema` from `json` with placeholders, compiled once. A call
/// copies the converted buffer, writes each number in place (a scalar keeps its size) and
/// appends each string that holds a placeholder after the buffer, pointing its field there: the
/// string first converted stays as unreferenced bytes. Throws std::invalid_argument for JSON the
/// schema refuses and for a placeholder where no number or string can go.
std::shared_ptr<const message_template> typed_template_from_json(tools::typed_schema& schema, const std::string& type,
                                                                 const std::string& json);

}  // namespace ringrpc::load

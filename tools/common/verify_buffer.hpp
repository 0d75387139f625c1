#pragma once
// Verifying a FlatBuffers buffer against a schema known only at run time, for bytes from outside
// (a server's reply, a schema a server sent). flatbuffers::Verify (reflection.cpp) does the same
// but is not safe on hostile input in the libflatbuffers we build against (2.0.8): it reads
// union type slots and table offsets before checking them, and indexes the schema's object
// and enum lists without bounds (google/flatbuffers#9040, #9122, #9137, #9198); json_fuzz
// crashed it within seconds. This one checks every offset and index before following it.

#include <cstddef>
#include <cstdint>
#include <string>

#include <flatbuffers/reflection.h>

namespace ringrpc::tools {

/// True when `data` (`size` bytes, 8-byte aligned) holds a root table of type `root` that
/// GenerateText can walk without reading outside the buffer: every table, vector, string,
/// struct and union member lies inside it, union types name members the schema has, and the
/// nesting stays within the verifier's depth limit. Fields with the nested_flatbuffer or
/// flexbuffer attribute are checked as byte vectors only; print them as bytes.
bool verify_buffer(const reflection::Schema& schema, const reflection::Object& root, const std::uint8_t* data,
                   std::size_t size);

/// Empty when a binary schema that passed reflection::VerifySchemaBuffer is also safe to give
/// flatbuffers::Parser::Deserialize and to walk by index; else what is wrong with it. The
/// verifier checks only the layout. Deserialize (2.0.8) indexes with field ids and type indices
/// it does not bound, asserts (ending the process) on a field both required and optional,
/// and when a definition fails (json_fuzz found a type index out of range, and a repeated name
/// does it too) it frees one it has already stored: a double free when the Parser is destroyed.
std::string schema_problem(const reflection::Schema& schema);

}  // namespace ringrpc::tools

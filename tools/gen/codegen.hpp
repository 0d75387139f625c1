#pragma once
// ringrpc-gen's logic, as a library so tests can drive it without the command line: what a
// schema's services are, whether they are acceptable, and the C++ header for them.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace flatbuffers {
class Parser;
}  // namespace flatbuffers

namespace ringrpc::gen {

/// Problems with a schema; what() lists every one of them, one per line.
class schema_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct method_desc {
  std::string name;                  ///< "SayHello"
  std::string full_name;             ///< "Greeter.SayHello": the wire method name
  std::uint32_t id = 0;              ///< ringrpc::method_id(full_name)
  std::string request_type;          ///< fully qualified schema name, "example.HelloRequest"
  std::string reply_type;
  std::vector<std::string> doc;      ///< `///` comment lines, without the slashes
  /// "server", "client" or "bidi" for a streaming method (`(streaming: "...")`); empty for a
  /// unary one (no attribute, or "none").
  std::string streaming;
};

struct service_desc {
  std::string name;                  ///< "Greeter": the endpoint name
  std::vector<std::string> name_space;  ///< {"example"}
  std::vector<std::string> doc;
  std::vector<method_desc> methods;  ///< in schema order
};

/// Two methods whose ids are equal.
struct id_collision {
  std::string first;
  std::string second;
  std::uint32_t id = 0;
};

/// Every pair of `full_names` with the same method id, in input order. Identical names are
/// not collisions (the schema parser already refuses duplicate methods).
std::vector<id_collision> find_id_collisions(const std::vector<std::string>& full_names);

/// The services `parser` found in `schema_file` (as passed to Parser::Parse; services from
/// included files are left to those files' headers). Throws schema_error listing every
/// streaming method of an unknown kind, id collision (over all services the parser saw), name that the generated
/// C++ cannot use, and service name used twice.
std::vector<service_desc> collect_services(const flatbuffers::Parser& parser, const std::string& schema_file);

/// The largest alignment any table or struct of the schema needs (at least 8).
std::size_t max_alignment(const flatbuffers::Parser& parser);

struct header_input {
  std::string schema_name;          ///< the schema's file name, e.g. "greeter.fbs"
  std::string flatc_header;         ///< flatc's C++ header to include, e.g. "greeter_generated.h"
  std::vector<service_desc> services;
  std::span<const std::uint8_t> bfbs;  ///< the binary schema to embed
  std::size_t alignment = 8;
};

/// The generated header's text.
std::string generate_header(const header_input& in);

/// Checks that `bfbs` is a binary schema declaring exactly `services` (same names, same
/// methods with the same request and reply types): it comes from flatc, the rest from the
/// library's parser, and a mismatch would make reflection lie. Throws schema_error.
void check_bfbs_matches(std::span<const std::uint8_t> bfbs, const flatbuffers::Parser& parser);

}  // namespace ringrpc::gen

#pragma once
// JSON <-> FlatBuffers for typed ringrpc methods, against a schema read from a file or fetched
// from a server's reflection endpoint. Shared by ringrpc-call and ringrpc-load --method.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/client.hpp"

namespace flatbuffers {
class Parser;
}  // namespace flatbuffers

namespace ringrpc::tools {

/// ringrpc-call's exit statuses (docs/services.md); ringrpc-load maps them onto its own.
inline constexpr int exit_server_error = 1;  ///< the server answered with an error status
inline constexpr int exit_usage = 2;         ///< usage, schema or JSON problem
inline constexpr int exit_transport = 3;     ///< connection, timeout or an invalid reply

/// A failure and the exit status it stands for.
class tool_error : public std::runtime_error {
 public:
  tool_error(int exit_code, const std::string& message) : std::runtime_error(message), _exit_code(exit_code) {}
  int exit_code() const noexcept { return _exit_code; }

 private:
  int _exit_code;
};

struct method_info {
  std::string service;       ///< "Greeter": the endpoint name
  std::string service_full;  ///< "example.Greeter"
  std::string name;          ///< "SayHello"
  std::string full_name;     ///< "Greeter.SayHello": what goes on the wire
  std::uint32_t id = 0;
  std::string request;       ///< "example.HelloRequest"
  std::string reply;
  std::string doc;           ///< the schema's /// comment of the method, its lines joined by spaces
  std::string streaming;     ///< "server", "client" or "bidi" for a stream method; empty for a call
};

/// One binary schema and a FlatBuffers parser loaded from it.
class typed_schema {
 public:
  /// A .bfbs file (flatc --binary --schema), or a .fbs file parsed with `include_dirs`. Throws
  /// tool_error(exit_usage).
  static typed_schema from_file(const std::string& path, const std::vector<std::string>& include_dirs);
  /// A binary schema received from `origin` (for messages). Throws tool_error(exit_usage).
  static typed_schema from_bfbs(std::span<const std::uint8_t> bfbs, const std::string& origin);

  typed_schema(typed_schema&&) noexcept;
  typed_schema& operator=(typed_schema&&) noexcept;
  ~typed_schema();

  const std::vector<method_info>& methods() const noexcept { return _methods; }
  /// "Service.Method", the service unqualified or qualified; nullptr when absent.
  const method_info* find_method(std::string_view name) const noexcept;
  /// Throws tool_error(exit_usage) naming what the schema has instead.
  const method_info& method(std::string_view name) const;

  /// JSON text to a FlatBuffers buffer whose root is the table `type`. Throws
  /// tool_error(exit_usage) with the parser's explanation.
  std::vector<std::uint8_t> to_binary(const std::string& type, std::string_view json);

  struct json_style {
    bool compact = false;        ///< one line
    bool emit_defaults = false;  ///< also fields equal to their default
  };
  /// A buffer whose root is `type` as JSON, after verifying it against the schema. Throws
  /// tool_error(exit_transport) when it is not a valid `type` or cannot be shown as JSON.
  std::string to_json(const std::string& type, std::span<const std::uint8_t> bytes, json_style style);

  /// `name` (a service, "Service.Method", or a table, struct, enum or union, qualified or
  /// not) in schema syntax, with every type it uses. Empty when the schema has no such name.
  std::string describe(std::string_view name) const;

  std::span<const std::uint8_t> bfbs() const noexcept;

 private:
  typed_schema();
  void load(const std::string& origin);
  std::vector<std::uint64_t> _storage;  // the .bfbs, 8-byte aligned
  std::size_t _size = 0;
  std::unique_ptr<flatbuffers::Parser> _parser;
  std::vector<method_info> _methods;
};

/// Makes one call and returns how it ended: what the reflection requests below are sent with.
using call_fn = std::function<call_result(std::string_view method, std::string_view payload)>;

/// "reflection.schema" for `service`. Throws tool_error: exit_usage when the server has no
/// reflection or no such service, exit_server_error for other error statuses, exit_transport
/// for connection problems and timeouts (`timeout` for the message).
typed_schema fetch_schema(const call_fn& call, std::string_view service, std::chrono::microseconds timeout);
typed_schema fetch_schema(client& c, std::string_view service, const call_options& options);

/// "reflection.list": the JSON document. Same errors.
std::string fetch_list(const call_fn& call, std::chrono::microseconds timeout);
std::string fetch_list(client& c, const call_options& options);

/// A failed call as a tool_error: server statuses exit_server_error, the rest exit_transport.
tool_error call_failure(std::string_view what, const call_result& r, std::chrono::microseconds timeout);

}  // namespace ringrpc::tools

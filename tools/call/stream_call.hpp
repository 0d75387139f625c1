#pragma once
// ringrpc-call on an untyped stream method (docs/services.md, "Streams from the command line"):
// a server stream prints each message as it comes; client and bidi streams send -d as one
// message, or each line of standard input (--stdin) as one, and print what comes back. A typed
// stream method does the same with a JSON document per message and per line.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "byte_text.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/stream.hpp"

namespace ringrpc::tools {

/// The kind a server named when it refused a call for being the wrong kind: its Error says
/// "method 'M' is a K stream; open it with StreamOpen stream_kind N" (docs/protocol.md).
std::optional<stream_kind> kind_from_refusal(const call_result& r);

/// "server", "client" or "bidi" as reflection lists it; nullopt for anything else.
std::optional<stream_kind> kind_from_name(std::string_view name);

/// What to send on a stream: `payload` (a server stream's request, or a client or bidi
/// stream's one message), or with `lines` each line of standard input, decoded by `encoding`.
struct stream_input {
  std::string payload;
  bool lines = false;
  byte_encoding encoding = byte_encoding::raw;
  /// A typed stream's messages: each line of --stdin to the bytes sent (JSON to FlatBuffers),
  /// and each message received to the line printed (FlatBuffers to JSON). Unset: bytes as they
  /// are, by `encoding`. They throw tool_error for what they cannot convert.
  std::function<std::string(std::string_view line)> to_wire;
  std::function<std::string(std::string_view message)> to_line;
};

/// Runs stream `method` of kind `kind` on `c` to its end, printing each message the server
/// sends (and a client stream's answer) on its own line: text when printable, else hex (or as
/// --hex/--base64 ask). The exit status; throws tool_error as a failed call would.
int run_stream(client& c, const std::string& method, stream_kind kind, const stream_input& in,
               const call_options& options);

}  // namespace ringrpc::tools

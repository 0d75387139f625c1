// ringrpc-call's streams: one stream, its messages printed as they arrive, one to a line.
#include "stream_call.hpp"

#include <cstdio>
#include <iostream>
#include <regex>
#include <string>
#include <thread>

#include "cli_conventions.hpp"
#include "ringrpc/client_stream.hpp"
#include "typed_json.hpp"

namespace ringrpc::tools {

namespace {

std::string_view text(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// One message on a line of its own, flushed so that a pipe sees it when it came. Text when it
// prints as it is (no control bytes, newlines included, and valid UTF-8), else hex: a message
// never spans lines and never reaches the terminal raw.
void print_message(std::string_view bytes, byte_encoding encoding) {
  std::string shown;
  if (encoding != byte_encoding::raw) {
    shown = encode(encoding, bytes);
  } else if (printable(bytes) == bytes) {
    shown = bytes;
  } else {
    shown = to_hex(bytes);
  }
  shown += '\n';
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  std::fflush(stdout);
}

std::string decoded(byte_encoding encoding, std::string_view line) {
  try {
    return decode(encoding, line);
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, std::string("a line of --stdin: ") + e.what());
  }
}

// Client and bidi streams: sends the input (waiting for the server's credit as it goes), then
// says no more will come. False when the stream ended first (the server's end says why).
bool send_input(client_stream& s, const stream_input& in) {
  if (!in.lines) return s.write_wait(in.payload) == write_result::ok && s.half_close();
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a CRLF file sends what a LF one does
    if (s.write_wait(decoded(in.encoding, line)) != write_result::ok) return false;
  }
  return s.half_close();
}

}  // namespace

std::optional<stream_kind> kind_from_refusal(const call_result& r) {
  if (r.error != call_error::server_status || r.code != status::bad_request) return std::nullopt;
  static const std::regex refusal("^method '.*' is a (server|client|bidi) stream; open it with StreamOpen");
  std::smatch m;
  if (!std::regex_search(r.message, m, refusal)) return std::nullopt;
  return kind_from_name(m[1].str());
}

std::optional<stream_kind> kind_from_name(std::string_view name) {
  if (name == "server") return stream_kind::server;
  if (name == "client") return stream_kind::client;
  if (name == "bidi") return stream_kind::bidi;
  return std::nullopt;
}

int run_stream(client& c, const std::string& method, stream_kind kind, const stream_input& in,
               const call_options& options) {
  stream_options so;
  so.timeout = options.timeout;
  so.metadata = options.metadata;
  const std::span<const std::byte> request(reinterpret_cast<const std::byte*>(in.payload.data()), in.payload.size());
  client_stream s = c.open_stream(method, kind, kind == stream_kind::server ? request : std::span<const std::byte>{},
                                  so);
  // The server's messages are printed as they come while this thread sends: a bidi server may
  // answer each message before the next line is typed.
  std::thread printer([&] {
    while (const auto m = s.read()) print_message(text(*m), in.encoding);
  });
  if (kind != stream_kind::server) {
    try {
      send_input(s, in);
    } catch (...) {
      s.cancel();
      printer.join();
      throw;
    }
  }
  printer.join();
  const call_result r = s.finish();
  if (!r.ok()) throw call_failure(method, r, options.timeout);
  if (kind == stream_kind::client) print_message(r.payload_string(), in.encoding);
  return 0;
}

}  // namespace ringrpc::tools

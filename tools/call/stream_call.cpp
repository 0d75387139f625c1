// ringrpc-call's streams: one stream, its messages printed as they arrive, one to a line.
#include "stream_call.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <regex>
#include <string>
#include <thread>
#include <utility>

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
void print_message(std::string_view bytes, const stream_input& in) {
  std::string shown;
  if (in.to_line) {
    shown = in.to_line(bytes);
  } else if (in.encoding != byte_encoding::raw) {
    shown = encode(in.encoding, bytes);
  } else if (printable(bytes) == bytes) {
    shown = bytes;
  } else {
    shown = to_hex(bytes);
  }
  shown += '\n';
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  std::fflush(stdout);
}

std::string decoded(const stream_input& in, std::string_view line) {
  if (in.to_wire) return in.to_wire(line);
  try {
    return decode(in.encoding, line);
  } catch (const std::invalid_argument& e) {
    throw tool_error(exit_usage, std::string("a line of --stdin: ") + e.what());
  }
}

// Standard input, a line at a time, given up as soon as the stream has ended: a terminal or a
// quiet pipe may send nothing more for a long time, and the stream's end (its deadline, the
// server's error) must not wait for them.
class stdin_lines {
 public:
  /// The next line (without its \n or \r\n); false at the end of the input or once `s` ended.
  bool next(client_stream& s, std::string& line) {
    for (;;) {
      if (const auto nl = _buffer.find('\n'); nl != std::string::npos) {
        line.assign(_buffer, 0, nl);
        _buffer.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();  // a CRLF file sends what a LF one does
        return true;
      }
      if (_eof) {
        if (_buffer.empty()) return false;
        line = std::exchange(_buffer, {});  // a last line without its newline
        return true;
      }
      if (s.ended()) return false;
      pollfd p{STDIN_FILENO, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) throw tool_error(exit_transport, std::string("reading standard input: ") + std::strerror(errno));
      if (ready <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno != EINTR && errno != EAGAIN) {
        throw tool_error(exit_transport, std::string("reading standard input: ") + std::strerror(errno));
      }
      if (n == 0) _eof = true;
      if (n > 0) _buffer.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  std::string _buffer;
  bool _eof = false;
};

// Client and bidi streams: sends the input (waiting for the server's credit as it goes), then
// says no more will come. False when the stream ended first (the server's end says why).
bool send_input(client_stream& s, const stream_input& in) {
  if (!in.lines) return s.write_wait(in.payload) == write_result::ok && s.half_close();
  stdin_lines input;
  std::string line;
  while (input.next(s, line)) {
    // A blank line is no JSON document: a typed stream skips it (an untyped one sends it, empty).
    if (in.to_wire && line.find_first_not_of(" \t") == std::string::npos) continue;
    if (s.write_wait(decoded(in, line)) != write_result::ok) return false;
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
  std::exception_ptr printing_failed;
  std::thread printer([&] {
    try {
      while (const auto m = s.read()) print_message(text(*m), in);
    } catch (...) {
      printing_failed = std::current_exception();
      s.cancel();
    }
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
  if (printing_failed) std::rethrow_exception(printing_failed);
  const call_result r = s.finish();
  if (!r.ok()) throw call_failure(method, r, options.timeout);
  // A client stream's one answer; any stream may end with a payload too (finish(reply)). A typed
  // stream's handler may finish() without an answer: no bytes are no message to print as JSON.
  const bool untyped_answer = kind == stream_kind::client && !in.to_line;
  if (untyped_answer || !r.payload.empty()) print_message(r.payload_string(), in);
  return 0;
}

}  // namespace ringrpc::tools

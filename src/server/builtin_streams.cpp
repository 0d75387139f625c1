// The built-in streaming methods of ringrpc-server (docs/design/streams.md): `generate`, a
// server stream made to order, and `echo_stream`, a bidi stream that sends every message back.
// Both keep to credit the way a handler should: generate writes until would_block and goes on
// in on_writable; echo_stream pauses its reading while a message waits for credit, so a client
// that sends and never reads is held back by its own credit, not buffered.
#include <charconv>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "server/builtin_methods.hpp"

namespace ringrpc::detail {

namespace {

// The largest message generate makes: a frame any client with default limits takes whole.
constexpr std::uint64_t max_generated_bytes = 1u << 20;

// "N BYTES": N messages of BYTES bytes each ('x'), then the end.
class generate_handler final : public stream_handler {
 public:
  generate_handler(std::uint64_t count, std::size_t bytes) : _left(count), _message(bytes, std::byte{'x'}) {}

  void on_writable(server_stream& s) override {
    while (_left > 0) {
      if (s.write(_message) != write_result::ok) return;  // on_writable comes back, or the end
      --_left;
    }
    s.finish();
  }

 private:
  std::uint64_t _left;
  std::vector<std::byte> _message;
};

class echo_stream_handler final : public stream_handler {
 public:
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    if (s.write(m) == write_result::ok) return;
    // No credit: keep this one message and read no further until it is out.
    _waiting.assign(m.begin(), m.end());
    _has_waiting = true;
    s.pause_reading();
  }
  void on_writable(server_stream& s) override {
    if (!_has_waiting || s.write(_waiting) != write_result::ok) return;
    _has_waiting = false;
    s.resume_reading();
  }
  void on_half_close(server_stream& s) override { s.finish(); }  // after every message echoed

 private:
  std::vector<std::byte> _waiting;
  bool _has_waiting = false;
};

bool parse_count(const char*& p, const char* end, std::uint64_t& out) {
  const auto [next, ec] = std::from_chars(p, end, out);
  if (ec != std::errc() || next == p) return false;
  p = next;
  return true;
}

}  // namespace

void add_stream_methods(server& s) {
  s.add_stream_method("generate", stream_kind::server, [](server_stream& st, std::span<const std::byte> request) {
    const char* p = reinterpret_cast<const char*>(request.data());
    const char* end = p + request.size();
    std::uint64_t count = 0, bytes = 0;
    const bool ok = parse_count(p, end, count) && p != end && *p++ == ' ' && parse_count(p, end, bytes) &&
                    p == end && bytes <= max_generated_bytes;
    if (!ok) {
      st.fail(status::bad_request, "payload must be \"N BYTES\": N messages of BYTES bytes each (BYTES at most " +
                                       std::to_string(max_generated_bytes) + ")");
      return std::make_unique<stream_handler>();
    }
    auto h = std::make_unique<generate_handler>(count, static_cast<std::size_t>(bytes));
    h->on_writable(st);
    return std::unique_ptr<stream_handler>(std::move(h));
  });
  s.add_stream_method("echo_stream", stream_kind::bidi, [](server_stream&, std::span<const std::byte>) {
    return std::make_unique<echo_stream_handler>();
  });
}

}  // namespace ringrpc::detail

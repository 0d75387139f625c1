// Writes the seed corpus of frame_fuzz (tests/fuzz/corpus/frame/), or with `stream` that of
// stream_fuzz (tests/fuzz/corpus/stream/). Run by hand after a change to the wire format, then
// commit the files:
//   ninja -C build/fuzz tests/fuzz/make_corpus && build/fuzz/tests/fuzz/make_corpus tests/fuzz/corpus/frame
//   build/fuzz/tests/fuzz/make_corpus tests/fuzz/corpus/stream stream
// Output is deterministic, so re-running it on an unchanged format changes nothing.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "wire/frame_codec.hpp"

namespace {

using ringrpc::detail::frame_encoder;
using ringrpc::detail::frame_view;
namespace wire = ringrpc::wire;
using bytes = std::vector<std::byte>;

bytes encode(const frame_view& f) {
  frame_encoder enc;
  const auto s = enc.encode(f);
  return {s.begin(), s.end()};
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

bool write(const std::string& dir, const char* name, const bytes& b) {
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    return false;
  }
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

frame_view stream_frame(std::uint64_t id, wire::Kind kind) {
  frame_view f;
  f.call_id = id;
  f.kind = kind;
  return f;
}

void append(bytes& to, const frame_view& f) {
  const bytes b = encode(f);
  to.insert(to.end(), b.begin(), b.end());
}

frame_view stream_open(std::uint64_t id, const char* method, std::uint8_t kind, std::uint32_t messages,
                       std::uint64_t bytes_window) {
  frame_view f = stream_frame(id, wire::Kind::StreamOpen);
  f.method = method;
  f.stream_kind = kind;
  f.credit_messages = messages;
  f.credit_bytes = bytes_window;
  return f;
}

frame_view stream_message(std::uint64_t id, std::string_view payload) {
  frame_view f = stream_frame(id, wire::Kind::StreamMessage);
  f.payload = as_bytes(payload);
  return f;
}

frame_view stream_credit(std::uint64_t id, std::uint32_t messages, std::uint64_t bytes_granted) {
  frame_view f = stream_frame(id, wire::Kind::StreamCredit);
  f.credit_messages = messages;
  f.credit_bytes = bytes_granted;
  return f;
}

// stream_fuzz's seeds: each a client's side of one connection, as wire bytes.
int write_stream_corpus(const std::string& dir) {
  bytes bidi;  // docs/protocol.md 13: an echo_stream exchange
  append(bidi, stream_open(1, "echo_stream", 3, 4, 64));
  for (const char* m : {"one", "two", "three"}) append(bidi, stream_message(1, m));
  append(bidi, stream_credit(1, 2, 6));
  append(bidi, stream_frame(1, wire::Kind::StreamHalfClose));
  append(bidi, stream_message(1, "late"));  // in flight when the end crossed it

  bytes server;  // generate, granted as read, then cancelled
  frame_view gen = stream_open(3, "generate", 1, 2, 0);
  gen.payload = as_bytes("5 10");
  append(server, gen);
  for (int i = 0; i < 3; ++i) append(server, stream_credit(3, 1, 10));
  append(server, stream_frame(3, wire::Kind::Cancel));

  bytes beyond;  // a client stream that writes past the default window of 16
  append(beyond, stream_open(5, "sum", 2, 0, 0));
  for (int i = 0; i < 20; ++i) append(beyond, stream_message(5, "x"));

  bytes overflow;  // grants past the maxima, then frames for ids never opened
  append(overflow, stream_open(7, "echo_stream", 3, UINT32_MAX, UINT64_MAX));
  append(overflow, stream_credit(7, UINT32_MAX, UINT64_MAX));
  append(overflow, stream_message(8, "stray"));
  append(overflow, stream_frame(9, wire::Kind::StreamHalfClose));
  append(overflow, stream_open(10, "echo_stream", 0, 0, 0));  // stream_kind 0: not a stream

  bytes many;  // past the 100 open streams of a connection, then every one cancelled
  for (std::uint64_t id = 1; id <= 110; ++id) append(many, stream_open(id, "echo_stream", 3, 1, 1));
  for (std::uint64_t id = 1; id <= 110; ++id) append(many, stream_frame(id, wire::Kind::Cancel));
  for (std::uint64_t id = 1; id <= 110; id += 7) append(many, stream_message(id, "late?"));

  return write(dir, "bidi_exchange", bidi) && write(dir, "server_stream_cancel", server) &&
                 write(dir, "beyond_credit", beyond) && write(dir, "credit_overflow_strays", overflow) &&
                 write(dir, "many_streams", many)
             ? 0
             : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string_view(argv[2]) == "stream")) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR [stream]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  if (argc == 3) return write_stream_corpus(dir);

  frame_view req;
  req.call_id = 1;
  req.kind = wire::Kind::Request;
  req.method = "echo";
  req.timeout_us = 1'000'000;
  req.payload = as_bytes("hello, ringrpc");
  const bytes request = encode(req);

  frame_view reply;
  reply.call_id = 1;
  reply.kind = wire::Kind::Reply;
  reply.payload = as_bytes("hello, ringrpc");
  const bytes reply_b = encode(reply);

  frame_view err;
  err.call_id = 2;
  err.kind = wire::Kind::Error;
  err.code = ringrpc::status::unknown_method;
  err.message = "unknown method: nope";
  const bytes error_b = encode(err);

  frame_view busy;
  busy.call_id = 3;
  busy.kind = wire::Kind::Error;
  busy.code = ringrpc::status::server_busy;
  busy.message = "call queue full";
  busy.retry_after_ms = 50;
  const bytes busy_b = encode(busy);

  frame_view ping;
  ping.call_id = 4;
  ping.kind = wire::Kind::Ping;
  const bytes ping_b = encode(ping);

  frame_view oneway;
  oneway.call_id = 5;
  oneway.kind = wire::Kind::OneWay;
  oneway.method = "log";
  oneway.payload = as_bytes("fire and forget");
  const bytes oneway_b = encode(oneway);

  frame_view bad_kind = req;  // a well-formed FlatBuffer whose kind the schema does not know
  bad_kind.call_id = 6;
  bad_kind.kind = static_cast<wire::Kind>(200);
  const bytes bad_kind_b = encode(bad_kind);

  // Response headers and trailers (docs/protocol.md 3.2), and an error with details and a
  // status appended later (3.3): the answers of ringrpc-server's mirror and fail shown there.
  const std::vector<ringrpc::metadata_entry> region = {{"region", "eu"}}, pairs1 = {{"pairs", "1"}},
                                             pairs0 = {{"pairs", "0"}};
  const ringrpc::detail::metadata_to_send region_out{{}, region}, pairs1_out{{}, pairs1}, pairs0_out{{}, pairs0};
  frame_view mirrored;
  mirrored.call_id = 1;
  mirrored.kind = wire::Kind::Reply;
  mirrored.payload = as_bytes("hi");
  mirrored.metadata_out = &region_out;
  mirrored.trailers_out = &pairs1_out;
  const bytes mirrored_b = encode(mirrored);
  frame_view detailed;
  detailed.call_id = 2;
  detailed.kind = wire::Kind::Error;
  detailed.code = ringrpc::status::not_found;
  detailed.message = "failed as asked";
  const std::byte details[] = {std::byte{0x08}, std::byte{0x05}};
  detailed.details = details;
  detailed.trailers_out = &pairs0_out;
  const bytes detailed_b = encode(detailed);

  bytes two = request;
  two.insert(two.end(), ping_b.begin(), ping_b.end());

  bytes truncated(request.begin(), request.end() - 3);

  // Prefix claims ~4 GiB; a few body bytes follow.
  const bytes oversized = {std::byte{0xf0}, std::byte{0xff}, std::byte{0xff}, std::byte{0xff},
                           std::byte{0x01}, std::byte{0x02}, std::byte{0x03}, std::byte{0x04}};

  // A valid prefix followed by a body of noise.
  bytes garbage = {std::byte{60}, std::byte{0}, std::byte{0}, std::byte{0}};
  std::uint32_t x = 0x12345678;  // xorshift32, fixed seed: the file never changes
  for (int i = 0; i < 60; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    garbage.push_back(static_cast<std::byte>(x));
  }

  const bytes empty_body = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}};

  const bool ok = write(dir, "echo_request", request) && write(dir, "reply", reply_b) &&
                  write(dir, "error_unknown_method", error_b) &&
                  write(dir, "error_server_busy", busy_b) && write(dir, "ping", ping_b) &&
                  write(dir, "oneway", oneway_b) && write(dir, "unknown_kind", bad_kind_b) &&
                  write(dir, "two_frames", two) && write(dir, "truncated", truncated) &&
                  write(dir, "oversized_prefix", oversized) && write(dir, "garbage", garbage) &&
                  write(dir, "empty_body", empty_body) && write(dir, "reply_headers_trailers", mirrored_b) &&
                  write(dir, "error_details", detailed_b);
  return ok ? 0 : 1;
}

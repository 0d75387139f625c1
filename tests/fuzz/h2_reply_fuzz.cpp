// libFuzzer target: ringrpc-load's HTTP/2 reply handling (tools/load/proto_h2.cpp, nghttp2 as
// the state machine) for h2c:// and grpc://, fed whatever a server might send back.
//
// The first input byte picks the scheme (bit 0: h2c or grpc), whether a valid server SETTINGS
// frame is put in front (bit 1, so the fuzzer gets past the preface quickly) and how many
// requests are outstanding (bits 2-4, 1..8); the rest arrives as the server's bytes, in two reads
// split where the second byte says, with the codec's unasked output (acks, WINDOW_UPDATE) taken
// after each. Every reply must consume bytes it was given and no more, answer a request that was
// written, each at most once, and the diagnosis of a bad reply must be one printable line.
// Seeds: tests/fuzz/corpus/h2_reply, written by tests/fuzz/make_h2_corpus.py.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "sniff.hpp"

namespace {

using namespace ringrpc::load;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "h2_reply_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const bool grpc = (data[0] & 1) != 0;
  const bool settings_first = (data[0] & 2) != 0;
  const unsigned outstanding = 1 + (data[0] >> 2) % 8;
  const target t = parse_target(grpc ? "grpc://127.0.0.1:1/p.S/M" : "h2c://127.0.0.1:1/");
  codec_options options;
  options.payload.assign(8, std::byte{'x'});
  options.max_reply_bytes = 1 << 16;
  const auto proto = make_protocol(t, options);
  auto codec = proto->new_connection();
  const auto kinds = proto->default_kinds();
  std::vector<std::byte> out;
  for (unsigned i = 0; i < outstanding; ++i) codec->write_request(out, i, kinds[0]);

  std::vector<std::byte> input;
  if (settings_first) {
    input.assign(9, std::byte{0});  // an empty SETTINGS frame: length 0, type 4, stream 0
    input[3] = std::byte{4};
  }
  input.insert(input.end(), reinterpret_cast<const std::byte*>(data + 2), reinterpret_cast<const std::byte*>(data + size));
  const std::span<const std::byte> all(input);
  const std::size_t split = std::min<std::size_t>(all.size(), data[1] * all.size() / 255);
  std::vector<std::byte> buffer;
  std::vector<bool> answered(outstanding, false);
  for (const auto part : {all.first(split), all.subspan(split)}) {
    buffer.insert(buffer.end(), part.begin(), part.end());
    while (!buffer.empty()) {
      const reply r = codec->parse_reply(buffer);
      if (r.status == reply_status::incomplete) break;
      if (r.status == reply_status::protocol_error) {
        const std::string line = diagnose_reply(t, std::span(buffer).first(std::min<std::size_t>(buffer.size(), 64)), r.error);
        for (const char c : line) {
          if (c == '\n' || c == '\r' || c == '\0') bug("a diagnosis spans lines");
        }
        return 0;
      }
      if (r.consumed == 0 || r.consumed > buffer.size()) bug("a reply consumed nothing or more than it was given");
      if (r.status != reply_status::no_reply) {
        if (r.seq >= outstanding) bug("a reply answers a request never written");
        if (answered[r.seq]) bug("a request answered twice");
        answered[r.seq] = true;
        if (r.status == reply_status::error_reply && r.error.empty()) bug("an error reply without its kind");
      }
      buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.consumed));
    }
    out.clear();
    codec->write_pending(out);
  }
  return 0;
}

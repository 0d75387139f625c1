// libFuzzer target: ringrpc-load's HTTP/2 reply handling for h2c:// and grpc:// (its own client,
// tools/load/proto_h2.cpp, with nghttp2's HPACK decoder) and grpc:// --stream's (nghttp2's
// session, proto_grpc_stream.cpp), fed whatever a server might send back.
//
// The first input byte picks the scheme (bit 0: h2c or grpc), whether a valid server SETTINGS
// frame is put in front (bit 1, so the fuzzer gets past the preface quickly) and how many
// requests are outstanding (bits 2-4, 1..8), and for grpc whether it is --stream's one bidi call
// carrying them as messages (bit 5); the rest arrives as the server's bytes, in two reads
// split where the second byte says, with the codec's unasked output (acks, WINDOW_UPDATE) taken
// after each. Every reply must consume bytes it was given and no more, answer a request that was
// written, each at most once, and the diagnosis of a bad reply must be one printable line.
// Seeds: tests/fuzz/corpus/h2_reply, written by tests/fuzz/make_h2_corpus.py.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reply_fuzz.hpp"

using namespace ringrpc::load;
using ringrpc::fuzz::bug;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const bool grpc = (data[0] & 1) != 0;
  const bool settings_first = (data[0] & 2) != 0;
  const unsigned outstanding = 1 + (data[0] >> 2) % 8;
  const bool stream = grpc && (data[0] & 32) != 0;
  const target t = parse_target(grpc ? "grpc://127.0.0.1:1/p.S/M" : "h2c://127.0.0.1:1/");
  ringrpc::fuzz::reply_rig rig(t, outstanding, stream);

  std::vector<std::byte> input;
  if (settings_first) {
    input.assign(9, std::byte{0});  // an empty SETTINGS frame: length 0, type 4, stream 0
    input[3] = std::byte{4};
  }
  input.insert(input.end(), reinterpret_cast<const std::byte*>(data + 2), reinterpret_cast<const std::byte*>(data + size));
  const std::span<const std::byte> all(input);
  const std::size_t split = std::min<std::size_t>(all.size(), data[1] * all.size() / 255);
  std::vector<bool> answered(outstanding, false);
  std::vector<std::byte> out;
  for (const auto part : {all.first(split), all.subspan(split)}) {
    const bool open = rig.feed(part, [&](const reply& r) {
      if (r.status != reply_status::no_reply) {
        if (r.seq >= outstanding) bug("a reply answers a request never written");
        if (answered[r.seq]) bug("a request answered twice");
        answered[r.seq] = true;
        if (r.status == reply_status::error_reply && r.error.empty()) bug("an error reply without its kind");
      }
    });
    if (!open) return 0;
    out.clear();
    rig.codec().write_pending(out);
  }
  return 0;
}

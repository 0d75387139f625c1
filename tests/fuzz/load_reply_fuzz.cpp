// libFuzzer target: ringrpc-load's reply parsers (tools/load/proto_*.cpp) and the protocol
// diagnosis (tools/load/sniff.cpp), fed whatever a server might send back.
//
// The first input byte picks the scheme (ringrpc, echo, redis, http) and how many requests are
// outstanding; the rest arrives as the server's bytes, in two reads split where the second byte
// says. Every reply must consume bytes it was given and no more, and each call is answered at
// most once; the diagnosis of any input must be a single printable line.

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
  std::fprintf(stderr, "load_reply_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  static const char* const urls[] = {"ringrpc://127.0.0.1:1/echo", "echo://127.0.0.1:1", "redis://127.0.0.1:1",
                                     "http://127.0.0.1:1/"};
  const target t = parse_target(urls[data[0] % 4]);
  const unsigned outstanding = 1 + (data[0] >> 2) % 8;
  codec_options options;
  options.payload.assign(8, std::byte{'x'});
  options.max_reply_bytes = 1 << 16;
  const auto proto = make_protocol(t, options);
  auto codec = proto->new_connection();
  const auto kinds = proto->default_kinds();
  std::vector<std::byte> out;
  for (unsigned i = 0; i < outstanding; ++i) codec->write_request(out, i, kinds[0]);

  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data + 2), size - 2);
  const std::size_t split = std::min<std::size_t>(input.size(), data[1] * input.size() / 255);
  std::vector<std::byte> buffer;
  std::vector<bool> answered(outstanding, false);
  bool stopped = false;
  for (const auto part : {input.first(split), input.subspan(split)}) {
    if (stopped) break;
    buffer.insert(buffer.end(), part.begin(), part.end());
    while (!buffer.empty()) {
      const reply r = codec->parse_reply(buffer);
      if (r.status == reply_status::incomplete) break;
      if (r.status == reply_status::protocol_error) {
        // What the engine does with it: the diagnosis of the bytes, one printable line.
        const std::string line = diagnose_reply(t, std::span(buffer).first(std::min<std::size_t>(buffer.size(), 64)), r.error);
        for (const char c : line) {
          if (c == '\n' || c == '\r' || c == '\0') bug("a diagnosis spans lines");
        }
        stopped = true;
        break;
      }
      if (r.consumed == 0 || r.consumed > buffer.size()) bug("a reply consumed nothing or more than it was given");
      // ringrpc replies name their call; a call id never asked for is the engine's to reject.
      if (t.scheme != "ringrpc") {
        if (r.seq >= outstanding) bug("a reply answers a request never written");
        if (answered[r.seq]) bug("a request answered twice");
      }
      if (r.seq < outstanding) answered[r.seq] = true;
      buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.consumed));
    }
  }
  (void)sniff_protocol(input);
  return 0;
}

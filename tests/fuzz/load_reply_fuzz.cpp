// libFuzzer target: ringrpc-load's reply parsers (tools/load/proto_*.cpp) and the protocol
// diagnosis (tools/load/sniff.cpp), fed whatever a server might send back.
//
// The first input byte picks the scheme (ringrpc, echo, redis, http) and how many requests are
// outstanding; the rest arrives as the server's bytes, in two reads split where the second byte
// says. Every reply must consume bytes it was given and no more, and each call is answered at
// most once; the diagnosis of any input must be a single printable line.

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
  static const char* const urls[] = {"ringrpc://127.0.0.1:1/echo", "echo://127.0.0.1:1", "redis://127.0.0.1:1",
                                     "http://127.0.0.1:1/"};
  const target t = parse_target(urls[data[0] % 4]);
  const unsigned outstanding = 1 + (data[0] >> 2) % 8;
  ringrpc::fuzz::reply_rig rig(t, outstanding);

  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data + 2), size - 2);
  const std::size_t split = std::min<std::size_t>(input.size(), data[1] * input.size() / 255);
  std::vector<bool> answered(outstanding, false);
  for (const auto part : {input.first(split), input.subspan(split)}) {
    const bool open = rig.feed(part, [&](const reply& r) {
      // ringrpc replies name their call; a call id never asked for is the engine's to reject.
      if (t.scheme != "ringrpc") {
        if (r.seq >= outstanding) bug("a reply answers a request never written");
        if (answered[r.seq]) bug("a request answered twice");
      }
      if (r.seq < outstanding) answered[r.seq] = true;
    });
    if (!open) break;
  }
  (void)sniff_protocol(input);
  return 0;
}

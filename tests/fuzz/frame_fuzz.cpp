// libFuzzer target: arbitrary bytes through the receive path of a reader —
// frame_assembler (reassembly across slices, pause/hold/drain) then decode_frame (verification),
// and every frame that decodes is re-encoded with frame_encoder and must decode to the same fields.
//
// The whole input is the byte stream. How it is cut into slices, when the sink pauses and the
// frame limit are drawn from a PRNG seeded with a hash of the input, so each input is replayed
// deterministically and the seeds in corpus/ stay plain wire bytes.
//
// Invariants checked (abort on violation):
//  - the frames delivered are exactly those a straightforward parse of the whole stream finds,
//    in order, whatever the slicing and pausing; frame_too_large iff that parse hits a prefix
//    above the limit; buffered() equals the unparsed tail otherwise;
//  - decode(encode(decode(frame))) == decode(frame) field by field, request metadata / response
//    headers, trailers, error details and the stream fields (kind, credit) included.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_prng.hpp"
#include "wire/frame_assembler.hpp"
#include "wire/frame_codec.hpp"

namespace {

using namespace ringrpc;
using namespace ringrpc::detail;

using fuzz::fnv1a;
using fuzz::prng;

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Pairs of a decoded metadata vector (request metadata, response headers or trailers), in order.
std::vector<metadata_entry> pairs_of(const void* vector) {
  std::vector<metadata_entry> out;
  for (const metadata_item item : metadata_view(vector)) out.push_back({std::string(item.key), std::string(item.value)});
  return out;
}

bool same_pairs(const void* a, const void* b) {
  const auto pa = pairs_of(a), pb = pairs_of(b);
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].key != pb[i].key || pa[i].value != pb[i].value) return false;
  }
  return true;
}

bool same_fields(const frame_view& a, const frame_view& b) {
  return a.call_id == b.call_id && a.kind == b.kind && a.method == b.method &&
         a.timeout_us == b.timeout_us && same_bytes(a.payload, b.payload) && a.code == b.code &&
         a.message == b.message && a.retry_after_ms == b.retry_after_ms && same_bytes(a.details, b.details) &&
         same_pairs(a.metadata, b.metadata) && same_pairs(a.trailers, b.trailers) &&
         a.stream_kind == b.stream_kind && a.credit_messages == b.credit_messages && a.credit_bytes == b.credit_bytes;
}

// Decodes one complete frame from an 8-byte aligned copy; re-encodes what decodes and checks
// the round trip.
void check_frame(std::span<const std::byte> frame, frame_encoder& enc) {
  // operator new aligns to at least 16 bytes, which decode_frame's 8-byte requirement needs.
  const std::vector<std::byte> copy(frame.begin(), frame.end());
  frame_view view;
  const decode_outcome out = decode_frame(copy, view);
  if (out != decode_outcome::ok) {
    if (out == decode_outcome::malformed) FUZZ_CHECK(view.call_id == 0);
    return;
  }
  // The pairs go back out as the encoder sends them (copies: the views point into `copy`).
  const std::vector<metadata_entry> headers = pairs_of(view.metadata), trailers = pairs_of(view.trailers);
  const metadata_to_send headers_out{{}, headers}, trailers_out{{}, trailers};
  view.metadata_out = &headers_out;
  view.trailers_out = &trailers_out;
  std::vector<std::byte> again;
  enc.encode_into(view, again);
  FUZZ_CHECK(again.size() >= frame_prefix_bytes);
  FUZZ_CHECK(read_frame_length(again.data()) == again.size() - frame_prefix_bytes);
  frame_view view2;
  FUZZ_CHECK(decode_frame(again, view2) == decode_outcome::ok);
  FUZZ_CHECK(same_fields(view, view2));
}

// The reference: frames of the whole stream, parsed the obvious way.
struct reference {
  std::vector<std::span<const std::byte>> frames;
  bool too_large = false;
  std::size_t tail = 0;  // bytes left after the last whole frame (when !too_large)
};

reference parse_whole(std::span<const std::byte> data, std::uint32_t max_body) {
  reference r;
  std::size_t pos = 0;
  while (data.size() - pos >= frame_prefix_bytes) {
    const std::uint32_t body = read_frame_length(data.data() + pos);
    if (body > max_body) {
      r.too_large = true;
      return r;
    }
    const std::size_t whole = frame_prefix_bytes + static_cast<std::size_t>(body);
    if (data.size() - pos < whole) break;
    r.frames.push_back(data.subspan(pos, whole));
    pos += whole;
  }
  r.tail = data.size() - pos;
  return r;
}

std::uint32_t pick_limit(prng& rng) {
  switch (rng.below(8)) {
    case 0: return 0;
    case 1: return static_cast<std::uint32_t>(rng.below(64));
    case 2: return 4096;
    case 3: return 1u << 20;
    default: return 64 * 1024;
  }
}

std::size_t pick_slice(prng& rng, std::size_t left) {
  std::size_t n;
  switch (rng.below(4)) {
    case 0: n = 1 + rng.below(4); break;    // tiny: split prefixes
    case 1: n = 1 + rng.below(32); break;
    case 2: n = 1 + rng.below(512); break;
    default: n = left; break;               // everything that is left
  }
  return n < left ? n : left;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const std::span<const std::byte> data(reinterpret_cast<const std::byte*>(raw), size);
  prng rng{fnv1a(raw, size)};
  const std::uint32_t limit = pick_limit(rng);
  const reference ref = parse_whole(data, limit);

  static frame_encoder enc;  // one per thread, like the server's
  frame_assembler asmb(limit);

  // Sink: records each frame, checks it against the reference, and sometimes asks to pause.
  std::size_t delivered = 0;
  const std::uint64_t pause_every = rng.below(4) == 0 ? 0 : 1 + rng.below(3);  // 0 = never
  auto sink = [&](std::span<const std::byte> frame) {
    FUZZ_CHECK(delivered < ref.frames.size());
    FUZZ_CHECK(same_bytes(frame, ref.frames[delivered]));
    ++delivered;
    check_frame(frame, enc);
    return pause_every == 0 || delivered % pause_every != 0;
  };

  frame_assembler::result r = frame_assembler::result::ok;
  bool paused = false;
  std::size_t pos = 0;
  while (pos < data.size() && r != frame_assembler::result::frame_too_large) {
    const std::size_t n = pick_slice(rng, data.size() - pos);
    const auto slice = data.subspan(pos, n);
    pos += n;
    if (paused) {
      switch (rng.below(3)) {
        case 0:  // the owner keeps the stream paused a while longer
          asmb.hold(slice);
          continue;
        case 1:  // the owner resumes: keep the slice, then deliver
          asmb.hold(slice);
          r = asmb.drain(sink);
          break;
        default:  // feeding a paused assembler resumes it too
          r = asmb.feed(slice, sink);
          break;
      }
    } else {
      r = asmb.feed(slice, sink);
    }
    paused = r == frame_assembler::result::paused;
  }
  // End of stream: deliver whatever is still held back.
  while (r == frame_assembler::result::paused) r = asmb.drain(sink);

  if (ref.too_large) {
    FUZZ_CHECK(r == frame_assembler::result::frame_too_large);
    FUZZ_CHECK(asmb.rejected_length() > limit);
    FUZZ_CHECK(delivered == ref.frames.size());
  } else {
    FUZZ_CHECK(r == frame_assembler::result::ok);
    FUZZ_CHECK(delivered == ref.frames.size());
    FUZZ_CHECK(asmb.buffered() == ref.tail);
  }
  return 0;
}

// Frame codec and assembler throughput: what one call costs on the wire path before any I/O.
//
//   BM_EncodeEchoRequest      encode a Request "echo" with a 64-byte payload
//   BM_DecodeEchoRequest      verify + read every field of that frame
//   BM_ReplyRoundTrip         encode a Reply (64-byte payload), then verify + decode it
//   BM_AssembleFrames         split a buffer of 100 back-to-back 64-byte-payload frames, fed as
//                             one slice (zero-copy path) and as 1500-byte slices (copying path)
//
// items/s counts frames.

#include "wire/frame_assembler.hpp"
#include "wire/frame_codec.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace ringrpc::detail;
using ringrpc::wire::Kind;

std::vector<std::byte> payload64() {
  std::vector<std::byte> p(64);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>(i * 7);
  return p;
}

frame_view echo_request(std::span<const std::byte> payload, std::uint64_t id) {
  frame_view f;
  f.call_id = id;
  f.kind = Kind::Request;
  f.method = "echo";
  f.timeout_us = 1'000'000;
  f.payload = payload;
  return f;
}

// decode_frame wants 8-byte alignment: copy into u64 storage.
struct aligned_copy {
  std::vector<std::uint64_t> words;
  std::size_t size = 0;
  explicit aligned_copy(std::span<const std::byte> b) : words((b.size() + 7) / 8), size(b.size()) {
    std::memcpy(words.data(), b.data(), b.size());
  }
  std::span<const std::byte> span() const {
    return {reinterpret_cast<const std::byte*>(words.data()), size};
  }
};

void BM_EncodeEchoRequest(benchmark::State& state) {
  const auto payload = payload64();
  frame_encoder enc;
  std::uint64_t id = 0;
  for (auto _ : state) {
    auto bytes = enc.encode(echo_request(payload, ++id));
    benchmark::DoNotOptimize(bytes.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeEchoRequest);

void BM_DecodeEchoRequest(benchmark::State& state) {
  const auto payload = payload64();
  frame_encoder enc;
  const aligned_copy frame(enc.encode(echo_request(payload, 42)));
  state.SetLabel(std::to_string(frame.size) + " B/frame");
  for (auto _ : state) {
    frame_view v;
    const auto r = decode_frame(frame.span(), v);
    if (r != decode_outcome::ok) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(frame.size));
}
BENCHMARK(BM_DecodeEchoRequest);

void BM_ReplyRoundTrip(benchmark::State& state) {
  const auto payload = payload64();
  frame_encoder enc;
  std::vector<std::uint64_t> buf(64);  // aligned scratch for the encoded reply
  std::uint64_t id = 0;
  for (auto _ : state) {
    frame_view f;
    f.call_id = ++id;
    f.kind = Kind::Reply;
    f.payload = payload;
    const auto bytes = enc.encode(f);
    if (bytes.size() > buf.size() * 8) buf.resize((bytes.size() + 7) / 8);
    std::memcpy(buf.data(), bytes.data(), bytes.size());
    frame_view v;
    const auto r =
        decode_frame({reinterpret_cast<const std::byte*>(buf.data()), bytes.size()}, v);
    if (r != decode_outcome::ok) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReplyRoundTrip);

void BM_AssembleFrames(benchmark::State& state) {
  constexpr int frames_per_buffer = 100;
  const std::size_t slice = static_cast<std::size_t>(state.range(0));  // 0 = whole buffer
  const auto payload = payload64();
  frame_encoder enc;
  std::vector<std::byte> stream;
  for (int i = 0; i < frames_per_buffer; ++i) {
    const auto b = enc.encode(echo_request(payload, static_cast<std::uint64_t>(i)));
    stream.insert(stream.end(), b.begin(), b.end());
  }
  frame_assembler a(1 << 20);
  std::size_t seen = 0;
  auto sink = [&](std::span<const std::byte> f) {
    seen += f.size();
    benchmark::DoNotOptimize(f.data());
    return true;
  };
  for (auto _ : state) {
    const std::span<const std::byte> all(stream);
    if (slice == 0) {
      a.feed(all, sink);
    } else {
      for (std::size_t off = 0; off < all.size(); off += slice) {
        a.feed(all.subspan(off, std::min(slice, all.size() - off)), sink);
      }
    }
  }
  if (seen != stream.size() * static_cast<std::size_t>(state.iterations())) {
    state.SkipWithError("lost bytes");
  }
  state.SetItemsProcessed(state.iterations() * frames_per_buffer);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(stream.size()));
}
BENCHMARK(BM_AssembleFrames)->Arg(0)->Arg(1500)->ArgName("slice");

}  // namespace

BENCHMARK_MAIN();

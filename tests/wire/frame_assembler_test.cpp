// Tests for frame_assembler (src/wire/frame_assembler.hpp): reassembly across slice boundaries,
// zero-copy delivery, the length limit, pausing and buffered() accounting.
#include "wire/frame_assembler.hpp"

#include "replace_global_new.hpp"
#include "wire/frame_codec.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <new>
#include <random>
#include <span>
#include <string>
#include <vector>

// --- allocation probe --------------------------------------------------------------------------
// Replacing the global operator new lets the oversized-prefix tests check that no allocation of
// the claimed size happens. Only the size of the largest request is recorded, and only while a
// test has switched tracking on.
namespace {
std::atomic<bool> g_track_alloc{false};
std::atomic<std::size_t> g_largest_alloc{0};

void* counted_alloc(std::size_t n) {
  if (g_track_alloc.load(std::memory_order_relaxed)) {
    std::size_t cur = g_largest_alloc.load(std::memory_order_relaxed);
    while (n > cur && !g_largest_alloc.compare_exchange_weak(cur, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

struct alloc_probe {
  alloc_probe() {
    g_largest_alloc.store(0);
    g_track_alloc.store(true);
  }
  ~alloc_probe() { g_track_alloc.store(false); }
  std::size_t largest() const { return g_largest_alloc.load(); }
};
}  // namespace

// Every allocation of this program (replace_global_new.hpp).
void* test_alloc(std::size_t n) { return counted_alloc(n); }

namespace {

using ringrpc::detail::frame_assembler;
using ringrpc::detail::frame_encoder;
using ringrpc::detail::frame_view;
using result = frame_assembler::result;

using bytes = std::vector<std::byte>;

bytes make_frame(std::uint64_t call_id, std::size_t payload_size) {
  bytes payload(payload_size);
  for (std::size_t i = 0; i < payload_size; ++i) {
    payload[i] = static_cast<std::byte>(call_id * 31 + i);
  }
  frame_view f;
  f.call_id = call_id;
  f.method = "echo";
  f.payload = payload;
  frame_encoder enc;
  const auto out = enc.encode(f);
  return bytes(out.begin(), out.end());
}

// A raw frame: prefix + arbitrary body; the assembler never looks inside the body.
bytes raw_frame(std::size_t body, std::uint8_t fill) {
  bytes out(4 + body, static_cast<std::byte>(fill));
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(body >> (8 * i));
  return out;
}

bytes concat(const std::vector<bytes>& parts) {
  bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::span<const std::byte> sub(const bytes& b, std::size_t from, std::size_t n) {
  return std::span<const std::byte>(b).subspan(from, n);
}

struct collector {
  std::vector<bytes> frames;
  bool operator()(std::span<const std::byte> f) {
    frames.emplace_back(f.begin(), f.end());
    return true;
  }
};

std::vector<bytes> three_frames() {
  return {make_frame(1, 10), make_frame(2, 0), make_frame(3, 200)};
}

TEST(FrameAssembler, WholeStreamInOneSlice) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  collector c;
  EXPECT_EQ(a.feed(stream, c), result::ok);
  EXPECT_EQ(c.frames, frames);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, TwoSlicesAtEverySplitPoint) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    frame_assembler a(1 << 20);
    collector c;
    ASSERT_EQ(a.feed(sub(stream, 0, split), c), result::ok) << split;
    ASSERT_EQ(a.feed(sub(stream, split, stream.size() - split), c), result::ok) << split;
    EXPECT_EQ(c.frames, frames) << "split=" << split;
    EXPECT_EQ(a.buffered(), 0u) << "split=" << split;
  }
}

TEST(FrameAssembler, ThreeSlicesAtEverySplitPair) {
  const std::vector<bytes> frames = {make_frame(1, 3), make_frame(2, 0), make_frame(3, 17)};
  const bytes stream = concat(frames);
  for (std::size_t s1 = 0; s1 <= stream.size(); ++s1) {
    for (std::size_t s2 = s1; s2 <= stream.size(); ++s2) {
      frame_assembler a(1 << 20);
      collector c;
      ASSERT_EQ(a.feed(sub(stream, 0, s1), c), result::ok);
      ASSERT_EQ(a.feed(sub(stream, s1, s2 - s1), c), result::ok);
      ASSERT_EQ(a.feed(sub(stream, s2, stream.size() - s2), c), result::ok);
      ASSERT_EQ(c.frames, frames) << "s1=" << s1 << " s2=" << s2;
      ASSERT_EQ(a.buffered(), 0u);
    }
  }
}

TEST(FrameAssembler, OneByteSlices) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  collector c;
  std::size_t delivered_bytes = 0;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    ASSERT_EQ(a.feed(sub(stream, i, 1), c), result::ok);
    delivered_bytes = 0;
    for (const auto& f : c.frames) delivered_bytes += f.size();
    // Everything fed is either delivered or buffered.
    ASSERT_EQ(delivered_bytes + a.buffered(), i + 1);
  }
  EXPECT_EQ(c.frames, frames);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, EmptySliceIsHarmless) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  collector c;
  EXPECT_EQ(a.feed({}, c), result::ok);
  EXPECT_EQ(a.feed(sub(stream, 0, 5), c), result::ok);
  EXPECT_EQ(a.feed({}, c), result::ok);
  EXPECT_EQ(a.buffered(), 5u);
  EXPECT_EQ(a.feed(sub(stream, 5, stream.size() - 5), c), result::ok);
  EXPECT_EQ(c.frames, frames);
}

TEST(FrameAssembler, WholeFrameInSliceIsDeliveredInPlace) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  std::vector<const std::byte*> where;
  std::vector<std::size_t> sizes;
  auto sink = [&](std::span<const std::byte> f) {
    where.push_back(f.data());
    sizes.push_back(f.size());
    return true;
  };
  // The first two frames whole plus part of the third.
  const std::size_t first_two = frames[0].size() + frames[1].size();
  const std::size_t cut = first_two + 7;
  ASSERT_EQ(a.feed(sub(stream, 0, cut), sink), result::ok);
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where[0], stream.data());
  EXPECT_EQ(where[1], stream.data() + frames[0].size());
  EXPECT_EQ(sizes[0], frames[0].size());
  EXPECT_EQ(sizes[1], frames[1].size());
  EXPECT_EQ(a.buffered(), 7u);

  // The rest of the third frame had to be copied: it is not a pointer into either slice.
  ASSERT_EQ(a.feed(sub(stream, cut, stream.size() - cut), sink), result::ok);
  ASSERT_EQ(where.size(), 3u);
  EXPECT_FALSE(where[2] >= stream.data() && where[2] < stream.data() + stream.size());
  EXPECT_EQ(a.buffered(), 0u);

  // With the assembler empty again, a fresh slice is once more delivered in place.
  const bytes next = make_frame(9, 5);
  ASSERT_EQ(a.feed(next, sink), result::ok);
  ASSERT_EQ(where.size(), 4u);
  EXPECT_EQ(where[3], next.data());
}

TEST(FrameAssembler, FrameExactlyAtLimitIsAccepted) {
  const bytes f = raw_frame(100, 0xab);
  frame_assembler a(100);
  collector c;
  EXPECT_EQ(a.feed(f, c), result::ok);
  ASSERT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(c.frames[0], f);
  EXPECT_EQ(a.max_body_bytes(), 100u);
}

TEST(FrameAssembler, OversizedPrefixIsRejectedWithoutAllocating) {
  for (std::uint32_t claimed : {101u, 1u << 20, 0x7fffffffu, 0xffffffffu}) {
    bytes f = raw_frame(0, 0);
    for (int i = 0; i < 4; ++i) f[i] = static_cast<std::byte>(claimed >> (8 * i));
    f.resize(64, std::byte{0x55});  // some body bytes after the bad prefix
    frame_assembler a(100);
    collector c;
    std::size_t largest = 0;
    {
      alloc_probe probe;
      EXPECT_EQ(a.feed(f, c), result::frame_too_large);
      largest = probe.largest();
    }
    EXPECT_EQ(a.rejected_length(), claimed);
    EXPECT_TRUE(c.frames.empty());
    EXPECT_EQ(a.buffered(), 0u);
    EXPECT_LT(largest, 4096u) << "claimed=" << claimed;
  }
}

TEST(FrameAssembler, OversizedPrefixSplitAcrossSlices) {
  const std::uint32_t claimed = 0x40000000;  // 1 GiB
  bytes prefix(4);
  for (int i = 0; i < 4; ++i) prefix[i] = static_cast<std::byte>(claimed >> (8 * i));
  for (std::size_t split = 1; split < 4; ++split) {
    frame_assembler a(1 << 16);
    collector c;
    alloc_probe probe;
    EXPECT_EQ(a.feed(sub(prefix, 0, split), c), result::ok);
    EXPECT_EQ(a.buffered(), split);
    EXPECT_EQ(a.feed(sub(prefix, split, 4 - split), c), result::frame_too_large);
    EXPECT_EQ(a.rejected_length(), claimed);
    EXPECT_LE(a.buffered(), 4u);
    EXPECT_LT(probe.largest(), 4096u);
    EXPECT_TRUE(c.frames.empty());
  }
}

TEST(FrameAssembler, OversizedAfterValidFramesDeliversThoseFirst) {
  const bytes good = raw_frame(10, 1);
  bytes stream = concat({good, good});
  stream.insert(stream.end(), {std::byte{0xff}, std::byte{0xff}, std::byte{0}, std::byte{0}});
  frame_assembler a(1000);
  collector c;
  EXPECT_EQ(a.feed(stream, c), result::frame_too_large);
  EXPECT_EQ(a.rejected_length(), 0xffffu);
  EXPECT_EQ(c.frames.size(), 2u);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, LargeAllowedFramePartlyReceivedCountsOnlyReceivedBytes) {
  frame_assembler a(1 << 20);
  const bytes big = raw_frame(1 << 20, 0x11);
  collector c;
  ASSERT_EQ(a.feed(sub(big, 0, 100), c), result::ok);
  EXPECT_EQ(a.buffered(), 100u);
  ASSERT_EQ(a.feed(sub(big, 100, 5000), c), result::ok);
  EXPECT_EQ(a.buffered(), 5100u);
  ASSERT_EQ(a.feed(sub(big, 5100, big.size() - 5100), c), result::ok);
  ASSERT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(c.frames[0], big);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, PauseKeepsTheRestAndDrainResumesInOrder) {
  const std::vector<bytes> frames = {make_frame(1, 1), make_frame(2, 2), make_frame(3, 3),
                                     make_frame(4, 4)};
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  std::vector<bytes> got;
  int budget = 1;
  auto sink = [&](std::span<const std::byte> f) {
    got.emplace_back(f.begin(), f.end());
    return --budget > 0;
  };
  // The first frame is delivered, then the sink pauses.
  EXPECT_EQ(a.feed(stream, sink), result::paused);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], frames[0]);
  EXPECT_EQ(a.buffered(), stream.size() - frames[0].size());

  // Drain with a budget of two: pauses again after frame 3.
  budget = 2;
  EXPECT_EQ(a.drain(sink), result::paused);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(a.buffered(), frames[3].size());

  budget = 100;
  EXPECT_EQ(a.drain(sink), result::ok);
  EXPECT_EQ(got, frames);
  EXPECT_EQ(a.buffered(), 0u);

  // Draining an empty assembler is a no-op.
  EXPECT_EQ(a.drain(sink), result::ok);
  EXPECT_EQ(got.size(), frames.size());
}

TEST(FrameAssembler, PauseOnLastFrameOfSlice) {
  const std::vector<bytes> frames = {make_frame(1, 8), make_frame(2, 8)};
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  std::vector<bytes> got;
  bool go = false;
  auto sink = [&](std::span<const std::byte> f) {
    got.emplace_back(f.begin(), f.end());
    return go;
  };
  EXPECT_EQ(a.feed(sub(stream, 0, frames[0].size()), sink), result::paused);
  EXPECT_EQ(a.buffered(), 0u);
  // Still paused: hold() keeps the next frame without delivering it.
  a.hold(sub(stream, frames[0].size(), frames[1].size()));
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(a.buffered(), frames[1].size());
  go = true;
  EXPECT_EQ(a.drain(sink), result::ok);
  EXPECT_EQ(got, frames);
}

TEST(FrameAssembler, PauseWithPartialFrameThenFeed) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  std::vector<bytes> got;
  bool go = false;
  auto sink = [&](std::span<const std::byte> f) {
    got.emplace_back(f.begin(), f.end());
    return go;
  };
  const std::size_t cut = frames[0].size() + 3;
  EXPECT_EQ(a.feed(sub(stream, 0, cut), sink), result::paused);
  EXPECT_EQ(a.buffered(), 3u);
  go = true;
  // feed() after a pause delivers kept bytes first, then the new ones.
  EXPECT_EQ(a.feed(sub(stream, cut, stream.size() - cut), sink), result::ok);
  EXPECT_EQ(got, frames);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, HoldThenDrain) {
  const auto frames = three_frames();
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  collector c;
  const std::size_t s1 = 5;
  const std::size_t s2 = frames[0].size() + frames[1].size() + 9;
  a.hold(sub(stream, 0, s1));
  EXPECT_EQ(a.buffered(), s1);
  a.hold(sub(stream, s1, s2 - s1));
  EXPECT_EQ(a.buffered(), s2);
  EXPECT_TRUE(c.frames.empty());
  EXPECT_EQ(a.drain(c), result::ok);
  ASSERT_EQ(c.frames.size(), 2u);
  EXPECT_EQ(a.buffered(), 9u);
  a.hold(sub(stream, s2, stream.size() - s2));
  EXPECT_EQ(c.frames.size(), 2u);
  EXPECT_EQ(a.buffered(), frames[2].size());
  EXPECT_EQ(a.drain(c), result::ok);
  EXPECT_EQ(c.frames, frames);
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(FrameAssembler, HugeFrameSpanningSlicesThenSmallOnes) {
  // Exercises the shrink path (> 256 KiB buffer) and that the assembler keeps working after it.
  const std::vector<bytes> frames = {raw_frame(300 * 1024, 7), raw_frame(3, 8), raw_frame(0, 9)};
  const bytes stream = concat(frames);
  frame_assembler a(1 << 20);
  collector c;
  const std::size_t chunk = 4096;
  for (std::size_t off = 0; off < stream.size(); off += chunk) {
    ASSERT_EQ(a.feed(sub(stream, off, std::min(chunk, stream.size() - off)), c), result::ok);
  }
  EXPECT_EQ(c.frames, frames);
  EXPECT_EQ(a.buffered(), 0u);
}

// Random slicing with random pauses, hold()s and drain()s; the delivered frames must equal the
// sent frames in order, and delivered + buffered must equal everything fed.
TEST(FrameAssembler, RandomizedSlicingAndPausing) {
  std::mt19937 rng(20240601);
  for (int round = 0; round < 200; ++round) {
    std::vector<bytes> frames;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::size_t body = (rng() % 8 == 0) ? rng() % 5000 : rng() % 100;
      frames.push_back(raw_frame(body, static_cast<std::uint8_t>(i)));
    }
    const bytes stream = concat(frames);
    frame_assembler a(8192);
    std::vector<bytes> got;
    std::size_t delivered = 0;
    auto sink = [&](std::span<const std::byte> f) {
      got.emplace_back(f.begin(), f.end());
      delivered += f.size();
      return rng() % 4 != 0;
    };
    bool paused = false;
    std::size_t off = 0;
    while (off < stream.size()) {
      const std::size_t len = std::min<std::size_t>(stream.size() - off, 1 + rng() % 700);
      result r;
      if (paused && rng() % 2 == 0) {
        a.hold(sub(stream, off, len));
        r = result::paused;  // still paused
      } else {
        r = a.feed(sub(stream, off, len), sink);
      }
      off += len;
      ASSERT_NE(r, result::frame_too_large);
      paused = (r == result::paused);
      ASSERT_EQ(delivered + a.buffered(), off);
    }
    for (int guard = 0; guard < 10000 && (paused || a.buffered() > 0); ++guard) {
      const result r = a.drain(sink);
      ASSERT_NE(r, result::frame_too_large);
      paused = (r == result::paused);
      if (!paused) break;
    }
    ASSERT_EQ(a.buffered(), 0u);
    ASSERT_EQ(got, frames) << "round " << round;
  }
}

}  // namespace

// Memory follows the bytes that arrived: a prefix claiming 16 MiB followed by 100 bytes must
// not reserve the claimed frame (the old code resized to the claimed length at once).
TEST(FrameAssembler, ClaimedLengthReservesNothing) {
  frame_assembler a(16u << 20);
  collector c;
  bytes head = raw_frame(16u << 20, 0x5a);
  head.resize(104);  // the prefix and 100 bytes of the body
  EXPECT_EQ(a.feed(sub(head, 0, 4), c), result::ok);
  EXPECT_EQ(a.capacity(), frame_assembler::initial_bytes);
  EXPECT_EQ(a.feed(sub(head, 4, 100), c), result::ok);
  EXPECT_EQ(a.buffered(), 104u);
  EXPECT_LE(a.capacity(), 2 * frame_assembler::initial_bytes);
  EXPECT_TRUE(c.frames.empty());
}

// The buffer grows by doubling as a spanning frame arrives, never past twice what it holds,
// and a big buffer is freed once its frame has been delivered.
TEST(FrameAssembler, GrowsWithArrivalsAndShrinksWhenDone) {
  const bytes big = raw_frame(3u << 20, 0x11);
  frame_assembler a(16u << 20);
  collector c;
  const std::size_t slice = 16 * 1024;
  for (std::size_t off = 0; off < big.size(); off += slice) {
    const std::size_t n = std::min(slice, big.size() - off);
    ASSERT_EQ(a.feed(sub(big, off, n), c), result::ok);
    if (a.buffered() > 0) {
      ASSERT_LE(a.capacity(), std::max<std::size_t>(2 * a.buffered(), frame_assembler::initial_bytes))
          << "at offset " << off;
    }
  }
  ASSERT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(c.frames[0], big);
  EXPECT_EQ(a.buffered(), 0u);
  EXPECT_EQ(a.capacity(), 0u) << "a buffer of a finished huge frame must not stay pinned";
}

// The same after a pause: once everything kept is drained, the big buffer goes.
TEST(FrameAssembler, BigBufferFreedAfterDrain) {
  const bytes big = raw_frame(1u << 20, 0x22);
  frame_assembler a(16u << 20);
  collector c;
  EXPECT_TRUE(a.hold(big));
  EXPECT_GE(a.capacity(), big.size());
  EXPECT_EQ(a.drain(c), result::ok);
  ASSERT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(a.capacity(), 0u);
}

// The shared reassembly with a framer that cannot size a frame ahead (ringrpc-load's HTTP and
// RESP replies): here lines ending in '\n'. Frames whole in a slice go out in place, a
// spanning one is kept, and the kept tail is all the buffer holds afterwards.
namespace {

struct line_framer {
  static constexpr std::size_t initial_bytes = 64;
  static constexpr std::size_t keep_bytes = 256;
  static constexpr bool sizes_ahead = false;
  int measured = 0;
  ringrpc::detail::frame_measure measure(std::span<const std::byte> front) {
    ++measured;
    for (std::size_t i = 0; i < front.size(); ++i) {
      if (front[i] == std::byte{'!'}) return {ringrpc::detail::frame_measure::kind::invalid, i};
      if (front[i] == std::byte{'\n'}) return {ringrpc::detail::frame_measure::kind::whole, i + 1};
    }
    return {ringrpc::detail::frame_measure::kind::need_more, 0};
  }
};

bytes text(std::string_view s) {
  bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

}  // namespace

TEST(FrameAssembler, AFramerThatCannotSizeAheadSplitsAnySlicing) {
  const bytes stream = text("one\ntwo\nthree is longer\n\nfive\n");
  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    ringrpc::detail::basic_frame_assembler<line_framer> a(line_framer{});
    collector c;
    ASSERT_EQ(a.feed(sub(stream, 0, cut), c), ringrpc::detail::basic_frame_assembler<line_framer>::result::ok);
    ASSERT_EQ(a.feed(sub(stream, cut, stream.size() - cut), c),
              ringrpc::detail::basic_frame_assembler<line_framer>::result::ok);
    ASSERT_EQ(c.frames.size(), 5u) << "cut at " << cut;
    EXPECT_EQ(c.frames[2], text("three is longer\n"));
    EXPECT_EQ(a.buffered(), 0u);
  }
}

TEST(FrameAssembler, AFramerRejectionEndsTheStream) {
  ringrpc::detail::basic_frame_assembler<line_framer> a(line_framer{});
  collector c;
  EXPECT_EQ(a.feed(text("ok\npart"), c), ringrpc::detail::basic_frame_assembler<line_framer>::result::ok);
  EXPECT_EQ(a.feed(text("ial!\n"), c), ringrpc::detail::basic_frame_assembler<line_framer>::result::frame_too_large);
  EXPECT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(a.buffered(), 0u);
  a.restart();
  EXPECT_EQ(a.feed(text("again\n"), c), ringrpc::detail::basic_frame_assembler<line_framer>::result::ok);
  EXPECT_EQ(c.frames.size(), 2u);
}

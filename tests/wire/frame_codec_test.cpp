// Tests for frame_encoder / decode_frame (src/wire/frame_codec.hpp) and status names.
#include "wire/frame_codec.hpp"

#include "ringrpc/status.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ringrpc::status;
using ringrpc::detail::decode_frame;
using ringrpc::detail::decode_outcome;
using ringrpc::detail::frame_encoder;
using ringrpc::detail::frame_prefix_bytes;
using ringrpc::detail::frame_view;
using ringrpc::detail::read_frame_length;
using ringrpc::wire::Kind;

// decode_frame needs an 8-byte aligned frame; keep copies in u64 storage.
class aligned_frame {
 public:
  aligned_frame() = default;
  explicit aligned_frame(std::span<const std::byte> bytes) { assign(bytes); }

  void assign(std::span<const std::byte> bytes) {
    _size = bytes.size();
    _storage.assign((bytes.size() + 7) / 8 + 1, 0);
    if (!bytes.empty()) std::memcpy(_storage.data(), bytes.data(), bytes.size());
  }
  std::byte* data() noexcept { return reinterpret_cast<std::byte*>(_storage.data()); }
  const std::byte* data() const noexcept {
    return reinterpret_cast<const std::byte*>(_storage.data());
  }
  std::size_t size() const noexcept { return _size; }
  std::span<const std::byte> span() const noexcept { return {data(), _size}; }
  std::span<const std::byte> prefix(std::size_t n) const noexcept { return {data(), n}; }

  void put_u32(std::size_t offset, std::uint32_t v) noexcept {
    for (int i = 0; i < 4; ++i) data()[offset + i] = static_cast<std::byte>(v >> (8 * i));
  }

 private:
  std::vector<std::uint64_t> _storage;
  std::size_t _size = 0;
};

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed = 1) {
  std::vector<std::byte> out(n);
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

std::string to_str(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

aligned_frame encode(const frame_view& f) {
  frame_encoder enc;
  return aligned_frame(enc.encode(f));
}

void expect_same(const frame_view& want, const frame_view& got) {
  EXPECT_EQ(want.call_id, got.call_id);
  EXPECT_EQ(want.kind, got.kind);
  EXPECT_EQ(want.method, got.method);
  EXPECT_EQ(want.timeout_us, got.timeout_us);
  EXPECT_EQ(to_str(want.payload), to_str(got.payload));
  EXPECT_EQ(want.code, got.code);
  EXPECT_EQ(want.message, got.message);
  EXPECT_EQ(want.retry_after_ms, got.retry_after_ms);
  EXPECT_EQ(want.stream_kind, got.stream_kind);
  EXPECT_EQ(want.credit_messages, got.credit_messages);
  EXPECT_EQ(want.credit_bytes, got.credit_bytes);
}

void round_trip(const frame_view& f) {
  const aligned_frame enc = encode(f);
  ASSERT_GE(enc.size(), frame_prefix_bytes + 8);
  EXPECT_EQ(read_frame_length(enc.data()), enc.size() - frame_prefix_bytes);
  frame_view got;
  got.call_id = 0xdeadbeef;  // decode must reset stale fields
  got.method = "stale";
  ASSERT_EQ(decode_frame(enc.span(), got), decode_outcome::ok);
  expect_same(f, got);
  // Views point into the decoded buffer.
  if (!got.payload.empty()) {
    EXPECT_GE(got.payload.data(), enc.data());
    EXPECT_LE(got.payload.data() + got.payload.size(), enc.data() + enc.size());
  }
}

TEST(FrameCodec, RequestRoundTrip) {
  const auto payload = bytes_of("hello, ringrpc");
  frame_view f;
  f.call_id = 0x0123456789abcdefULL;
  f.kind = Kind::Request;
  f.method = "echo";
  f.timeout_us = 1'500'000;
  f.payload = payload;
  round_trip(f);
}

TEST(FrameCodec, OneWayRoundTrip) {
  const auto payload = pattern(100);
  frame_view f;
  f.call_id = 7;
  f.kind = Kind::OneWay;
  f.method = "log.append";
  f.payload = payload;
  round_trip(f);
}

TEST(FrameCodec, ReplyRoundTrip) {
  const auto payload = pattern(33, 2);
  frame_view f;
  f.call_id = UINT64_MAX;
  f.kind = Kind::Reply;
  f.code = status::ok;
  f.payload = payload;
  round_trip(f);
}

// The hand-laid Reply and StreamMessage frames are Frames the generated verifier accepts,
// decode to what the builder's would, and stay valid when a shorter or longer frame is written
// over them.
class HandLaid : public ::testing::TestWithParam<Kind> {};

TEST_P(HandLaid, DecodesLikeTheBuilders) {
  const Kind kind = GetParam();
  std::vector<std::byte> out;
  for (const std::size_t n : {0, 1, 3, 4, 7, 8, 63, 64, 65, 1000, 70000, 5}) {
    for (const std::uint64_t id : {std::uint64_t{1}, std::uint64_t{0x0102030405060708}, UINT64_MAX}) {
      const auto payload = pattern(n, static_cast<std::uint32_t>(n + id));
      if (kind == Kind::Reply) {
        ringrpc::detail::encode_reply_frame(id, payload, out);
      } else {
        ringrpc::detail::encode_payload_frame(id, kind, payload, out);
      }
      const aligned_frame mine(out);
      EXPECT_EQ(read_frame_length(mine.data()), mine.size() - frame_prefix_bytes);
      frame_view got;
      ASSERT_EQ(decode_frame(mine.span(), got), decode_outcome::ok) << n << " bytes";
      frame_view want;
      want.call_id = id;
      want.kind = kind;
      want.code = status::ok;
      want.payload = payload;
      expect_same(want, got);
      frame_view theirs;
      const aligned_frame built = encode(want);
      ASSERT_EQ(decode_frame(built.span(), theirs), decode_outcome::ok);
      expect_same(theirs, got);
      // Every strict prefix is rejected: no field reaches past the frame's end unchecked.
      if (n < 80) {
        for (std::size_t cut = 0; cut < mine.size(); ++cut) {
          frame_view partial;
          EXPECT_NE(decode_frame(mine.prefix(cut), partial), decode_outcome::ok) << cut;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FrameCodec, HandLaid, ::testing::Values(Kind::Reply, Kind::StreamMessage));

TEST(FrameCodec, ErrorRoundTrip) {
  frame_view f;
  f.call_id = 42;
  f.kind = Kind::Error;
  f.code = status::server_busy;
  f.message = "call queue full";
  f.retry_after_ms = 250;
  round_trip(f);

  for (auto s : {status::unknown_method, status::bad_request, status::frame_too_large,
                 status::deadline_exceeded, status::shutting_down, status::internal,
                 status::cancelled}) {
    f.code = s;
    f.message = ringrpc::to_string(s);
    f.retry_after_ms = 0;
    round_trip(f);
  }
}

TEST(FrameCodec, CancelPingPongRoundTrip) {
  for (Kind k : {Kind::Cancel, Kind::Ping, Kind::Pong}) {
    frame_view f;
    f.call_id = 1000 + static_cast<unsigned>(k);
    f.kind = k;
    round_trip(f);
  }
}

// The stream kinds and their fields (docs/design/streams.md) round-trip, extremes included.
TEST(FrameCodec, StreamFramesRoundTrip) {
  const auto payload = bytes_of("one message");
  frame_view open;
  open.call_id = 7;
  open.kind = Kind::StreamOpen;
  open.method = "echo_stream";
  open.timeout_us = 2'000'000;
  open.stream_kind = 3;
  open.credit_messages = 16;
  open.credit_bytes = 256 * 1024;
  round_trip(open);
  frame_view message;
  message.call_id = 7;
  message.kind = Kind::StreamMessage;
  message.payload = payload;
  round_trip(message);
  frame_view half_close;
  half_close.call_id = 7;
  half_close.kind = Kind::StreamHalfClose;
  round_trip(half_close);
  frame_view credit;
  credit.call_id = UINT64_MAX;
  credit.kind = Kind::StreamCredit;
  credit.credit_messages = UINT32_MAX;
  credit.credit_bytes = UINT64_MAX;
  round_trip(credit);
}

TEST(FrameCodec, AllFieldsAtOnce) {
  const auto payload = pattern(17, 3);
  frame_view f;
  f.call_id = 99;
  f.kind = Kind::Error;
  f.method = "m";
  f.timeout_us = UINT64_MAX;
  f.payload = payload;
  f.code = status::internal;
  f.message = "boom";
  f.retry_after_ms = UINT32_MAX;
  round_trip(f);
}

// decode_frame assigns each field instead of clearing the view first (the server's readers
// decode once per call): a view reused from a frame that had everything must come out exactly
// as a fresh one when the next frame has nothing.
TEST(FrameCodec, ReusedViewKeepsNothingOfTheLastFrame) {
  const auto payload = pattern(33, 5);
  const auto details = pattern(9, 6);
  const std::vector<ringrpc::metadata_entry> headers{{"k", "v"}};
  const std::vector<ringrpc::metadata_entry> trailers{{"t", "w"}};
  const ringrpc::detail::metadata_to_send headers_out{{}, headers};
  const ringrpc::detail::metadata_to_send trailers_out{{}, trailers};
  frame_view full;
  full.call_id = 7;
  full.kind = Kind::Error;
  full.method = "full";
  full.timeout_us = 11;
  full.payload = payload;
  full.code = status::internal;
  full.message = "why";
  full.retry_after_ms = 13;
  full.metadata_out = &headers_out;
  full.trailers_out = &trailers_out;
  full.details = details;
  full.stream_kind = 3;
  full.credit_messages = 17;
  full.credit_bytes = 19;
  const aligned_frame full_frame = encode(full);
  frame_view minimal;
  minimal.call_id = 8;
  const aligned_frame minimal_frame = encode(minimal);

  frame_view v;
  ASSERT_EQ(decode_frame(full_frame.span(), v), decode_outcome::ok);
  ASSERT_NE(v.metadata, nullptr);
  ASSERT_NE(v.trailers, nullptr);
  EXPECT_EQ(to_str(v.details), to_str(details));
  v.metadata_out = &headers_out;  // an encoder's fields, which the decoder must clear too
  v.trailers_out = &trailers_out;
  ASSERT_EQ(decode_frame(minimal_frame.span(), v), decode_outcome::ok);
  expect_same(minimal, v);
  EXPECT_EQ(v.metadata, nullptr);
  EXPECT_EQ(v.trailers, nullptr);
  EXPECT_EQ(v.metadata_out, nullptr);
  EXPECT_EQ(v.trailers_out, nullptr);
  EXPECT_TRUE(v.details.empty());
  EXPECT_TRUE(v.method.empty());
  EXPECT_TRUE(v.message.empty());
}

TEST(FrameCodec, EmptyPayloadAndDefaults) {
  frame_view f;  // every field at its default
  round_trip(f);

  f.call_id = 5;
  f.method = "noop";
  round_trip(f);

  const aligned_frame enc = encode(f);
  frame_view got;
  ASSERT_EQ(decode_frame(enc.span(), got), decode_outcome::ok);
  EXPECT_TRUE(got.payload.empty());
  EXPECT_TRUE(got.message.empty());
}

TEST(FrameCodec, OneMebibytePayload) {
  const auto payload = pattern(1 << 20, 4);
  frame_view f;
  f.call_id = 1;
  f.kind = Kind::Reply;
  f.payload = payload;
  round_trip(f);
  const aligned_frame enc = encode(f);
  EXPECT_GT(enc.size(), std::size_t{1} << 20);
}

TEST(FrameCodec, PrefixIsLittleEndianBodyLength) {
  const auto payload = pattern(300, 5);  // makes the length need more than one byte
  frame_view f;
  f.call_id = 3;
  f.method = "echo";
  f.payload = payload;
  frame_encoder enc;
  const auto bytes = enc.encode(f);
  const std::uint32_t body = static_cast<std::uint32_t>(bytes.size() - 4);
  ASSERT_GT(body, 255u);
  EXPECT_EQ(bytes[0], static_cast<std::byte>(body & 0xff));
  EXPECT_EQ(bytes[1], static_cast<std::byte>((body >> 8) & 0xff));
  EXPECT_EQ(bytes[2], static_cast<std::byte>((body >> 16) & 0xff));
  EXPECT_EQ(bytes[3], static_cast<std::byte>((body >> 24) & 0xff));
  EXPECT_EQ(read_frame_length(bytes.data()), body);
}

TEST(FrameCodec, EncoderIsReusableAndEncodeIntoMatches) {
  frame_encoder enc;
  const auto p1 = pattern(64, 6);
  frame_view a;
  a.call_id = 1;
  a.method = "echo";
  a.payload = p1;
  frame_view b;
  b.call_id = 2;
  b.kind = Kind::Ping;

  std::vector<std::byte> out_a;
  enc.encode_into(a, out_a);
  const auto bytes_b = enc.encode(b);
  const std::vector<std::byte> copy_b(bytes_b.begin(), bytes_b.end());
  enc.encode_into(a, out_a);  // replaces, does not append
  frame_encoder fresh;
  const auto fresh_a = fresh.encode(a);
  EXPECT_EQ(to_str(out_a), to_str(fresh_a));

  frame_view got;
  aligned_frame fa(out_a);
  ASSERT_EQ(decode_frame(fa.span(), got), decode_outcome::ok);
  expect_same(a, got);
  aligned_frame fb(copy_b);
  ASSERT_EQ(decode_frame(fb.span(), got), decode_outcome::ok);
  expect_same(b, got);
}

TEST(FrameCodec, GarbageIsMalformed) {
  std::mt19937 rng(1234);
  int malformed = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::size_t n = 4 + rng() % 200;
    std::vector<std::byte> bytes(n);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    // Consistent prefix so the body itself is what gets judged.
    aligned_frame fr(bytes);
    fr.put_u32(0, static_cast<std::uint32_t>(n - 4));
    frame_view got;
    const auto r = decode_frame(fr.span(), got);
    // Random bytes must never be accepted as a valid frame (the odds that they form a valid
    // table are negligible but not zero, so count instead of asserting each).
    if (r == decode_outcome::malformed) ++malformed;
    if (r == decode_outcome::ok) ADD_FAILURE() << "random body of " << n << " bytes decoded ok";
  }
  EXPECT_GT(malformed, 1900);
}

TEST(FrameCodec, FixedGarbageIsMalformed) {
  frame_view got;
  for (std::size_t n : {0u, 1u, 3u, 4u, 7u, 8u, 11u, 12u, 16u, 64u}) {
    aligned_frame zeros(std::vector<std::byte>(n, std::byte{0}));
    if (n >= 4) zeros.put_u32(0, static_cast<std::uint32_t>(n - 4));
    EXPECT_EQ(decode_frame(zeros.span(), got), decode_outcome::malformed) << "zeros n=" << n;
    aligned_frame ones(std::vector<std::byte>(n, std::byte{0xff}));
    if (n >= 4) ones.put_u32(0, static_cast<std::uint32_t>(n - 4));
    EXPECT_EQ(decode_frame(ones.span(), got), decode_outcome::malformed) << "0xff n=" << n;
  }
}

TEST(FrameCodec, PrefixMismatchIsNotOk) {
  const auto payload = pattern(20, 7);
  frame_view f;
  f.call_id = 11;
  f.method = "echo";
  f.payload = payload;
  aligned_frame fr = encode(f);
  const std::uint32_t body = read_frame_length(fr.data());
  frame_view got;
  fr.put_u32(0, body + 1);
  EXPECT_NE(decode_frame(fr.span(), got), decode_outcome::ok);
  fr.put_u32(0, body - 1);
  EXPECT_NE(decode_frame(fr.span(), got), decode_outcome::ok);
  fr.put_u32(0, body);
  EXPECT_EQ(decode_frame(fr.span(), got), decode_outcome::ok);
}

// Finds `needle` in `hay`; returns its offset or SIZE_MAX.
std::size_t find_bytes(std::span<const std::byte> hay, std::span<const std::byte> needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  return it == hay.end() ? SIZE_MAX : static_cast<std::size_t>(it - hay.begin());
}

TEST(FrameCodec, CorruptPayloadLengthIsMalformedWithId) {
  const auto payload = pattern(48, 8);
  frame_view f;
  f.call_id = 0x1122334455667788ULL;
  f.kind = Kind::Request;
  f.method = "echo";
  f.timeout_us = 1000;
  f.payload = payload;
  aligned_frame fr = encode(f);
  const std::size_t at = find_bytes(fr.span(), payload);
  ASSERT_NE(at, SIZE_MAX);
  ASSERT_GE(at, 8u);
  // The vector's u32 element count lies just before its elements.
  ASSERT_EQ(read_frame_length(fr.data() + at - 4), payload.size());

  for (std::uint32_t bad : {static_cast<std::uint32_t>(payload.size() + 1000), 0x7fffffffu,
                            0xffffffffu, static_cast<std::uint32_t>(fr.size())}) {
    fr.put_u32(at - 4, bad);
    frame_view got;
    got.call_id = 0;
    EXPECT_EQ(decode_frame(fr.span(), got), decode_outcome::malformed_with_id) << bad;
    EXPECT_EQ(got.call_id, f.call_id);
    EXPECT_TRUE(got.payload.empty());
    EXPECT_TRUE(got.method.empty());
  }
}

TEST(FrameCodec, TruncatedBodyIsNotOk) {
  const auto payload = pattern(40, 9);
  frame_view f;
  f.call_id = 77;
  f.method = "echo";
  f.payload = payload;
  const aligned_frame full = encode(f);
  // The builder writes back to front, so the body ends with the first object written (the
  // method string "echo" and its NUL) followed by alignment padding. Cutting only padding leaves
  // a valid frame; cutting the NUL or anything before it must not decode.
  std::size_t zeros = 0;  // the NUL plus the padding
  while (zeros < 8 && full.data()[full.size() - 1 - zeros] == std::byte{0}) ++zeros;
  ASSERT_GE(zeros, 1u);
  ASSERT_LT(zeros, 8u);
  const std::size_t string_end = full.size() - zeros + 1;  // one past the NUL
  ASSERT_EQ(to_str({full.data() + string_end - 5, 4}), "echo");
  for (std::size_t n = 0; n < full.size(); ++n) {
    // The prefix is made consistent with the truncated size so the body is what's short.
    aligned_frame cut(full.prefix(n));
    if (n >= 4) cut.put_u32(0, static_cast<std::uint32_t>(n - 4));
    frame_view got;
    const auto r = decode_frame(cut.span(), got);
    if (n >= string_end) {
      EXPECT_EQ(r, decode_outcome::ok) << "only padding cut, n=" << n;
      continue;
    }
    EXPECT_NE(r, decode_outcome::ok) << "n=" << n;
    if (r == decode_outcome::malformed_with_id) {
      EXPECT_EQ(got.call_id, f.call_id) << "n=" << n;
    }

    // Truncated but with the original prefix: must not read past the end either.
    aligned_frame cut2(full.prefix(n));
    EXPECT_NE(decode_frame(cut2.span(), got), decode_outcome::ok) << "n=" << n;
  }
  // Cut off before the root table is even reachable: nothing can be salvaged.
  for (std::size_t n : {0u, 4u, 6u, 8u, 11u}) {
    aligned_frame cut(full.prefix(n));
    if (n >= 4) cut.put_u32(0, static_cast<std::uint32_t>(n - 4));
    frame_view got;
    EXPECT_EQ(decode_frame(cut.span(), got), decode_outcome::malformed) << "n=" << n;
  }
}

TEST(FrameCodec, TruncatedRightAfterRootIsMalformed) {
  frame_view f;
  f.call_id = 78;
  f.kind = Kind::Ping;
  const aligned_frame full = encode(f);
  // Keep only prefix + root offset + 4 bytes: the table is out of reach.
  aligned_frame cut(full.prefix(12));
  cut.put_u32(0, 8);
  frame_view got;
  EXPECT_EQ(decode_frame(cut.span(), got), decode_outcome::malformed);
}

// Offset inside `fr` of the (inline) scalar field `field` of the root table.
std::size_t field_offset(const aligned_frame& fr, flatbuffers::voffset_t field) {
  // Frame inherits Table privately; the generated accessors go through the same cast.
  const auto* root = reinterpret_cast<const flatbuffers::Table*>(
      flatbuffers::GetSizePrefixedRoot<ringrpc::wire::Frame>(
          reinterpret_cast<const std::uint8_t*>(fr.data())));
  const std::uint8_t* p = root->GetAddressOf(field);
  if (p == nullptr) return SIZE_MAX;
  return static_cast<std::size_t>(p - reinterpret_cast<const std::uint8_t*>(fr.data()));
}

TEST(FrameCodec, UnknownKindIsNotOk) {
  frame_view f;
  f.call_id = 31337;
  f.kind = Kind::Pong;  // non-default, so the field is stored
  f.method = "x";
  aligned_frame fr = encode(f);
  const std::size_t at = field_offset(fr, ringrpc::wire::Frame::VT_KIND);
  ASSERT_NE(at, SIZE_MAX);
  ASSERT_EQ(fr.data()[at], static_cast<std::byte>(Kind::Pong));

  for (int v : {11, 12, 100, 255}) {
    fr.data()[at] = static_cast<std::byte>(v);
    frame_view got;
    const auto r = decode_frame(fr.span(), got);
    EXPECT_NE(r, decode_outcome::ok) << "kind=" << v;
    EXPECT_EQ(r, decode_outcome::malformed_with_id) << "kind=" << v;
    EXPECT_EQ(got.call_id, f.call_id);
  }
  // Every known kind still decodes.
  for (int v = 0; v <= static_cast<int>(Kind::MAX); ++v) {
    fr.data()[at] = static_cast<std::byte>(v);
    frame_view got;
    EXPECT_EQ(decode_frame(fr.span(), got), decode_outcome::ok) << "kind=" << v;
    EXPECT_EQ(got.kind, static_cast<Kind>(v));
  }
}

TEST(FrameCodec, UnknownStatusDecodesAsIs) {
  frame_view f;
  f.call_id = 5;
  f.kind = Kind::Error;
  f.code = status::internal;
  f.message = "m";
  aligned_frame fr = encode(f);
  const std::size_t at = field_offset(fr, ringrpc::wire::Frame::VT_STATUS);
  ASSERT_NE(at, SIZE_MAX);
  fr.data()[at] = std::byte{0xe9};  // u16 LE 1001
  fr.data()[at + 1] = std::byte{0x03};
  frame_view got;
  ASSERT_EQ(decode_frame(fr.span(), got), decode_outcome::ok);
  EXPECT_EQ(static_cast<std::uint16_t>(got.code), 1001);
  EXPECT_EQ(ringrpc::to_string(got.code), "unknown_status");
}

TEST(Status, ToStringNames) {
  EXPECT_EQ(ringrpc::to_string(status::ok), "ok");
  EXPECT_EQ(ringrpc::to_string(status::unknown_method), "unknown_method");
  EXPECT_EQ(ringrpc::to_string(status::bad_request), "bad_request");
  EXPECT_EQ(ringrpc::to_string(status::frame_too_large), "frame_too_large");
  EXPECT_EQ(ringrpc::to_string(status::server_busy), "server_busy");
  EXPECT_EQ(ringrpc::to_string(status::deadline_exceeded), "deadline_exceeded");
  EXPECT_EQ(ringrpc::to_string(status::shutting_down), "shutting_down");
  EXPECT_EQ(ringrpc::to_string(status::internal), "internal");
  EXPECT_EQ(ringrpc::to_string(status::cancelled), "cancelled");
  EXPECT_EQ(ringrpc::to_string(status::unauthenticated), "unauthenticated");
  EXPECT_EQ(ringrpc::to_string(status::permission_denied), "permission_denied");
  EXPECT_EQ(ringrpc::to_string(status::not_found), "not_found");
  EXPECT_EQ(ringrpc::to_string(status::invalid_argument), "invalid_argument");
  EXPECT_EQ(ringrpc::to_string(status::already_exists), "already_exists");
  EXPECT_EQ(ringrpc::to_string(status::failed_precondition), "failed_precondition");
  EXPECT_EQ(ringrpc::to_string(status::unavailable), "unavailable");
  EXPECT_EQ(ringrpc::to_string(status::unimplemented), "unimplemented");
  EXPECT_EQ(ringrpc::to_string(status::resource_exhausted), "resource_exhausted");
  EXPECT_EQ(ringrpc::to_string(status::aborted), "aborted");
  EXPECT_EQ(ringrpc::to_string(status::out_of_range), "out_of_range");
  EXPECT_EQ(ringrpc::to_string(status::data_loss), "data_loss");
  EXPECT_EQ(ringrpc::to_string(status::unknown), "unknown");
  EXPECT_EQ(ringrpc::to_string(static_cast<status>(22)), "unknown_status");
  EXPECT_EQ(ringrpc::to_string(static_cast<status>(0xffff)), "unknown_status");
}

// The documented table (docs/protocol.md, "Status codes and gRPC").
TEST(Status, GrpcCodes) {
  const int expected[] = {0, 12, 3, 8, 14, 4, 14, 13, 1, 16, 7, 5, 3, 6, 9, 14, 12, 8, 10, 11, 15, 2};
  for (int i = 0; i < 22; ++i) EXPECT_EQ(ringrpc::grpc_code(static_cast<status>(i)), expected[i]) << i;
  EXPECT_EQ(ringrpc::grpc_code(static_cast<status>(22)), 2);
  EXPECT_EQ(ringrpc::grpc_code(static_cast<status>(0xffff)), 2);
}

TEST(Status, WireValuesMatchSchema) {
  using ringrpc::wire::Status;
  EXPECT_EQ(static_cast<int>(status::ok), static_cast<int>(Status::Ok));
  EXPECT_EQ(static_cast<int>(status::unknown_method), static_cast<int>(Status::UnknownMethod));
  EXPECT_EQ(static_cast<int>(status::bad_request), static_cast<int>(Status::BadRequest));
  EXPECT_EQ(static_cast<int>(status::frame_too_large), static_cast<int>(Status::FrameTooLarge));
  EXPECT_EQ(static_cast<int>(status::server_busy), static_cast<int>(Status::ServerBusy));
  EXPECT_EQ(static_cast<int>(status::deadline_exceeded),
            static_cast<int>(Status::DeadlineExceeded));
  EXPECT_EQ(static_cast<int>(status::shutting_down), static_cast<int>(Status::ShuttingDown));
  EXPECT_EQ(static_cast<int>(status::internal), static_cast<int>(Status::Internal));
  EXPECT_EQ(static_cast<int>(status::cancelled), static_cast<int>(Status::Cancelled));
  EXPECT_EQ(static_cast<int>(status::unauthenticated), static_cast<int>(Status::Unauthenticated));
  EXPECT_EQ(static_cast<int>(status::permission_denied), static_cast<int>(Status::PermissionDenied));
  EXPECT_EQ(static_cast<int>(status::not_found), static_cast<int>(Status::NotFound));
  EXPECT_EQ(static_cast<int>(status::invalid_argument), static_cast<int>(Status::InvalidArgument));
  EXPECT_EQ(static_cast<int>(status::already_exists), static_cast<int>(Status::AlreadyExists));
  EXPECT_EQ(static_cast<int>(status::failed_precondition), static_cast<int>(Status::FailedPrecondition));
  EXPECT_EQ(static_cast<int>(status::unavailable), static_cast<int>(Status::Unavailable));
  EXPECT_EQ(static_cast<int>(status::unimplemented), static_cast<int>(Status::Unimplemented));
  EXPECT_EQ(static_cast<int>(status::resource_exhausted), static_cast<int>(Status::ResourceExhausted));
  EXPECT_EQ(static_cast<int>(status::aborted), static_cast<int>(Status::Aborted));
  EXPECT_EQ(static_cast<int>(status::out_of_range), static_cast<int>(Status::OutOfRange));
  EXPECT_EQ(static_cast<int>(status::data_loss), static_cast<int>(Status::DataLoss));
  EXPECT_EQ(static_cast<int>(status::unknown), static_cast<int>(Status::Unknown));
  EXPECT_EQ(static_cast<int>(Status::MAX), 21);  // a new status needs a line above
}

}  // namespace

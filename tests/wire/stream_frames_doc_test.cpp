// docs/protocol.md section 13.7 and 4.5 against the code: the stream frames dumped there are what
// frame_encoder produces, the fixed-layout frame decodes as described, and ringrpc-server's
// `generate` answers the documented StreamOpen with the documented StreamMessage, byte for byte.
#include <gtest/gtest.h>

#include <span>
#include <string_view>
#include <vector>

#include "ringrpc/server.hpp"
#include "server/builtin_methods.hpp"
#include "test_support.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

std::vector<std::byte> encoded(const detail::frame_view& f) {
  detail::frame_encoder enc;
  const auto b = enc.encode(f);
  return {b.begin(), b.end()};
}

std::vector<std::byte> dump(std::string_view heading) {
  return test::documented_dump(RINGRPC_PROTOCOL_DOC, heading);
}

detail::frame_view documented_open() {
  detail::frame_view f;
  f.call_id = 1;
  f.kind = wire::Kind::StreamOpen;
  f.method = "generate";
  f.payload = bytes_of("3 5");
  f.stream_kind = 1;
  f.credit_messages = 16;
  f.credit_bytes = 262144;
  return f;
}

detail::frame_view documented_message() {
  detail::frame_view f;
  f.call_id = 1;
  f.kind = wire::Kind::StreamMessage;
  f.payload = bytes_of("xxxxx");
  return f;
}

TEST(stream_frames_doc, the_encoder_produces_the_documented_dumps) {
  EXPECT_EQ(test::hex_dump(encoded(documented_open())), test::hex_dump(dump("#### 13.7.1 StreamOpen")));
  // The server's messages without response headers are laid out by hand (4.3's layout).
  std::vector<std::byte> message;
  detail::encode_payload_frame(1, wire::Kind::StreamMessage, bytes_of("xxxxx"), message);
  EXPECT_EQ(test::hex_dump(message), test::hex_dump(dump("#### 13.7.2 StreamMessage")));
  detail::frame_view decoded;
  ASSERT_EQ(detail::decode_frame(message, decoded), detail::decode_outcome::ok);
  EXPECT_EQ(decoded.call_id, documented_message().call_id);
  EXPECT_EQ(decoded.kind, documented_message().kind);
  detail::frame_view credit;
  credit.call_id = 1;
  credit.kind = wire::Kind::StreamCredit;
  credit.credit_messages = 8;
  credit.credit_bytes = 40;
  EXPECT_EQ(test::hex_dump(encoded(credit)), test::hex_dump(dump("#### 13.7.3 StreamCredit")));
  detail::frame_view half_close;
  half_close.call_id = 2;
  half_close.kind = wire::Kind::StreamHalfClose;
  EXPECT_EQ(test::hex_dump(encoded(half_close)), test::hex_dump(dump("#### 13.7.4 StreamHalfClose")));
}

TEST(stream_frames_doc, the_fixed_layout_stream_open_decodes_as_described) {
  const std::vector<std::byte> frame = dump("### 4.5 The fixed layout for stream frames");
  ASSERT_EQ(frame.size(), 120u);
  detail::frame_view v;
  ASSERT_EQ(detail::decode_frame(frame, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.call_id, 1u);
  EXPECT_EQ(v.kind, wire::Kind::StreamOpen);
  EXPECT_EQ(v.method, "generate");
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()), "3 5");
  EXPECT_EQ(v.stream_kind, 1u);
  EXPECT_EQ(v.credit_messages, 16u);
  EXPECT_EQ(v.credit_bytes, 262144u);
  EXPECT_EQ(v.metadata, nullptr);
}

// Both opens, the builder's and the fixed layout's, get three documented messages and the end.
TEST(stream_frames_doc, generate_answers_the_documented_open_with_the_documented_messages) {
  server_options o;
  o.readers = 1;
  server srv(o);
  detail::add_stream_methods(srv);
  srv.start();
  const std::vector<std::byte> message = dump("#### 13.7.2 StreamMessage");
  ASSERT_FALSE(message.empty());
  for (const char* heading : {"#### 13.7.1 StreamOpen", "### 4.5 The fixed layout for stream frames"}) {
    SCOPED_TRACE(heading);
    test::raw_socket s(srv.port());
    ASSERT_TRUE(s.send_all(dump(heading)));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(test::hex_dump(s.read_raw_frame()), test::hex_dump(message));
    detail::frame_view end;
    std::vector<std::byte> storage;
    ASSERT_TRUE(s.read_frame(end, storage));
    EXPECT_EQ(end.call_id, 1u);
    EXPECT_EQ(end.kind, wire::Kind::Reply);
    EXPECT_EQ(end.code, status::ok);
    EXPECT_TRUE(end.payload.empty());
  }
  srv.stop();
}

}  // namespace
}  // namespace ringrpc

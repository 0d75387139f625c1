// The schema change is additive: frames built by the code generated from the schema of before
// per-call metadata (tests/wire/compat/frame_v1.fbs, verbatim but for its namespace) are served
// by today's server, today's decoder reads that version's replies, and that version's verifier
// accepts today's frames, metadata and new statuses included.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "frame_v1_generated.h"
#include "ringrpc/server.hpp"
#include "test_support.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc {
namespace {

namespace v1 = ringrpc::wire_v1;

// A frame as the old generated code builds it (what every client of that version sends).
std::vector<std::byte> old_frame(std::uint64_t id, v1::Kind kind, const char* method, std::string_view payload,
                                 v1::Status st = v1::Status::Ok, const char* message = nullptr,
                                 std::uint64_t timeout_us = 0) {
  flatbuffers::FlatBufferBuilder b;
  const auto m = method != nullptr ? b.CreateString(method) : 0;
  const auto p = payload.empty() ? 0 : b.CreateVector(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size());
  const auto msg = message != nullptr ? b.CreateString(message) : 0;
  b.FinishSizePrefixed(v1::CreateFrame(b, id, kind, m, timeout_us, p, st, msg, 7));
  const auto* d = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return {d, d + b.GetSize()};
}

// What an old client does with a frame: verify with its own verifier, then read the fields.
const v1::Frame* old_read(const std::vector<std::byte>& frame) {
  flatbuffers::Verifier v(reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  if (!v1::VerifySizePrefixedFrameBuffer(v)) return nullptr;
  return v1::GetSizePrefixedFrame(frame.data());
}

TEST(compat, old_client_frames_decode_as_before_without_metadata) {
  const auto f = old_frame(42, v1::Kind::Request, "echo", "hi", v1::Status::Ok, nullptr, 1500);
  detail::frame_view v;
  ASSERT_EQ(detail::decode_frame(f, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.call_id, 42u);
  EXPECT_EQ(v.method, "echo");
  EXPECT_EQ(v.timeout_us, 1500u);
  EXPECT_EQ(v.retry_after_ms, 7u);
  EXPECT_EQ(v.metadata, nullptr);
}

TEST(compat, old_server_replies_decode_with_todays_client_code) {
  // Reply, Error (every status the old schema had) and Pong as the old generated code wrote them.
  for (auto st : {v1::Status::Ok, v1::Status::BadRequest, v1::Status::ServerBusy, v1::Status::Cancelled}) {
    const auto f = old_frame(9, st == v1::Status::Ok ? v1::Kind::Reply : v1::Kind::Error, nullptr, "payload", st,
                             st == v1::Status::Ok ? nullptr : "why");
    detail::frame_view v;
    ASSERT_EQ(detail::decode_frame(f, v), detail::decode_outcome::ok);
    EXPECT_EQ(static_cast<int>(v.code), static_cast<int>(st));
    EXPECT_EQ(v.metadata, nullptr);
    EXPECT_EQ(v.payload.size(), 7u);
  }
  const auto pong = old_frame(3, v1::Kind::Pong, nullptr, "");
  detail::frame_view v;
  ASSERT_EQ(detail::decode_frame(pong, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.kind, wire::Kind::Pong);
}

TEST(compat, old_verifier_accepts_todays_frames_with_metadata_and_new_statuses) {
  detail::frame_encoder enc;
  std::vector<std::byte> buf;
  const std::vector<metadata_entry> md = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
                                          {"authorization", "Bearer abc"}};
  detail::frame_view f;
  f.call_id = 11;
  f.method = "echo";
  f.payload = test::bytes_of("hello");
  const detail::metadata_to_send to_send{{}, md};
  f.metadata_out = &to_send;
  enc.encode_into(f, buf);
  const v1::Frame* old = old_read(buf);
  ASSERT_NE(old, nullptr) << "an old server would refuse a new client's frame";
  EXPECT_EQ(old->call_id(), 11u);
  EXPECT_EQ(old->method()->str(), "echo");
  EXPECT_EQ(old->payload()->size(), 5u);

  detail::frame_view e;
  e.call_id = 12;
  e.kind = wire::Kind::Error;
  e.code = status::permission_denied;
  e.message = "no";
  enc.encode_into(e, buf);
  old = old_read(buf);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(static_cast<int>(old->status()), 10);  // unknown to it: "treat unknown statuses as errors"
  EXPECT_EQ(old->kind(), v1::Kind::Error);
}

TEST(compat, todays_server_answers_an_old_client_byte_for_byte_as_before) {
  server_options o;
  o.readers = 1;
  o.handlers = 1;
  server srv(o);
  add_builtin_methods(srv);
  srv.start();
  test::raw_socket s(srv.port());
  ASSERT_TRUE(s.send_all(old_frame(1, v1::Kind::Request, "echo", "hi")));
  const std::vector<std::byte> reply = s.read_raw_frame();
  ASSERT_FALSE(reply.empty());
  // docs/protocol.md section 5: the reply to the echo of "hi" with call id 1, unchanged.
  const std::vector<std::uint8_t> documented = {
      0x34, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x14, 0x00, 0x08, 0x00, 0x10, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,
      0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
      0x68, 0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  ASSERT_EQ(reply.size(), documented.size());
  EXPECT_EQ(std::memcmp(reply.data(), documented.data(), documented.size()), 0);
  const v1::Frame* old = old_read(reply);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->kind(), v1::Kind::Reply);

  // Errors, pongs, everything else the old client gets, its verifier accepts.
  ASSERT_TRUE(s.send_all(old_frame(2, v1::Kind::Request, "nope", "")));
  ASSERT_TRUE(s.send_all(old_frame(3, v1::Kind::Ping, nullptr, "")));
  for (int i = 0; i < 2; ++i) {
    const std::vector<std::byte> fr = s.read_raw_frame();
    ASSERT_FALSE(fr.empty());
    old = old_read(fr);
    ASSERT_NE(old, nullptr);
    if (old->call_id() == 2) {
      EXPECT_EQ(old->status(), v1::Status::UnknownMethod);
    } else {
      EXPECT_EQ(old->call_id(), 3u);
      EXPECT_EQ(old->kind(), v1::Kind::Pong);
    }
  }
}

TEST(compat, the_documented_frame_with_metadata_decodes_as_described) {
  std::vector<std::byte> frame = test::documented_dump(RINGRPC_PROTOCOL_DOC, "### 4.4 The fixed layout with metadata");
  ASSERT_EQ(frame.size(), 144u);
  ASSERT_EQ(detail::read_frame_length(frame.data()), 140u);
  detail::frame_view v;
  ASSERT_EQ(detail::decode_frame(frame, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.call_id, 1u);
  EXPECT_EQ(v.method, "echo");
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()), "hi");
  ASSERT_NE(v.metadata, nullptr);
  const metadata_view md(v.metadata);
  ASSERT_EQ(md.size(), 1u);
  EXPECT_EQ(md[0].key, "tenant");
  EXPECT_EQ(md[0].value, "blue");
  // An old peer's verifier takes it too; it just does not see the pair.
  EXPECT_NE(old_read(frame), nullptr);
  // And the server answers it like the request of 4.3.
  server_options o;
  o.readers = 1;
  server srv(o);
  add_builtin_methods(srv);
  srv.start();
  test::raw_socket s(srv.port());
  ASSERT_TRUE(s.send_all(frame));
  detail::frame_view got;
  std::vector<std::byte> storage;
  ASSERT_TRUE(s.read_frame(got, storage));
  EXPECT_EQ(got.call_id, 1u);
  EXPECT_EQ(got.kind, wire::Kind::Reply);
  EXPECT_EQ(got.payload.size(), 2u);
}

}  // namespace
}  // namespace ringrpc

// Response metadata, error details and the statuses after permission_denied are additive:
// frames built by the code generated from the schema of before them (tests/wire/compat/
// frame_v2.fbs, verbatim but for its namespace) are served and read by today's code as before,
// and that version's verifier and reader accept today's answers, reading what they knew
// (docs/protocol.md, "Status codes" and 3.2/3.3, say what such a peer sees).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frame_v2_generated.h"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "server/builtin_methods.hpp"
#include "test_support.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc {
namespace {

namespace v2 = ringrpc::wire_v2;

// A frame as the previous generated code builds it, request metadata included.
std::vector<std::byte> old_frame(std::uint64_t id, v2::Kind kind, const char* method, std::string_view payload,
                                 v2::Status st = v2::Status::Ok, const char* message = nullptr,
                                 bool with_metadata = false) {
  flatbuffers::FlatBufferBuilder b;
  const auto m = method != nullptr ? b.CreateString(method) : 0;
  const auto p = payload.empty() ? 0 : b.CreateVector(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size());
  const auto msg = message != nullptr ? b.CreateString(message) : 0;
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<v2::Metadata>>> md;
  if (with_metadata) {
    const std::string value = "v";
    std::vector<flatbuffers::Offset<v2::Metadata>> entries = {
        v2::CreateMetadata(b, b.CreateString("k"), b.CreateVector(reinterpret_cast<const std::uint8_t*>(value.data()), 1))};
    md = b.CreateVector(entries);
  }
  b.FinishSizePrefixed(v2::CreateFrame(b, id, kind, m, 0, p, st, msg, 0, md));
  const auto* d = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return {d, d + b.GetSize()};
}

const v2::Frame* old_read(const std::vector<std::byte>& frame) {
  flatbuffers::Verifier v(reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  if (!v2::VerifySizePrefixedFrameBuffer(v)) return nullptr;
  return v2::GetSizePrefixedFrame(frame.data());
}

TEST(compat_response, an_old_servers_answers_decode_with_no_response_metadata) {
  // As a server of the previous version writes them: a reply that echoes nothing back, and an
  // error (its metadata field, if a buggy one set it, would be read as headers).
  for (auto st : {v2::Status::Ok, v2::Status::PermissionDenied}) {
    const auto f = old_frame(9, st == v2::Status::Ok ? v2::Kind::Reply : v2::Kind::Error, nullptr, "payload", st,
                             st == v2::Status::Ok ? nullptr : "why");
    detail::frame_view v;
    ASSERT_EQ(detail::decode_frame(f, v), detail::decode_outcome::ok);
    EXPECT_EQ(static_cast<int>(v.code), static_cast<int>(st));
    EXPECT_EQ(v.metadata, nullptr);
    EXPECT_EQ(v.trailers, nullptr);
    EXPECT_TRUE(v.details.empty());
    EXPECT_EQ(v.payload.size(), 7u);
  }
}

TEST(compat_response, an_old_clients_request_with_metadata_is_served_and_its_answer_read_by_it) {
  server_options o;
  o.readers = 1;
  o.handlers = 1;
  server srv(o);
  srv.add_method("hdr", [](call_context& c) {
    c.add_header("seen", std::string(c.metadata().find("k").value_or("none")));
    c.add_trailer("t", "1");
    c.reply("ok");
  });
  srv.add_method("gone", [](call_context& c) {
    c.add_header("h", "1");
    const std::byte details[] = {std::byte{7}};
    c.fail(status::not_found, "no such thing", details);
  });
  srv.start();
  test::raw_socket s(srv.port());
  ASSERT_TRUE(s.send_all(old_frame(1, v2::Kind::Request, "hdr", "x", v2::Status::Ok, nullptr, true)));
  const auto reply = s.read_raw_frame();
  const v2::Frame* old = old_read(reply);
  ASSERT_NE(old, nullptr) << "the old verifier refuses a reply with trailers";
  EXPECT_EQ(old->kind(), v2::Kind::Reply);
  EXPECT_EQ(old->call_id(), 1u);
  ASSERT_NE(old->payload(), nullptr);
  EXPECT_EQ(old->payload()->size(), 2u);
  // An old client that reads the reply's metadata field finds the headers there.
  ASSERT_NE(old->metadata(), nullptr);
  ASSERT_EQ(old->metadata()->size(), 1u);
  EXPECT_EQ(old->metadata()->Get(0)->key()->str(), "seen");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(old->metadata()->Get(0)->value()->data()), 1), "v");

  ASSERT_TRUE(s.send_all(old_frame(2, v2::Kind::Request, "gone", "")));
  const auto error = s.read_raw_frame();
  old = old_read(error);
  ASSERT_NE(old, nullptr) << "the old verifier refuses an error with details and a new status";
  EXPECT_EQ(old->kind(), v2::Kind::Error);
  EXPECT_EQ(static_cast<int>(old->status()), 11) << "the number survives; the old code cannot name it";
  EXPECT_EQ(old->message()->str(), "no such thing");
  // The same bytes through today's decoder: everything is there.
  detail::frame_view v;
  std::vector<std::byte> aligned(error);
  ASSERT_EQ(detail::decode_frame(aligned, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.code, status::not_found);
  ASSERT_EQ(v.details.size(), 1u);
  EXPECT_EQ(v.details[0], std::byte{7});
  ASSERT_NE(v.metadata, nullptr);
  EXPECT_EQ(v.metadata->size(), 1u);
}

TEST(compat_response, the_old_verifier_accepts_every_new_field_and_status) {
  detail::frame_encoder enc;
  std::vector<std::byte> buf;
  const std::vector<metadata_entry> headers = {{"h", "1"}}, trailers = {{"t", "2"}, {"u", ""}};
  const detail::metadata_to_send h{{}, headers}, t{{}, trailers};
  const std::string details = "opaque details";
  for (int code = 11; code <= 21; ++code) {
    detail::frame_view f;
    f.call_id = static_cast<std::uint64_t>(code);
    f.kind = wire::Kind::Error;
    f.code = static_cast<status>(code);
    f.message = "m";
    f.metadata_out = &h;
    f.trailers_out = &t;
    f.details = test::bytes_of(details);
    enc.encode_into(f, buf);
    const v2::Frame* old = old_read(buf);
    ASSERT_NE(old, nullptr) << code;
    EXPECT_EQ(static_cast<int>(old->status()), code);
    EXPECT_EQ(old->message()->str(), "m");
    // What an old build's to_string() gives it: no name for the number.
    EXPECT_EQ(v2::EnumNameStatus(old->status()), std::string()) << code;
  }
}

// docs/protocol.md 3.2 and 3.3 show what ringrpc-server's built-in `mirror` and `fail` answer;
// these are those answers, byte for byte, from a live server.
TEST(compat_response, the_documented_answers_are_what_the_server_sends) {
  server_options o;
  o.readers = 1;
  o.handlers = 1;
  server srv(o);
  add_builtin_methods(srv);
  detail::add_response_metadata_methods(srv);
  srv.start();
  test::raw_socket s(srv.port());
  const std::vector<metadata_entry> md = {{"region", "eu"}};
  const detail::metadata_to_send to_send{{}, md};
  detail::frame_view req = test::request(1, "mirror", "hi");
  req.metadata_out = &to_send;
  ASSERT_TRUE(s.send_frame(req));
  const auto reply = s.read_raw_frame();
  EXPECT_EQ(test::hex_dump(reply), test::hex_dump(test::documented_dump(RINGRPC_PROTOCOL_DOC, "### 3.2 Response metadata")));
  detail::frame_view v;
  ASSERT_EQ(detail::decode_frame(reply, v), detail::decode_outcome::ok);
  EXPECT_EQ(metadata_view(v.metadata).find("region"), "eu");
  EXPECT_EQ(metadata_view(v.trailers).find("pairs"), "1");

  const std::string fail_payload = std::string("11 ") + "\x08\x05";
  ASSERT_TRUE(s.send_frame(test::request(2, "fail", fail_payload)));
  const auto error = s.read_raw_frame();
  EXPECT_EQ(test::hex_dump(error), test::hex_dump(test::documented_dump(RINGRPC_PROTOCOL_DOC, "### 3.3 Error details")));
  ASSERT_EQ(detail::decode_frame(error, v), detail::decode_outcome::ok);
  EXPECT_EQ(v.code, status::not_found);
  EXPECT_EQ(v.message, "failed as asked");
  ASSERT_EQ(v.details.size(), 2u);
  EXPECT_EQ(v.details[1], std::byte{5});
}

}  // namespace
}  // namespace ringrpc

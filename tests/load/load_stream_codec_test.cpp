// ringrpc-load --stream's codec (tools/load/proto_ringrpc_stream.cpp), pure logic: the frames it
// writes, the server's credit it keeps to, the credit it grants back, FIFO matching and the ends.
#include "protocol.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/status.hpp"
#include "wire/frame_codec.hpp"
#include "wire/stream_credit.hpp"

namespace {

using namespace ringrpc::load;
using ringrpc::detail::frame_view;
using ringrpc::wire::Kind;

struct frame {
  Kind kind = Kind::Request;
  std::uint64_t id = 0;
  std::string method;
  std::string payload;
  std::uint8_t stream_kind = 0;
  std::uint32_t credit_messages = 0;
  std::uint64_t credit_bytes = 0;
};

// Every frame in `bytes`, decoded (each copied to aligned storage, as FlatBuffers wants).
std::vector<frame> frames_in(const std::vector<std::byte>& bytes) {
  std::vector<frame> out;
  std::size_t at = 0;
  while (at + 4 <= bytes.size()) {
    const std::size_t total = 4 + ringrpc::detail::read_frame_length(bytes.data() + at);
    std::vector<std::uint64_t> aligned((total + 7) / 8);
    std::memcpy(aligned.data(), bytes.data() + at, total);
    frame_view v;
    EXPECT_EQ(ringrpc::detail::decode_frame({reinterpret_cast<const std::byte*>(aligned.data()), total}, v),
              ringrpc::detail::decode_outcome::ok);
    out.push_back({v.kind, v.call_id, std::string(v.method),
                   std::string(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()), v.stream_kind,
                   v.credit_messages, v.credit_bytes});
    at += total;
  }
  EXPECT_EQ(at, bytes.size());
  return out;
}

// A frame from the server on the stream (call id 1), or on `id`.
std::vector<std::byte> server_frame(Kind kind, std::string_view payload = {}, std::uint32_t messages = 0,
                                    std::uint64_t bytes = 0, ringrpc::status code = ringrpc::status::ok,
                                    std::string_view message = {}, std::uint64_t id = 1) {
  frame_view f;
  f.call_id = id;
  f.kind = kind;
  f.payload = {reinterpret_cast<const std::byte*>(payload.data()), payload.size()};
  f.credit_messages = messages;
  f.credit_bytes = bytes;
  f.code = code;
  f.message = message;
  ringrpc::detail::frame_encoder e;
  const auto out = e.encode(f);
  return {out.begin(), out.end()};
}

class stream_codec : public ::testing::Test {
 protected:
  void make(std::uint32_t depth, std::string payload = "hello") {
    codec_options o;
    o.stream = true;
    o.stream_depth = depth;
    o.payload.assign(reinterpret_cast<const std::byte*>(payload.data()),
                     reinterpret_cast<const std::byte*>(payload.data()) + payload.size());
    proto = make_protocol(parse_target("ringrpc://127.0.0.1:1/echo_stream"), o);
    codec = proto->new_connection();
    kind = proto->default_kinds().front();
  }
  std::vector<frame> write(int n) {
    std::vector<std::byte> out;
    for (int i = 0; i < n; ++i) codec->write_request(out, seq++, kind);
    return frames_in(out);
  }
  std::vector<frame> pending() {
    std::vector<std::byte> out;
    codec->write_pending(out);
    return frames_in(out);
  }
  reply feed(const std::vector<std::byte>& f) {
    const reply r = codec->parse_reply(f);
    EXPECT_TRUE(r.status == reply_status::protocol_error || r.consumed == f.size());
    return r;
  }

  std::unique_ptr<protocol> proto;
  std::unique_ptr<connection_codec> codec;
  request_kind kind;
  std::uint64_t seq = 0;
};

TEST_F(stream_codec, the_open_goes_first_then_one_message_per_call) {
  make(20);
  EXPECT_TRUE(proto->talks_unasked());
  ASSERT_NE(codec->stream(), nullptr);
  EXPECT_FALSE(codec->stream()->progress().open_sent);
  const auto f = write(2);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].kind, Kind::StreamOpen);
  EXPECT_EQ(f[0].method, "echo_stream");
  EXPECT_EQ(f[0].stream_kind, 3);
  EXPECT_EQ(f[0].credit_messages, 40u) << "a window of 2 x -P, so grants never hold the server back";
  for (int i = 1; i <= 2; ++i) {
    EXPECT_EQ(f[i].kind, Kind::StreamMessage);
    EXPECT_EQ(f[i].id, f[0].id);
    EXPECT_EQ(f[i].payload, "hello");
  }
  EXPECT_TRUE(codec->stream()->progress().open_sent);
}

TEST_F(stream_codec, messages_beyond_the_servers_window_wait_for_its_credit) {
  make(32);
  const auto first = write(20);
  ASSERT_EQ(first.size(), 1u + ringrpc::detail::default_stream_window_messages);  // the open and 16
  EXPECT_TRUE(pending().empty()) << "no credit, nothing more";
  const reply r = feed(server_frame(Kind::StreamCredit, {}, 3, 1000));
  EXPECT_EQ(r.status, reply_status::no_reply);
  EXPECT_EQ(pending().size(), 3u);
  EXPECT_EQ(feed(server_frame(Kind::StreamCredit, {}, 5, 1000)).status, reply_status::no_reply);
  EXPECT_EQ(pending().size(), 1u) << "only the one still held";
  EXPECT_EQ(write(1).size(), 1u) << "credit left: a new message goes at once";
}

TEST_F(stream_codec, echoes_answer_the_calls_in_order_and_are_granted_back) {
  make(4);  // window 16: a grant once 8 are consumed
  write(4);
  for (std::uint64_t i = 0; i < 8; ++i) {
    const reply r = feed(server_frame(Kind::StreamMessage, "hello"));
    ASSERT_EQ(r.status, reply_status::ok);
    EXPECT_EQ(r.seq, i);
    if (i < 4) write(1);
    const auto grants = pending();
    if (i < 7) {
      EXPECT_TRUE(grants.empty()) << i;
    } else {
      ASSERT_EQ(grants.size(), 1u);
      EXPECT_EQ(grants[0].kind, Kind::StreamCredit);
      EXPECT_EQ(grants[0].credit_messages, 8u);
      EXPECT_EQ(grants[0].credit_bytes, 8u * 5);
    }
  }
  EXPECT_TRUE(codec->stream()->progress().opened);
  EXPECT_EQ(feed(server_frame(Kind::StreamMessage, "x")).status, reply_status::protocol_error)
      << "more messages back than were sent";
}

TEST_F(stream_codec, an_ok_end_after_the_half_close_is_the_normal_end) {
  make(1);
  write(1);
  ASSERT_EQ(feed(server_frame(Kind::StreamMessage, "hello")).status, reply_status::ok);
  std::vector<std::byte> out;
  codec->stream()->half_close(out);
  const auto f = frames_in(out);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::StreamHalfClose);
  EXPECT_EQ(feed(server_frame(Kind::Reply)).status, reply_status::no_reply);
  const stream_progress& p = codec->stream()->progress();
  EXPECT_TRUE(p.ended && p.half_closed && p.opened);
  EXPECT_FALSE(p.failed);
}

TEST_F(stream_codec, the_half_close_never_overtakes_a_held_message) {
  make(32);
  write(17);  // the 17th waits for credit
  std::vector<std::byte> out;
  codec->stream()->half_close(out);
  EXPECT_TRUE(out.empty());
  feed(server_frame(Kind::StreamCredit, {}, 1, 100));
  const auto f = pending();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, Kind::StreamMessage);
  EXPECT_EQ(f[1].kind, Kind::StreamHalfClose);
}

TEST_F(stream_codec, a_refused_stream_fails_its_calls_under_the_servers_status) {
  make(2);
  write(2);
  const reply r = feed(server_frame(Kind::Error, {}, 0, 0, ringrpc::status::bad_request, "method 'echo' is not a stream"));
  EXPECT_EQ(r.status, reply_status::protocol_error);
  EXPECT_EQ(r.lost_as, "bad_request");
  const stream_progress& p = codec->stream()->progress();
  EXPECT_TRUE(p.ended && p.failed);
  EXPECT_FALSE(p.opened);
  EXPECT_EQ(p.end_kind, "bad_request");
  EXPECT_EQ(p.end_message, "method 'echo' is not a stream");
}

TEST_F(stream_codec, an_ok_end_before_the_half_close_takes_the_connection_down) {
  make(2);
  write(2);
  const reply r = feed(server_frame(Kind::Reply));
  EXPECT_EQ(r.status, reply_status::protocol_error);
  EXPECT_EQ(r.lost_as, "stream_ended");
}

// A violation of the stream's rules takes the connection down and names the stream's end
// "protocol" (not a lost connection).
void expect_protocol_end(const reply& r, const stream_progress& p) {
  EXPECT_EQ(r.status, reply_status::protocol_error);
  EXPECT_TRUE(p.failed);
  EXPECT_FALSE(p.ended);
  EXPECT_EQ(p.end_kind, "protocol");
}

TEST_F(stream_codec, the_held_buffer_stays_bounded_in_a_closed_loop_above_the_window) {
  make(64);
  write(64);  // 16 go, 48 wait
  const std::size_t held_at_start = codec->stream()->held_buffer_bytes();
  ASSERT_GT(held_at_start, 0u);
  std::size_t most = 0;
  for (int i = 0; i < 5000; ++i) {  // 40,000 messages: credit drip-fed 8 at a time, 8 issued after
    ASSERT_EQ(feed(server_frame(Kind::StreamCredit, {}, 8, 8 * 5)).status, reply_status::no_reply);
    ASSERT_EQ(pending().size(), 8u);
    ASSERT_TRUE(write(8).empty()) << "the queue is not empty: new messages wait behind it";
    most = std::max(most, codec->stream()->held_buffer_bytes());
  }
  EXPECT_LE(most, 2 * held_at_start + 16 * 64) << "the sent prefix is dropped, not kept";
  EXPECT_EQ(codec->stream()->progress().credit_waits, 48u + 5000u * 8);
}

TEST_F(stream_codec, credit_waits_counts_only_the_messages_that_waited) {
  make(20);
  write(16);
  EXPECT_EQ(codec->stream()->progress().credit_waits, 0u);
  write(4);
  EXPECT_EQ(codec->stream()->progress().credit_waits, 4u);
}

TEST_F(stream_codec, the_open_grants_bytes_for_the_window_of_largest_replies) {
  make(20);
  const auto f = write(1);
  ASSERT_EQ(f[0].kind, Kind::StreamOpen);
  EXPECT_EQ(f[0].credit_bytes, 40u * default_max_reply_bytes);
}

TEST_F(stream_codec, byte_credit_binds_for_large_messages) {
  make(16, std::string(20 * 1024, 'x'));  // 256 KiB of window: the 13th message takes it below 0
  EXPECT_EQ(write(16).size(), 1u + 13);
  EXPECT_EQ(codec->stream()->progress().credit_waits, 3u);
  EXPECT_EQ(feed(server_frame(Kind::StreamCredit, {}, 0, 8 * 1024)).status, reply_status::no_reply);
  EXPECT_EQ(pending().size(), 1u) << "4 KiB of credit left: one more goes, messages to spare";
  EXPECT_TRUE(pending().empty());
}

TEST_F(stream_codec, a_message_beyond_our_grant_is_a_protocol_end) {
  make(1);  // we grant 16 messages; the grants go out with write_pending
  write(16);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(feed(server_frame(Kind::StreamMessage, "hello")).status, reply_status::ok);
  expect_protocol_end(feed(server_frame(Kind::StreamMessage, "hello")), codec->stream()->progress());
}

TEST_F(stream_codec, a_message_after_our_grant_went_out_is_fine) {
  make(1);
  write(17);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(feed(server_frame(Kind::StreamMessage, "hello")).status, reply_status::ok);
  const auto grants = pending();
  ASSERT_FALSE(grants.empty());
  EXPECT_EQ(grants.back().kind, Kind::StreamCredit);
  EXPECT_EQ(feed(server_frame(Kind::StreamMessage, "hello")).status, reply_status::ok);
}

TEST_F(stream_codec, more_echoes_than_messages_is_a_protocol_end) {
  make(1);
  write(1);
  ASSERT_EQ(feed(server_frame(Kind::StreamMessage, "hello")).status, reply_status::ok);
  expect_protocol_end(feed(server_frame(Kind::StreamMessage, "hello")), codec->stream()->progress());
}

TEST_F(stream_codec, a_grant_that_overflows_is_refused) {
  make(1);
  write(1);
  const std::uint32_t too_many = ringrpc::detail::max_stream_credit_messages;
  expect_protocol_end(feed(server_frame(Kind::StreamCredit, {}, too_many, 0)), codec->stream()->progress());
}

TEST_F(stream_codec, a_frame_for_another_call_id_is_a_protocol_end) {
  make(1);
  write(1);
  const reply r = feed(server_frame(Kind::StreamMessage, "hello", 0, 0, ringrpc::status::ok, {}, 2));
  expect_protocol_end(r, codec->stream()->progress());
  EXPECT_NE(r.error.find("call id 2"), std::string::npos) << r.error;
}

TEST_F(stream_codec, an_unexpected_frame_kind_is_a_protocol_end) {
  make(1);
  write(1);
  expect_protocol_end(feed(server_frame(Kind::Request, "hello")), codec->stream()->progress());
}

TEST(stream_protocol, only_ringrpc_and_grpc_targets_stream) {
  codec_options o;
  o.stream = true;
  EXPECT_THROW(make_protocol(parse_target("http://127.0.0.1:1/"), o), std::invalid_argument);
  EXPECT_THROW(make_protocol(parse_target("h2c://127.0.0.1:1/"), o), std::invalid_argument);
  EXPECT_NE(make_protocol(parse_target("grpc://127.0.0.1:1/a.B/C"), o)->new_connection()->stream(), nullptr);
  codec_options unary;
  EXPECT_EQ(make_protocol(parse_target("ringrpc://127.0.0.1:1/echo"), unary)->new_connection()->stream(), nullptr);
  EXPECT_EQ(make_protocol(parse_target("grpc://127.0.0.1:1/a.B/C"), unary)->new_connection()->stream(), nullptr);
}

}  // namespace

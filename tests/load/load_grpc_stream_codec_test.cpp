// grpc:// --stream's codec (tools/load/proto_grpc_stream.cpp) against an HTTP/2 server session of
// nghttp2's in the same process: one answer per parse whatever the DATA framing (several
// messages in a frame, a message across frames, padding), the server's windows kept (messages
// wait, counted, and go on its WINDOW_UPDATE), the half-close, and the ends by trailers or reset.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grpc_framing.hpp"
#include "protocol.hpp"

namespace {

using namespace ringrpc::load;

std::string framed(const std::string& message) {
  const auto f = grpc_frame_message({reinterpret_cast<const std::byte*>(message.data()), message.size()});
  return {reinterpret_cast<const char*>(f.data()), f.size()};
}

// The server side of one bidi call: what it read, and a response body it writes when told.
class chat_server {
 public:
  explicit chat_server(std::uint32_t window = 65535, std::size_t padding = 0) : _padding(padding) {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &chat_server::on_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &chat_server::on_data);
    if (padding > 0) nghttp2_session_callbacks_set_select_padding_callback(cbs, &chat_server::pad);
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_window_update(opt, 1);  // the test says when the window opens
    nghttp2_session_server_new2(&_s, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window}};
    nghttp2_submit_settings(_s, NGHTTP2_FLAG_NONE, iv, 1);
    if (window < 65535) {
      // The connection window cannot be lowered by SETTINGS: take it down to the stream's.
      nghttp2_session_set_local_window_size(_s, NGHTTP2_FLAG_NONE, 0, static_cast<std::int32_t>(window));
    }
  }
  ~chat_server() { nghttp2_session_del(_s); }

  void receive(std::vector<std::byte>& in) {
    ASSERT_EQ(nghttp2_session_mem_recv(_s, reinterpret_cast<const std::uint8_t*>(in.data()), in.size()),
              static_cast<ssize_t>(in.size()));
    in.clear();
  }
  std::vector<std::byte> send() {
    std::vector<std::byte> out;
    const std::uint8_t* p = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(_s, &p)) > 0;) {
      out.insert(out.end(), reinterpret_cast<const std::byte*>(p), reinterpret_cast<const std::byte*>(p) + n);
    }
    return out;
  }
  // Body bytes to send (each send() puts what is written in as few DATA frames as fit).
  void write(const std::string& bytes) {
    _body += bytes;
    nghttp2_session_resume_data(_s, stream);
  }
  // Ends the call with these trailers once the body written so far is out.
  void finish(const std::string& status) {
    _trailer_status = status;
    nghttp2_session_resume_data(_s, stream);
  }
  void consume(std::size_t n) { nghttp2_session_consume(_s, stream, n); }
  void reset(std::uint32_t code) { nghttp2_submit_rst_stream(_s, NGHTTP2_FLAG_NONE, stream, code); }
  void goaway(std::uint32_t code) { nghttp2_submit_goaway(_s, NGHTTP2_FLAG_NONE, stream, code, nullptr, 0); }

  std::int32_t stream = 0;
  std::string data;  // the request body read, prefixes included
  bool half_closed = false;

 private:
  static int on_frame(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    auto* self = static_cast<chat_server*>(user);
    if (f->hd.type == NGHTTP2_HEADERS && self->stream == 0) {
      self->stream = f->hd.stream_id;
      static std::string status = ":status", ok = "200";
      nghttp2_nv h{reinterpret_cast<std::uint8_t*>(status.data()), reinterpret_cast<std::uint8_t*>(ok.data()),
                   status.size(), ok.size(), NGHTTP2_NV_FLAG_NONE};
      nghttp2_data_provider d{};
      d.read_callback = &chat_server::read;
      nghttp2_submit_response(s, f->hd.stream_id, &h, 1, &d);
    }
    if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && f->hd.stream_id == self->stream) self->half_closed = true;
    return 0;
  }
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t, const std::uint8_t* d, std::size_t n, void* user) {
    static_cast<chat_server*>(user)->data.append(reinterpret_cast<const char*>(d), n);
    return 0;
  }
  static ssize_t pad(nghttp2_session*, const nghttp2_frame* f, std::size_t max, void* user) {
    return static_cast<ssize_t>(std::min(max, f->hd.length + static_cast<chat_server*>(user)->_padding));
  }
  static ssize_t read(nghttp2_session* s, std::int32_t id, std::uint8_t* buf, std::size_t len, std::uint32_t* flags,
                      nghttp2_data_source*, void* user) {
    auto* self = static_cast<chat_server*>(user);
    const std::size_t n = std::min(len, self->_body.size() - self->_sent);
    if (n == 0 && self->_trailer_status.empty()) return NGHTTP2_ERR_DEFERRED;
    std::memcpy(buf, self->_body.data() + self->_sent, n);
    self->_sent += n;
    if (self->_sent == self->_body.size() && !self->_trailer_status.empty()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      static std::string name = "grpc-status";
      nghttp2_nv t{reinterpret_cast<std::uint8_t*>(name.data()),
                   reinterpret_cast<std::uint8_t*>(self->_trailer_status.data()), name.size(),
                   self->_trailer_status.size(), NGHTTP2_NV_FLAG_NONE};
      nghttp2_submit_trailer(s, id, &t, 1);
    }
    return static_cast<ssize_t>(n);
  }

  nghttp2_session* _s = nullptr;
  std::size_t _padding;
  std::string _body;
  std::size_t _sent = 0;
  std::string _trailer_status;
};

struct parsed {
  std::vector<std::uint64_t> answered;  // in the order the parses gave them
  unsigned parses = 0;
  std::string error, lost_as;
};

struct grpc_stream_fixture : ::testing::Test {
  void make(std::uint32_t depth = 4, std::string message = "hello", std::uint32_t max_reply_bytes = 64u << 20) {
    codec_options o;
    o.stream = true;
    o.max_reply_bytes = max_reply_bytes;
    o.stream_depth = depth;
    o.payload.assign(reinterpret_cast<const std::byte*>(message.data()),
                     reinterpret_cast<const std::byte*>(message.data()) + message.size());
    proto = make_protocol(parse_target("grpc://127.0.0.1:1/ringtest.Echo/Chat"), o);
    kind = proto->default_kinds().at(0);
    codec = proto->new_connection();
  }
  void write(unsigned n) {
    for (unsigned i = 0; i < n; ++i) codec->write_request(out, seq++, kind);
  }
  // The server reads what the codec wrote; the codec parses what the server sends, as the engine
  // does (a reply at a time from the front), then writes what it owes (acks, WINDOW_UPDATE).
  parsed round_trip() {
    server->receive(out);
    return parse(server->send());
  }
  // The codec parses `bytes` (what the server sent, or hand-built frames) and writes what it owes.
  parsed parse(const std::vector<std::byte>& bytes) {
    last_bytes = bytes;
    parsed p;
    std::span<const std::byte> in(bytes);
    while (!in.empty()) {
      const reply r = codec->parse_reply(in);
      if (r.status == reply_status::incomplete) break;
      ++p.parses;
      if (r.status == reply_status::protocol_error) {
        p.error = r.error;
        p.lost_as = r.lost_as;
        break;
      }
      EXPECT_GT(r.consumed, 0u);
      if (r.status == reply_status::ok) p.answered.push_back(r.seq);
      in = in.subspan(r.consumed);
    }
    codec->write_pending(out);
    return p;
  }
  const stream_progress& progress() { return codec->stream()->progress(); }

  std::unique_ptr<chat_server> server = std::make_unique<chat_server>();
  std::unique_ptr<protocol> proto;
  request_kind kind;
  std::unique_ptr<connection_codec> codec;
  std::vector<std::byte> out;
  std::vector<std::byte> last_bytes;  // what the server sent in the last round trip
  std::uint64_t seq = 0;
};

// One HTTP/2 frame, built by hand: what nghttp2's server session would refuse to send.
void put_frame(std::vector<std::byte>& out, std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
               const std::string& payload) {
  const std::size_t n = payload.size();
  const std::uint8_t h[9] = {static_cast<std::uint8_t>(n >> 16), static_cast<std::uint8_t>(n >> 8),
                             static_cast<std::uint8_t>(n), type, flags, static_cast<std::uint8_t>(stream >> 24),
                             static_cast<std::uint8_t>(stream >> 16), static_cast<std::uint8_t>(stream >> 8),
                             static_cast<std::uint8_t>(stream)};
  for (const std::uint8_t b : h) out.push_back(static_cast<std::byte>(b));
  for (const char c : payload) out.push_back(static_cast<std::byte>(c));
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// Whether `bytes` (whole frames) hold a DATA frame with the PADDED flag.
bool has_padded_data(const std::vector<std::byte>& bytes) {
  for (std::size_t at = 0; at + 9 <= bytes.size();) {
    const auto* h = reinterpret_cast<const std::uint8_t*>(bytes.data() + at);
    if (h[3] == NGHTTP2_DATA && (h[4] & NGHTTP2_FLAG_PADDED) != 0) return true;
    at += 9 + ((std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2]);
  }
  return false;
}

TEST_F(grpc_stream_fixture, several_messages_in_a_frame_and_one_across_frames_answer_one_per_parse) {
  make();
  write(3);
  EXPECT_TRUE(round_trip().answered.empty());  // SETTINGS, the response's HEADERS
  EXPECT_EQ(server->data, framed("hello") + framed("hello") + framed("hello"));
  EXPECT_TRUE(progress().open_sent);
  server->write(framed("a") + framed("bb"));  // one DATA frame, two answers
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{0, 1}));
  const std::string third = framed("ccc");
  server->write(third.substr(0, 3));  // a message cut inside its prefix, then the rest
  EXPECT_TRUE(round_trip().answered.empty());
  server->write(third.substr(3));
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{2}));
  EXPECT_TRUE(progress().opened);
  EXPECT_EQ(progress().credit_waits, 0u);

  codec->stream()->half_close(out);
  EXPECT_TRUE(progress().half_closed);
  server->finish("0");
  const parsed end = round_trip();
  EXPECT_TRUE(server->half_closed);
  EXPECT_TRUE(end.error.empty()) << end.error;
  EXPECT_TRUE(progress().ended);
  EXPECT_FALSE(progress().failed);
}

TEST_F(grpc_stream_fixture, padded_frames_are_read_past_their_padding) {
  server = std::make_unique<chat_server>(65535, 20);
  make();
  write(2);
  round_trip();
  server->write(framed("a") + framed("b"));
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(has_padded_data(last_bytes));
  write(1);
  round_trip();
  server->write(framed("c"));
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{2}));
}

TEST_F(grpc_stream_fixture, messages_wait_for_the_servers_window_and_go_on_its_window_update) {
  server = std::make_unique<chat_server>(20);  // 20 bytes: one framed "hello" (10) and a half
  make(8);
  write(1);
  round_trip();  // the server's SETTINGS arrive: its window is 20 from now on
  write(3);      // 10 more bytes fit, 20 wait
  EXPECT_EQ(progress().credit_waits, 2u);
  EXPECT_GT(codec->stream()->held_buffer_bytes(), 0u);
  round_trip();
  EXPECT_EQ(server->data.size(), 20u);
  server->consume(20);  // the server's WINDOW_UPDATE: the rest goes
  round_trip();
  round_trip();
  EXPECT_EQ(server->data, framed("hello") + framed("hello") + framed("hello") + framed("hello"));
  EXPECT_EQ(codec->stream()->held_buffer_bytes(), 0u);
}

TEST_F(grpc_stream_fixture, an_error_status_ends_the_stream_as_a_failure_of_its_kind) {
  make();
  write(2);
  round_trip();
  server->write(framed("a"));
  server->finish("5");
  const parsed p = round_trip();
  EXPECT_EQ(p.answered, (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(p.lost_as, "grpc_not_found");
  EXPECT_TRUE(progress().ended);
  EXPECT_TRUE(progress().failed);
  EXPECT_EQ(progress().end_kind, "grpc_not_found");
}

TEST_F(grpc_stream_fixture, an_ok_end_before_the_half_close_is_stream_ended) {
  make();
  write(1);
  round_trip();
  server->finish("0");
  EXPECT_EQ(round_trip().lost_as, "stream_ended");
  EXPECT_FALSE(progress().failed);
}

TEST_F(grpc_stream_fixture, a_reset_is_a_failure_named_by_its_code) {
  make();
  write(1);
  round_trip();
  server->reset(NGHTTP2_CANCEL);
  EXPECT_EQ(round_trip().lost_as, "h2_cancel");
  EXPECT_EQ(progress().end_kind, "h2_cancel");
}

TEST_F(grpc_stream_fixture, more_answers_than_messages_is_a_protocol_end) {
  make();
  write(1);
  round_trip();
  server->write(framed("a") + framed("b"));
  const parsed p = round_trip();
  EXPECT_EQ(p.answered, (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(p.lost_as, "protocol");
  EXPECT_EQ(progress().end_kind, "protocol");
}

TEST_F(grpc_stream_fixture, a_reply_message_over_max_body_is_reply_too_large) {
  codec_options o;
  o.stream = true;
  o.max_reply_bytes = 4;
  proto = make_protocol(parse_target("grpc://127.0.0.1:1/ringtest.Echo/Chat"), o);
  kind = proto->default_kinds().at(0);
  codec = proto->new_connection();
  write(1);
  round_trip();
  server->write(framed("12345"));
  EXPECT_EQ(round_trip().lost_as, "reply_too_large");
  EXPECT_TRUE(progress().failed);
  EXPECT_EQ(progress().end_kind, "reply_too_large");
}

// nghttp2 ends the session on a connection error and ignores the rest of the input; the message
// after it in the same bytes must not be counted, and the parse that holds the error says so.
TEST_F(grpc_stream_fixture, a_window_update_past_2_to_the_31_loses_the_connection_in_that_parse) {
  make();
  write(2);
  round_trip();
  std::vector<std::byte> bytes;
  put_frame(bytes, NGHTTP2_WINDOW_UPDATE, 0, 0, be32(0x7fffffff));
  put_frame(bytes, NGHTTP2_DATA, 0, 1, framed("a"));
  const parsed p = parse(bytes);
  EXPECT_TRUE(p.answered.empty());
  EXPECT_EQ(p.lost_as, "h2_flow_control_error");
  EXPECT_TRUE(progress().failed);
  EXPECT_EQ(progress().end_kind, "h2_flow_control_error");
}

TEST_F(grpc_stream_fixture, data_past_our_window_is_a_flow_control_error_not_a_protocol_error) {
  make(4, "hello", 4u << 20);
  write(2);
  round_trip();
  // We grant 1 MiB and queue a WINDOW_UPDATE at half of it, which opens the window at once in
  // nghttp2's count; the next one waits for that to be sent. So without a write between, 1.5 MiB
  // fills the window: one message of 2 MiB, then an echo, both in the parse of the overflow.
  constexpr std::size_t window = 1u << 20;
  std::string body = framed(std::string(2 * window, 'x')) + framed("a");
  std::vector<std::byte> bytes;
  for (std::size_t at = 0; at < body.size(); at += 16384) put_frame(bytes, NGHTTP2_DATA, 0, 1, body.substr(at, 16384));
  const parsed p = parse(bytes);
  EXPECT_TRUE(p.answered.empty());
  EXPECT_EQ(p.lost_as, "h2_flow_control_error");
  EXPECT_EQ(progress().end_kind, "h2_flow_control_error");
}

// A stream error nghttp2 finds itself is answered with its RST_STREAM, and the stream closes only
// when that goes out, in write_pending(): the engine then sees failed && !ended and ends it.
TEST_F(grpc_stream_fixture, a_reset_nghttp2_sends_fails_the_stream_on_the_write) {
  make();
  write(1);
  round_trip();
  std::vector<std::byte> bytes;
  put_frame(bytes, NGHTTP2_WINDOW_UPDATE, 0, 1, be32(0x7fffffff));
  EXPECT_TRUE(parse(bytes).error.empty());
  EXPECT_TRUE(progress().failed);
  EXPECT_FALSE(progress().ended);
  EXPECT_EQ(progress().end_kind, "h2_flow_control_error");
}

TEST_F(grpc_stream_fixture, a_goaway_with_an_error_is_counted_by_its_code) {
  make();
  write(1);
  round_trip();
  server->goaway(NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(round_trip().lost_as, "h2_goaway_enhance_your_calm");
  EXPECT_EQ(progress().end_kind, "h2_goaway_enhance_your_calm");
}

TEST_F(grpc_stream_fixture, a_graceful_goaway_half_closes_once_everything_is_answered) {
  make();
  write(2);
  round_trip();
  server->write(framed("a"));
  server->goaway(NGHTTP2_NO_ERROR);
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{0}));
  EXPECT_FALSE(progress().half_closed);  // one message still unanswered
  server->write(framed("b"));
  EXPECT_EQ(round_trip().answered, (std::vector<std::uint64_t>{1}));
  EXPECT_TRUE(progress().half_closed);
  server->finish("0");
  const parsed end = round_trip();
  EXPECT_TRUE(server->half_closed);
  EXPECT_TRUE(end.error.empty()) << end.error;
  EXPECT_TRUE(progress().ended);
  EXPECT_FALSE(progress().failed);
}

// The final DATA frame (END_STREAM, no trailers) is fed whole: without its pad length byte and
// padding, or the reader takes the pad length for a message flag.
TEST_F(grpc_stream_fixture, a_padded_final_data_frame_is_read_without_its_padding) {
  make();
  write(1);
  round_trip();
  std::vector<std::byte> bytes;
  put_frame(bytes, NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_PADDED, 1,
            std::string(1, '\x14') + framed("a") + std::string(20, '\0'));
  EXPECT_EQ(parse(bytes).lost_as, "grpc_no_status");
  EXPECT_EQ(progress().end_kind, "grpc_no_status");
}

}  // namespace

// grpc:// --stream — each connection carries one HTTP/2 stream, and on it one gRPC bidi call of
// the URL's method: HEADERS, then the request message (made once) again and again, each with
// gRPC's 5-byte prefix, in DATA frames; END_STREAM when the run half-closes it; the reply
// messages parsed from the DATA coming back, and grpc-status from the trailers. A "call" is one
// message, answered by the message the server sends back: matched first in, first out, as
// proto_ringrpc_stream.cpp does and for the same reason (an echo writes each message back as it
// reads it). The engine knows nothing of this.
//
// nghttp2 is the state machine (HPACK, SETTINGS, PING, GOAWAY, flow control); the codec splits
// the input itself so that a parse ends at most one message: a DATA frame of the stream is fed
// to nghttp2 piece by piece, up to the end of the next message in it (a frame may carry several
// messages, a message may span frames), every other frame whole.
//
// Flow control, both ways. Sending: nghttp2 sends DATA only while the server's stream and
// connection windows have room; a message that finds them closed waits here, in order (its
// latency running), is counted (stream_progress::credit_waits), and goes when the server's
// WINDOW_UPDATE arrives. Receiving: the windows we grant are max(1 MiB, 2 x -P framed requests),
// and nghttp2 sends WINDOW_UPDATE for what was read once half of a window is used, so our grants
// are never what holds the server back.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "grpc_framing.hpp"
#include "h2_session.hpp"
#include "protocol.hpp"

namespace ringrpc::load::h2_detail {

namespace {

constexpr std::uint64_t min_window = 1u << 20;
constexpr std::uint8_t frame_data = 0x0, flag_end_stream = 0x1, flag_padded = 0x8;
constexpr std::size_t kept_message = 200;  // of grpc-message, for the failure's message

std::int32_t window_for(const h2_settings& s) {
  const std::uint64_t wanted = 2ull * std::max<std::uint32_t>(s.stream_depth, 1) * (s.body.size() + frame_header_bytes);
  return static_cast<std::int32_t>(std::clamp<std::uint64_t>(wanted, min_window, std::numeric_limits<std::int32_t>::max()));
}

class grpc_stream_codec final : public connection_codec, public stream_control {
 public:
  explicit grpc_stream_codec(std::shared_ptr<const h2_settings> settings)
      : _settings(std::move(settings)), _messages(_settings->max_reply_bytes) {
    const std::int32_t window = window_for(*_settings);
    _session = new_client_session(&grpc_stream_codec::install, this, window, window);
  }
  ~grpc_stream_codec() override { nghttp2_session_del(_session); }
  grpc_stream_codec(const grpc_stream_codec&) = delete;
  grpc_stream_codec& operator=(const grpc_stream_codec&) = delete;

  // `seq` is not on the wire: a connection's calls are numbered 0, 1, 2, ... and a new
  // connection gets a new codec, so the count of messages sent is the sequence number.
  void write_request(std::vector<std::byte>& out, std::uint64_t, const request_kind& kind) override {
    if (!_progress.open_sent) open(kind);
    _pending.insert(_pending.end(), _settings->body.begin(), _settings->body.end());
    ++_sent;
    if (_stream_id > 0) nghttp2_session_resume_data(_session, _stream_id);  // fails harmlessly unless deferred
    write_pending(out);
    // What nghttp2 did not take waits for the server's windows (nothing else holds DATA back).
    if (_pending_from < _pending.size()) ++_progress.credit_waits;
  }

  void write_pending(std::vector<std::byte>& out) override {
    for (;;) {
      const std::uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(_session, &data);
      if (n <= 0) break;  // an error here resurfaces as the session's next receive failing
      const auto* p = reinterpret_cast<const std::byte*>(data);
      out.insert(out.end(), p, p + n);
    }
    if (_pending_from == _pending.size()) {
      _pending.clear();
      _pending_from = 0;
    } else if (_pending_from * 2 > _pending.size()) {
      // Messages held by a closed window in a closed loop: drop the sent prefix once it is most
      // of the buffer, so the buffer stays near what is held (amortized O(1) a byte).
      _pending.erase(_pending.begin(), _pending.begin() + static_cast<std::ptrdiff_t>(_pending_from));
      _pending_from = 0;
    }
  }

  reply parse_reply(std::span<const std::byte> in) override;

  stream_control* stream() noexcept override { return this; }

  void half_close(std::vector<std::byte>& out) override {
    if (_progress.half_closed || _half_close_wanted || _stream_id <= 0) return;
    _half_close_wanted = true;  // read_body ends the DATA with END_STREAM once nothing waits
    nghttp2_session_resume_data(_session, _stream_id);
    write_pending(out);
  }

  const stream_progress& progress() const noexcept override { return _progress; }
  std::size_t held_buffer_bytes() const noexcept override { return _pending.size(); }

 private:
  static void install(nghttp2_session_callbacks* cbs) {
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &grpc_stream_codec::on_frame);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &grpc_stream_codec::on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &grpc_stream_codec::on_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, &grpc_stream_codec::on_invalid);
    nghttp2_session_callbacks_set_before_frame_send_callback(cbs, &grpc_stream_codec::before_send);
  }

  // The call's HEADERS, with a body that nghttp2 reads from _pending as the windows allow. No
  // grpc-timeout: the call lasts the run, and --timeout applies to each message on our side.
  void open(const request_kind& kind) {
    _progress.open_sent = true;
    _headers = request_headers(*_settings, kind);
    nghttp2_data_provider body{};
    body.read_callback = &grpc_stream_codec::read_body;
    _stream_id = nghttp2_submit_request(_session, nullptr, _headers.data(), _headers.size(), &body, this);
    if (_stream_id < 0) {
      // Out of memory, or a header nghttp2 refuses: nothing went out, and no reply will say so.
      // The engine sees failed && !ended after this write and ends the connection.
      mark_lost(std::string("HTTP/2: the call could not be opened: ") + nghttp2_strerror(_stream_id), "h2_submit");
    }
  }

  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* self = static_cast<grpc_stream_codec*>(user);
    const std::size_t n = std::min(length, self->_pending.size() - self->_pending_from);
    if (n == 0 && !self->_half_close_wanted) return NGHTTP2_ERR_DEFERRED;  // resumed by the next message
    std::memcpy(buf, self->_pending.data() + self->_pending_from, n);
    self->_pending_from += n;
    if (self->_half_close_wanted && self->_pending_from == self->_pending.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      self->_progress.half_closed = true;
    }
    return static_cast<ssize_t>(n);
  }

  static reply fail(std::string why, std::string kind = {}) {
    reply r;
    r.status = reply_status::protocol_error;
    r.error = std::move(why);
    r.lost_as = std::move(kind);
    return r;
  }

  // Every path that ends the connection goes through here, so the stream is counted under the
  // same kind as its calls in flight (count_stream() reads end_kind), not as connection_lost. An
  // end the server already gave (an error status, a reset) keeps its kind.
  void mark_lost(const std::string& what, const std::string& kind) {
    if (_progress.failed) return;
    _progress.failed = true;
    _progress.end_kind = kind;
    _progress.end_message = what;
  }
  reply lose(std::string what, std::string kind) {
    mark_lost(what, kind);
    return fail(std::move(what), std::move(kind));
  }
  // The server broke the stream's rules: failed "protocol", not a lost connection.
  reply violation(std::string what) { return lose(std::move(what), "protocol"); }
  reply not_h2(std::string what) {
    mark_lost(what, "protocol");
    return fail(std::move(what));
  }

  std::size_t split(std::span<const std::byte> in, bool& message_end);
  void feed_final_data(std::span<const std::byte> payload, std::uint8_t flags);
  reply after_feed(std::size_t used, bool message_end);
  reply session_broken();
  reply on_end(std::size_t used);
  void end(std::string kind, std::string message);

  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user);
  static int on_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* user);
  static int on_invalid(nghttp2_session*, const nghttp2_frame*, int lib_error_code, void* user) {
    static_cast<grpc_stream_codec*>(user)->_invalid_code = code_of(lib_error_code);
    return 0;
  }
  // Our GOAWAY's code is the connection error nghttp2 found (DATA past our window reaches no
  // on_invalid callback: nghttp2 terminates the session directly).
  static int before_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<grpc_stream_codec*>(user)->_goaway_sent_code = frame->goaway.error_code;
    return 0;
  }

  std::shared_ptr<const h2_settings> _settings;
  nghttp2_session* _session = nullptr;
  std::vector<nghttp2_nv> _headers;
  std::int32_t _stream_id = 0;
  // The framed messages issued and not yet taken by nghttp2, from _pending_from.
  std::vector<std::byte> _pending;
  std::size_t _pending_from = 0;
  bool _half_close_wanted = false;
  std::uint64_t _sent = 0;      // messages issued (sent or waiting for a window)
  std::uint64_t _answered = 0;  // messages back: the next one answers message _answered
  // Where the input stands: inside a DATA frame of the stream (split() feeds it piece by piece).
  std::size_t _frame_left = 0;  // its bytes not yet fed (padding included)
  std::size_t _pad_left = 0;    // its padding, the last bytes
  bool _pad_length_next = false;  // PADDED: the pad length byte comes first
  bool _seen_frame = false;
  grpc_message_reader _messages;
  unsigned _http_status = 0;
  std::string _grpc_status;
  std::string _grpc_message;
  bool _end_seen = false;   // the stream ended in the frames just fed (trailers or a reset)
  bool _goaway = false;
  std::uint32_t _goaway_error = NGHTTP2_NO_ERROR;
  std::uint32_t _invalid_code = 0;
  std::uint32_t _goaway_sent_code = NGHTTP2_NO_ERROR;
  stream_progress _progress;
};

// How many bytes at the front of `in` this parse feeds: whole frames, and of a DATA frame of the
// stream no more than to the end of its next message (`message_end` then set).
std::size_t grpc_stream_codec::split(std::span<const std::byte> in, bool& message_end) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(in.data());
  std::size_t used = 0;
  message_end = false;
  while (!message_end) {
    if (_frame_left > 0) {
      const std::size_t avail = std::min(in.size() - used, _frame_left);
      if (avail == 0) break;
      std::size_t n = 1;
      if (_pad_length_next) {
        _pad_left = b[used];
        _pad_length_next = false;
        if (_pad_left >= _frame_left) return used + 1;  // nghttp2 rejects the frame: a session error
      } else if (_frame_left > _pad_left) {
        n = _messages.feed_to_message_end(in.subspan(used, std::min(avail, _frame_left - _pad_left)), message_end);
        if (_messages.error() != nullptr) return used + n;  // after_feed fails the connection
      } else {
        n = avail;  // padding
        _pad_left -= n;
      }
      used += n;
      _frame_left -= n;
      continue;
    }
    if (in.size() - used < frame_header_bytes) break;
    const std::uint8_t* h = b + used;
    const std::size_t length = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
    const std::uint8_t type = h[3], flags = h[4];
    const std::int32_t id = static_cast<std::int32_t>(((std::uint32_t{h[5]} & 0x7f) << 24) | (std::uint32_t{h[6]} << 16) |
                                                      (std::uint32_t{h[7]} << 8) | h[8]);
    if (length > max_frame_payload) break;  // after_feed (or the next parse) says so
    // A DATA frame of the stream without END_STREAM: piece by piece. One with END_STREAM (no
    // trailers follow: the stream fails as grpc_no_status) and every other frame: whole.
    if (type == frame_data && id == _stream_id && (flags & flag_end_stream) == 0 && length > 0) {
      used += frame_header_bytes;
      _frame_left = length;
      _pad_left = 0;
      _pad_length_next = (flags & flag_padded) != 0;
      continue;
    }
    if (in.size() - used < frame_header_bytes + length) break;
    used += frame_header_bytes + length;
    if (type == frame_data) feed_final_data(in.subspan(used - length, length), flags);
    if ((flags & flag_end_stream) != 0 || type == NGHTTP2_RST_STREAM || type == NGHTTP2_GOAWAY ||
        type == NGHTTP2_CONTINUATION) {
      break;  // what may end the stream is looked at before anything after it
    }
  }
  return used;
}

// A DATA frame of the stream with END_STREAM, fed whole: its messages, without the pad length
// byte and the padding (a pad length past the frame is nghttp2's to reject: nothing is fed).
void grpc_stream_codec::feed_final_data(std::span<const std::byte> payload, std::uint8_t flags) {
  if ((flags & flag_padded) != 0) {
    if (payload.empty()) return;
    const std::size_t pad = static_cast<std::uint8_t>(payload[0]);
    if (1 + pad > payload.size()) return;
    payload = payload.subspan(1, payload.size() - 1 - pad);
  }
  _messages.feed(payload);  // counted with the end, not answered
}

reply grpc_stream_codec::parse_reply(std::span<const std::byte> in) {
  if (_stream_id < 0) return lose(_progress.end_message, _progress.end_kind);  // the open failed
  if (in.size() >= frame_header_bytes && _frame_left == 0) {
    const auto* h = reinterpret_cast<const std::uint8_t*>(in.data());
    const std::size_t length = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
    // No kind on the reply (the stream's is "protocol"): the engine then diagnoses a first
    // reply that is not HTTP/2 at all (an HTTP/1.1 server's answer reads as a huge frame).
    if (length > max_frame_payload) {
      return not_h2("HTTP/2 frame of " + std::to_string(length) + " bytes over the 16384 allowed");
    }
    if (!_seen_frame && h[3] != NGHTTP2_SETTINGS) return not_h2("the server's first HTTP/2 frame is not SETTINGS");
  }
  bool message_end = false;
  const std::size_t used = split(in, message_end);
  if (used == 0) return reply{};  // incomplete
  _seen_frame = true;
  const ssize_t fed = nghttp2_session_mem_recv(_session, reinterpret_cast<const std::uint8_t*>(in.data()), used);
  if (fed < 0) {
    return lose(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(fed)),
                "h2_" + code_name(code_of(static_cast<int>(fed))));
  }
  return after_feed(used, message_end);
}

// What the bytes just fed amount to: a session error, the stream's end, a message, or nothing
// the engine counts.
reply grpc_stream_codec::after_feed(std::size_t used, bool message_end) {
  if (_messages.error() != nullptr) {
    if (_messages.too_large()) return lose(std::string(_messages.error()), "reply_too_large");
    return violation(std::string("the reply messages: ") + _messages.error());
  }
  if (_goaway_error != NGHTTP2_NO_ERROR) {
    return lose("HTTP/2: the server sent GOAWAY " + std::string(nghttp2_http2_strerror(_goaway_error)),
                "h2_goaway_" + code_name(_goaway_error));
  }
  // nghttp2 found a connection error in these bytes (a WINDOW_UPDATE past 2^31-1, DATA past our
  // window): it queued a GOAWAY and ignores the rest of the input, while split() goes on cutting
  // messages out of it. Whatever this parse holds after the error is not an answer.
  if (!_goaway && (nghttp2_session_check_request_allowed(_session) == 0 || nghttp2_session_want_read(_session) == 0)) {
    return session_broken();
  }
  if (_end_seen && !_progress.ended) return on_end(used);
  reply r;
  r.consumed = used;
  r.close_after = _goaway;  // a graceful GOAWAY: no more messages on this connection
  r.status = reply_status::no_reply;
  if (message_end) {
    _progress.opened = true;
    if (_answered == _sent) return violation("the server sent more messages than it was sent");
    r.status = reply_status::ok;
    r.seq = _answered++;
  }
  if (_goaway && _answered == _sent && !_half_close_wanted && _stream_id > 0) {
    // A graceful GOAWAY: no message is issued here any more (close_after), so half-close now
    // that all are answered; the server ends the call OK and closes, and the engine reconnects
    // without an error instead of idling until the end of the run.
    _half_close_wanted = true;
    nghttp2_session_resume_data(_session, _stream_id);  // the END_STREAM goes with the next write
  }
  return r;
}

// The connection error nghttp2 found, by the code of the GOAWAY it sends for it: that frame
// goes out only on a send, so it is made here (and dropped: the engine shuts the socket on this
// reply). Any frame still queued (a WINDOW_UPDATE) goes with it, unsent, as harmless.
reply grpc_stream_codec::session_broken() {
  const stream_progress kept = _progress;  // the send may close the stream: its end is this error
  const std::uint8_t* data = nullptr;
  while (nghttp2_session_mem_send(_session, &data) > 0) {
  }
  _progress = kept;
  std::uint32_t code = _goaway_sent_code;
  if (code == NGHTTP2_NO_ERROR) code = _invalid_code != 0 ? _invalid_code : std::uint32_t{NGHTTP2_PROTOCOL_ERROR};
  return lose("HTTP/2: the server's frames broke the session: " + std::string(nghttp2_http2_strerror(code)),
              "h2_" + code_name(code));
}

// The end after our half-close with every message answered and grpc-status 0 is the normal one.
// Any other takes the connection down (its messages in flight counted under the end's kind, or
// "stream_ended" for an OK end before the half-close), and the engine reconnects with a new
// stream, as it does for a lost connection.
reply grpc_stream_codec::on_end(std::size_t used) {
  _progress.ended = true;
  if (!_progress.failed && _progress.half_closed && _answered == _sent) {
    reply r;
    r.status = reply_status::no_reply;
    r.consumed = used;
    return r;
  }
  reply lost = fail("the stream ended: " + (_progress.failed ? _progress.end_kind + " " + _progress.end_message
                                                             : std::string("ok, before the half-close")));
  lost.lost_as = _progress.failed ? _progress.end_kind : std::string("stream_ended");
  return lost;
}

// The stream's end, by its kind ("" for OK): from the trailers or a reset.
void grpc_stream_codec::end(std::string kind, std::string message) {
  if (_end_seen) return;
  _end_seen = true;
  if (kind.empty()) return;
  _progress.failed = true;
  _progress.end_kind = std::move(kind);
  _progress.end_message = std::move(message);
}

int grpc_stream_codec::on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<grpc_stream_codec*>(user);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    self->_goaway = true;
    self->_goaway_error = frame->goaway.error_code;
    return 0;
  }
  if (frame->hd.stream_id != self->_stream_id) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
    if (self->_http_status == 200) self->_progress.opened = true;  // the response's headers: the call is on
  }
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    self->end(grpc_call_outcome(self->_http_status, self->_grpc_status, self->_messages), self->_grpc_message);
  } else if (frame->hd.type == NGHTTP2_RST_STREAM) {
    self->end("h2_" + code_name(frame->rst_stream.error_code), "the server reset the stream");
  }
  return 0;
}

int grpc_stream_codec::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                                 std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                                 void* user) {
  auto* self = static_cast<grpc_stream_codec*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != self->_stream_id) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    self->_http_status = http_status_of(v);
  } else if (n == "grpc-status") {
    self->_grpc_status.assign(v.substr(0, 8));
  } else if (n == "grpc-message") {
    self->_grpc_message.assign(v.substr(0, kept_message));  // percent-encoded, as sent
  }
  return 0;
}

// A stream closed without trailers or a reset we saw (nghttp2 reset it, or a GOAWAY left it
// out): failed by the code it closed with.
int grpc_stream_codec::on_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* user) {
  auto* self = static_cast<grpc_stream_codec*>(user);
  if (id != self->_stream_id || self->_end_seen) return 0;
  self->end("h2_" + code_name(error_code == NGHTTP2_NO_ERROR ? std::uint32_t{NGHTTP2_CANCEL} : error_code),
            "the stream closed without trailers");
  return 0;
}

}  // namespace

std::unique_ptr<connection_codec> make_grpc_stream_codec(std::shared_ptr<const h2_settings> settings) {
  return std::make_unique<grpc_stream_codec>(std::move(settings));
}

}  // namespace ringrpc::load::h2_detail

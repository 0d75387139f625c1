// ringrpc:// --stream — each connection carries one bidi stream of the URL's method
// (docs/design/streams.md), and a "call" is one message on it: sent as a StreamMessage, answered
// by the message the server sends back. The engine knows nothing of this: it issues calls with
// consecutive sequence numbers and matches replies by them, as it does for unary ringrpc.
//
// Matching is FIFO: a stream's callbacks run one at a time in arrival order on the server
// (a serial lane per stream) and echo_stream writes each message back from on_message, so the
// k-th message back answers the k-th message sent. A method that answers out of order, or not
// one for one, is not what --stream measures.
//
// Credit, both ways, as a real client keeps it: a message goes only while the server's window
// has room (16 messages and 256 KiB at the start, topped up by its StreamCredit); one that finds
// no credit waits here, in order, and its latency keeps running (the target is slow to take it).
// The server grants back in batches of half its window (8 messages, wire/stream_credit.hpp), so
// from about -P 10 messages wait for credit; they are counted (stream_progress::credit_waits).
// The messages coming back are consumed after each receive, and granted back in batches too, with a
// window of max(16, 2 x -P) messages so that the client's grants are never what holds the
// server back.
#include <algorithm>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>

#include "proto_ringrpc.hpp"
#include "protocol.hpp"
#include "ringrpc/status.hpp"
#include "wire/frame_codec.hpp"
#include "wire/stream_credit.hpp"

namespace ringrpc::load {

namespace {

using ringrpc::detail::frame_view;
using ringrpc_detail::ringrpc_settings;

// One stream per connection, so one id: any id but 0 (connection-level) would do.
constexpr std::uint64_t stream_id = 1;
constexpr std::uint8_t bidi = 3;  // stream_kind on the wire

frame_view stream_frame(wire::Kind kind) {
  frame_view f;
  f.call_id = stream_id;
  f.kind = kind;
  return f;
}

class ringrpc_stream_codec final : public connection_codec, public stream_control {
 public:
  explicit ringrpc_stream_codec(std::shared_ptr<const ringrpc_settings> settings)
      : _settings(std::move(settings)),
        _options(&_settings->options),
        _payload(*_options),
        _window_messages(std::max<std::uint32_t>(ringrpc::detail::default_stream_window_messages,
                                                 std::min<std::uint32_t>(_options->stream_depth, 1u << 20) * 2)),
        _window_bytes(std::min<std::uint64_t>(std::uint64_t{_window_messages} * _options->max_reply_bytes,
                                              ringrpc::detail::max_stream_credit_bytes)),
        _receive(_window_messages, _window_bytes) {
    _metadata.pairs = _settings->metadata;
  }

  // `seq` is not on the wire: the engine numbers a connection's calls 0, 1, 2, ... and a new
  // connection gets a new codec, so the count of messages sent is the sequence number.
  void write_request(std::vector<std::byte>& out, std::uint64_t, const request_kind& kind) override {
    if (!_progress.open_sent) write_open(out, kind.method);
    frame_view f = stream_frame(wire::Kind::StreamMessage);
    f.payload = _payload.next();
    const auto bytes = _encoder.encode(f);
    ++_sent;
    if (_held.empty() && _send.can_send()) {
      _send.spend(f.payload.size());
      out.insert(out.end(), bytes.begin(), bytes.end());
      return;
    }
    ++_progress.credit_waits;
    _held_bytes.insert(_held_bytes.end(), bytes.begin(), bytes.end());
    _held.push_back({static_cast<std::uint32_t>(bytes.size()), static_cast<std::uint32_t>(f.payload.size())});
  }

  reply parse_reply(std::span<const std::byte> in) override {
    frame_view v;
    reply r;
    if (!ringrpc_detail::read_frame(in, _options->max_reply_bytes, _scratch, v, r)) return r;
    if (v.call_id != stream_id) return violation("a frame for call id " + std::to_string(v.call_id) + ", not the stream");
    switch (v.kind) {
      case wire::Kind::StreamMessage: return on_message(v, std::move(r));
      case wire::Kind::StreamCredit: return on_credit(v, std::move(r));
      case wire::Kind::Reply:
      case wire::Kind::Error: return on_end(v, std::move(r));
      default: return violation("unexpected frame kind " + std::to_string(static_cast<int>(v.kind)) + " on the stream");
    }
  }

  // After each receive: the grants owed, then the messages that credit now lets out.
  void write_pending(std::vector<std::byte>& out) override {
    write_grants(out);
    while (!_held.empty() && _send.can_send()) {
      const held_message m = _held.front();
      _held.pop_front();
      _send.spend(m.payload_bytes);
      out.insert(out.end(), _held_bytes.begin() + static_cast<std::ptrdiff_t>(_held_from),
                 _held_bytes.begin() + static_cast<std::ptrdiff_t>(_held_from + m.frame_bytes));
      _held_from += m.frame_bytes;
    }
    if (_held.empty()) {
      _held_bytes.clear();
      _held_from = 0;
      if (_close_after_held) write_half_close(out);
    } else if (_held_from * 2 > _held_bytes.size()) {
      // In a closed loop above the server's window the queue never empties: drop the sent
      // prefix once it is most of the buffer, so the buffer stays near what is held (each byte
      // is moved at most once per halving: amortized O(1)).
      _held_bytes.erase(_held_bytes.begin(), _held_bytes.begin() + static_cast<std::ptrdiff_t>(_held_from));
      _held_from = 0;
    }
  }

  stream_control* stream() noexcept override { return this; }

  void half_close(std::vector<std::byte>& out) override {
    if (_progress.half_closed || _close_after_held) return;
    // Never ahead of a message still waiting for credit: a message after the half-close ends
    // the stream with BadRequest.
    if (!_held.empty()) {
      _close_after_held = true;
      return;
    }
    write_half_close(out);
  }

  const stream_progress& progress() const noexcept override { return _progress; }
  std::size_t held_buffer_bytes() const noexcept override { return _held_bytes.size(); }

 private:
  struct held_message {
    std::uint32_t frame_bytes;
    std::uint32_t payload_bytes;
  };

  // No deadline on the open: the stream lasts the run, and --timeout applies to each message
  // on the client's side (the engine's expiry), as it would to a call.
  void write_open(std::vector<std::byte>& out, std::string_view method) {
    frame_view f = stream_frame(wire::Kind::StreamOpen);
    f.method = method;
    f.stream_kind = bidi;
    f.credit_messages = _window_messages;
    f.credit_bytes = _window_bytes;
    if (!_metadata.pairs.empty()) f.metadata_out = &_metadata;
    const auto bytes = _encoder.encode(f);
    out.insert(out.end(), bytes.begin(), bytes.end());
    _progress.open_sent = true;
  }

  // The messages read since the last write_pending are consumed here, not on arrival: the
  // server's credit is then what went on the wire, so a server that sends past it is caught
  // (receive_credit::arrive) rather than covered by a grant it has not seen yet.
  void write_grants(std::vector<std::byte>& out) {
    for (const std::size_t size : _consumed) {
      if (const auto g = _receive.consumed(size)) {
        frame_view c = stream_frame(wire::Kind::StreamCredit);
        c.credit_messages = g.messages;
        c.credit_bytes = g.bytes;
        const auto bytes = _encoder.encode(c);
        out.insert(out.end(), bytes.begin(), bytes.end());
      }
    }
    _consumed.clear();
  }

  void write_half_close(std::vector<std::byte>& out) {
    const auto bytes = _encoder.encode(stream_frame(wire::Kind::StreamHalfClose));
    out.insert(out.end(), bytes.begin(), bytes.end());
    _progress.half_closed = true;
    _close_after_held = false;
  }

  // The server broke the stream's rules: the connection goes down (as for any protocol error)
  // and the stream is counted failed as "protocol", not as a lost connection.
  reply violation(std::string what) {
    _progress.failed = true;
    _progress.end_kind = "protocol";
    _progress.end_message = what;
    return protocol_error(std::move(what));
  }

  reply on_message(const frame_view& v, reply r) {
    _progress.opened = true;
    if (!_receive.arrive(v.payload.size())) return violation("the server sent a message beyond the credit granted");
    _consumed.push_back(v.payload.size());
    if (_answered == _sent) return violation("the server sent more messages than it was sent");
    r.status = reply_status::ok;
    r.seq = _answered++;
    if (_options->verify_echo && !std::ranges::equal(v.payload, _options->payload)) {
      r.status = reply_status::error_reply;
      r.error = "payload_mismatch";
    }
    return r;
  }

  reply on_credit(const frame_view& v, reply r) {
    _progress.opened = true;
    if (!_send.grant(v.credit_messages, v.credit_bytes)) return violation("the server's credit grant overflowed");
    r.status = reply_status::no_reply;
    return r;  // no_reply; write_pending sends what it lets out
  }

  // An end after our half-close with every message answered is the normal one. Any other takes
  // the connection down (its calls in flight counted under the end's status, or "stream_ended"),
  // and the engine reconnects with a new stream, as it does for a lost connection.
  reply on_end(const frame_view& v, reply r) {
    _progress.ended = true;
    if (v.kind == wire::Kind::Error) {
      _progress.failed = true;
      _progress.end_kind = std::string(to_string(v.code == status::ok ? status::internal : v.code));
      _progress.end_message = std::string(v.message);
    } else {
      _progress.opened = true;
    }
    if (!_progress.failed && _progress.half_closed && _answered == _sent) {
      r.status = reply_status::no_reply;
      return r;
    }
    reply lost = protocol_error("the stream ended: " + (_progress.failed ? _progress.end_kind + " " + _progress.end_message
                                                                         : std::string("ok, before the half-close")));
    lost.lost_as = _progress.failed ? _progress.end_kind : std::string("stream_ended");
    return lost;
  }

  std::shared_ptr<const ringrpc_settings> _settings;
  const codec_options* _options;
  ringrpc_detail::payload_source _payload;
  std::uint32_t _window_messages;  // what we grant the server
  std::uint64_t _window_bytes;
  ringrpc::detail::receive_credit _receive;
  ringrpc::detail::send_credit _send{ringrpc::detail::default_stream_window_messages,
                                     ringrpc::detail::default_stream_window_bytes};
  std::uint64_t _sent = 0;      // messages issued (sent or held)
  std::uint64_t _answered = 0;  // messages back: the next one answers message _answered
  // Messages waiting for credit, encoded back to back from _held_from, in the order issued.
  std::vector<std::byte> _held_bytes;
  std::size_t _held_from = 0;
  std::deque<held_message> _held;
  bool _close_after_held = false;
  std::vector<std::size_t> _consumed;  // payload sizes of the messages read, granted back by write_pending
  stream_progress _progress;
  ringrpc::detail::metadata_to_send _metadata;
  ringrpc::detail::frame_encoder _encoder;
  std::vector<std::uint64_t> _scratch;
};

}  // namespace

std::unique_ptr<connection_codec> ringrpc_detail::make_stream_codec(std::shared_ptr<const ringrpc_settings> settings) {
  return std::make_unique<ringrpc_stream_codec>(std::move(settings));
}

}  // namespace ringrpc::load

// h2c:// and grpc:// — HTTP/2 over plain TCP, many streams per connection as the depth. A
// client of its own for calls of one request and one response each: at tens of thousands of
// calls per second per core, nghttp2's session (a stream object, a priority tree, an HPACK
// encoder and a frame queue per call, and a pass over its callbacks per frame) took about half of
// ringrpc-load's CPU, so that the load tool, not the server, was the bottleneck. Here a request
// is a header block encoded once per request kind (indexed static-table fields and literals
// without indexing: no encoder table to keep in step with the server, and the same bytes each
// time, as a steady-state gRPC client's) behind a frame header, then DATA frames within the
// windows; replies are read frame by frame, their header blocks through nghttp2's HPACK decoder
// alone. The rules of RFC 9113 a client must keep are kept: the server's SETTINGS (concurrent
// streams, initial window, frame size), flow control both ways, SETTINGS and PING acks, RST_STREAM
// (REFUSED_STREAM: sent again), GOAWAY's last stream, and connection errors named by their code.
// grpc:// --stream (one long bidi call) keeps nghttp2's session: proto_grpc_stream.cpp.
//
// parse_reply ends at most one call per parse: it reads whole frames from the front up to and
// including the first that ends a call, so the engine's framing stays the one every protocol
// shares. gRPC adds its message prefix to the request body and reads grpc-status from the
// trailers (grpc_framing.hpp).
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc/h2_wire.hpp"
#include "grpc_framing.hpp"
#include "h2_request_block.hpp"
#include "h2_session.hpp"
#include "h2_stream_table.hpp"
#include "message_template.hpp"
#include "protocol.hpp"

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_h2_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

namespace h2 = ringrpc::detail::grpc::h2;
using h2_detail::code_name;
using h2_detail::frame_header_bytes;
using h2_detail::h2_settings;
using h2_detail::max_frame_payload;
using h2_detail::put_request_field;
using h2_detail::request_block;

// Big windows: fewer WINDOW_UPDATE frames per call; the reply limit still caps each stream.
constexpr std::uint32_t stream_window = 16 << 20;
constexpr std::uint32_t connection_window = 1 << 30;
// Past this stream id the connection asks to be replaced before ids run out (2^31 - 1).
constexpr std::int64_t last_usable_stream_id = 0x7fffffff - 2 * 65536;
constexpr std::int64_t last_stream_id = 0x7fffffff;
// A stream the server refused (REFUSED_STREAM: it never processed it) is sent again this many
// times on the same connection; past that it counts as an h2_refused_stream error, so a server
// that refuses everything ends calls instead of looping on them.
constexpr unsigned max_refusals = 8;
// Until the server's SETTINGS say its limit, open at most this many streams (RFC 9113's lowest
// recommended limit), not the unbounded default that a server refuses stream by stream.
constexpr std::uint32_t streams_before_settings = 100;
// SETTINGS and PING frames answered between two sends: past this the server floods us, and the
// connection ends as ENHANCE_YOUR_CALM (nghttp2's session drew the same line).
constexpr unsigned max_unsent_acks = 1000;
// A reply's header block: its decoded size (RFC 9113 §6.5.2's measure, 32 bytes a field plus
// name and value) and how many frames it may come in. A block the server never ends is a flood.
constexpr std::size_t max_header_list_bytes = 64 << 10;
constexpr unsigned max_block_frames = 32;

// One frame as read: its header's fields and its payload.
struct frame {
  std::uint8_t type;
  std::uint8_t flags;
  std::int32_t stream;
  std::span<const std::byte> payload;
  bool has(std::uint8_t flag) const noexcept { return (flags & flag) != 0; }
};

// One call's stream. Reused through a free list: a run's steady state allocates none.
struct stream_state {
  std::int32_t id = 0;  // 0 until opened
  std::uint64_t seq = 0;
  const request_kind* kind = nullptr;  // kept to send the request again if refused
  unsigned refusals = 0;
  std::int64_t send_window = 0;  // what we may still send on it
  std::int64_t recv_window = 0;  // what the server may still send on it
  std::uint32_t recv_unacked = 0;  // DATA bytes read since our last WINDOW_UPDATE for it
  std::size_t body_sent = 0;
  std::uint64_t reply_bytes = 0;
  unsigned http_status = 0;
  bool has_body = false;
  bool body_done = false;  // our END_STREAM is sent
  bool blocked = false;    // its body waits for window (in _blocked)
  // A request with placeholders (path, --template body): rendered when the call is written, and
  // kept with its stream so that a refused stream goes again with the same bytes. The buffers
  // keep their capacity from call to call.
  bool templated = false;
  bool own_block = false;  // `block` is this call's (a path with placeholders)
  std::string path;
  std::vector<std::byte> block;
  std::vector<std::byte> body;
  std::string grpc_status;
  grpc_message_reader messages;
};

class h2_codec final : public connection_codec {
 public:
  explicit h2_codec(std::shared_ptr<const h2_settings> settings)
      : _settings(std::move(settings)), _renderer(_settings->templates->data) {
    if (nghttp2_hd_inflate_new(&_inflater) != 0) throw std::bad_alloc();
  }
  ~h2_codec() override { nghttp2_hd_inflate_del(_inflater); }
  h2_codec(const h2_codec&) = delete;
  h2_codec& operator=(const h2_codec&) = delete;

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    start(out);
    stream_state* s = take_stream();
    s->seq = seq;
    s->kind = &kind;
    s->refusals = 0;
    render(s);
    open_or_wait(s, out);
  }

  void write_pending(std::vector<std::byte>& out) override {
    start(out);
    out.insert(out.end(), _control.begin(), _control.end());
    _control.clear();
    _unsent_acks = 0;
    if (_table_update_after_ack) {  // the acknowledgement is out: the next block may say it
      _table_update_after_ack = false;
      _table_update_due = true;
    }
    // Refused streams go again, on this connection while it takes new streams. After a GOAWAY
    // they stay unanswered: the engine gives such calls back to be issued on the next
    // connection when this one closes (as calls behind an HTTP/1.1 Connection: close).
    for (stream_state* s : _retry) {
      if (_goaway || _retiring) {
        give_back(s);
      } else {
        open_or_wait(s, out);
      }
    }
    _retry.clear();
    while (_waiting_head < _waiting.size() && _streams.size() < _peer_max_streams) {
      open(_waiting[_waiting_head++], out);
    }
    if (_waiting_head * 2 >= _waiting.size()) {
      // Drop the opened front once it is half the queue: at a depth above the server's limit
      // the queue never runs empty, and would otherwise keep a slot for every call made.
      _waiting.erase(_waiting.begin(), _waiting.begin() + static_cast<std::ptrdiff_t>(_waiting_head));
      _waiting_head = 0;
    }
    send_blocked(out);
    if (_streams.size() == 0 && _retiring && !_goaway_sent) {
      // Stream ids nearly used up: say goodbye so the server closes and the engine reconnects.
      std::byte* p = h2::put_frame(out, 8, h2::t_goaway, 0, 0);
      h2::write32(p, 0);  // the last stream the server opened: none (push is off)
      h2::write32(p + 4, h2::e_no_error);
      _goaway_sent = true;
    }
  }

  reply parse_reply(std::span<const std::byte> in) override {
    reply r;
    _ended = false;
    std::size_t at = 0;
    while (in.size() - at >= frame_header_bytes) {
      const std::byte* h = in.data() + at;
      const std::uint32_t length = h2::read24(h);
      const auto type = static_cast<std::uint8_t>(h[3]);
      if (length > max_frame_payload) {
        if (at > 0) break;  // the frames before it first; the bad one is the next parse's
        return fail(r, "HTTP/2 frame of " + std::to_string(length) + " bytes over the 16384 allowed");
      }
      if (!_seen_frame && type != h2::t_settings) return fail(r, "the server's first HTTP/2 frame is not SETTINGS");
      if (in.size() - at < frame_header_bytes + length) break;
      _seen_frame = true;
      const frame f{type, static_cast<std::uint8_t>(h[4]), static_cast<std::int32_t>(h2::read32(h + 5) & 0x7fffffffu),
                    in.subspan(at + frame_header_bytes, length)};
      at += frame_header_bytes + length;
      if (!on_frame(f)) return fail(r, std::move(_failure), std::move(_failure_kind));
      if (_ended) break;
    }
    if (at == 0) return r;
    r.consumed = at;
    r.close_after = _goaway || _retiring;
    if (!_ended) {
      r.status = reply_status::no_reply;
      return r;
    }
    r.seq = _ended_seq;
    r.status = _ended_error.empty() ? reply_status::ok : reply_status::error_reply;
    r.error = std::move(_ended_error);
    return r;
  }

 private:
  static reply fail(reply& r, std::string why, std::string kind = {}) {
    r.status = reply_status::protocol_error;
    r.error = std::move(why);
    r.lost_as = std::move(kind);
    return r;
  }

  // The connection's first bytes: the preface, our SETTINGS (no push, our stream window) and
  // the connection's window raised to ours.
  void start(std::vector<std::byte>& out) {
    if (_started) return;
    _started = true;
    const auto* preface = reinterpret_cast<const std::byte*>(h2::client_preface.data());
    out.insert(out.end(), preface, preface + h2::client_preface.size());
    std::byte* p = h2::put_frame(out, 12, h2::t_settings, 0, 0);
    p[0] = std::byte{0};
    p[1] = std::byte(h2::s_enable_push);
    h2::write32(p + 2, 0);
    p[6] = std::byte{0};
    p[7] = std::byte(h2::s_initial_window_size);
    h2::write32(p + 8, stream_window);
    h2::put_window_update(out, 0, connection_window - h2::default_window);
  }

  // --- sending ------------------------------------------------------------------------------

  void open_or_wait(stream_state* s, std::vector<std::byte>& out) {
    if (_goaway) {
      give_back(s);  // the server takes no new stream: the engine issues the call again elsewhere
    } else if (_streams.size() >= _peer_max_streams || _waiting_head < _waiting.size()) {
      _waiting.push_back(s);  // in order, behind those already waiting
    } else {
      open(s, out);
    }
  }

  // Opens a stream for the call on `s` (a first attempt or a refused one's next): its HEADERS,
  // and as much of its body as the windows allow.
  void open(stream_state* s, std::vector<std::byte>& out) {
    if (_next_id > last_stream_id) {
      // Out of stream ids: the call stays unanswered and times out or is reported unfinished;
      // the connection asked to be replaced long before (last_usable_stream_id).
      give_back(s);
      return;
    }
    s->id = static_cast<std::int32_t>(_next_id);
    _next_id += 2;
    if (s->id >= last_usable_stream_id) _retiring = true;
    s->send_window = _peer_initial_window;
    s->recv_window = stream_window;
    s->recv_unacked = 0;
    s->body_sent = 0;
    s->reply_bytes = 0;
    s->http_status = 0;
    s->blocked = false;
    s->grpc_status.clear();
    s->messages.reset();
    _streams.insert(s);
    const std::vector<std::byte>* block = s->own_block ? &s->block : &block_for(*s->kind).whole;
    if (_table_update_due) {
      _table_update_due = false;
      _updated_block.assign(1, std::byte{0x20});  // dynamic table size update: 0
      _updated_block.insert(_updated_block.end(), block->begin(), block->end());
      block = &_updated_block;
    }
    const bool body = s->has_body && !body_of(s).empty();
    put_headers(out, s->id, *block, !body);
    s->body_done = !body;
    if (body) send_body(s, out);
  }

  void put_headers(std::vector<std::byte>& out, std::int32_t id, const std::vector<std::byte>& block, bool end_stream) {
    std::size_t sent = 0;
    bool first = true;
    do {
      const std::size_t n = std::min<std::size_t>(block.size() - sent, _peer_max_frame);
      const bool last = sent + n == block.size();
      std::uint8_t flags = last ? h2::f_end_headers : 0;
      if (first && end_stream) flags |= h2::f_end_stream;
      std::byte* p = h2::put_frame(out, static_cast<std::uint32_t>(n), first ? h2::t_headers : h2::t_continuation,
                                   flags, static_cast<std::uint32_t>(id));
      if (n > 0) std::memcpy(p, block.data() + sent, n);
      sent += n;
      first = false;
    } while (sent < block.size());
  }

  // DATA frames of `s`'s body while both windows allow; the last carries END_STREAM. What they
  // do not allow waits in _blocked for a WINDOW_UPDATE.
  void send_body(stream_state* s, std::vector<std::byte>& out) {
    const std::vector<std::byte>& body = body_of(s);
    while (s->body_sent < body.size()) {
      const std::int64_t n = std::min({static_cast<std::int64_t>(body.size() - s->body_sent), _send_window,
                                       s->send_window, static_cast<std::int64_t>(_peer_max_frame)});
      if (n <= 0) {
        if (!s->blocked) _blocked.push_back(s);
        s->blocked = true;
        return;
      }
      const bool last = s->body_sent + static_cast<std::size_t>(n) == body.size();
      std::byte* p = h2::put_frame(out, static_cast<std::uint32_t>(n), h2::t_data, last ? h2::f_end_stream : 0,
                                   static_cast<std::uint32_t>(s->id));
      std::memcpy(p, body.data() + s->body_sent, static_cast<std::size_t>(n));
      s->body_sent += static_cast<std::size_t>(n);
      _send_window -= n;
      s->send_window -= n;
    }
    s->body_done = true;
    s->blocked = false;
  }

  // The bodies waiting for window, in order. A stream that blocks again keeps its flag, so
  // send_body does not append it to _blocked while this walks it.
  void send_blocked(std::vector<std::byte>& out) {
    if (_blocked.empty() || _send_window <= 0) return;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < _blocked.size(); ++i) {
      stream_state* s = _blocked[i];
      send_body(s, out);
      if (s->blocked) _blocked[kept++] = s;
    }
    _blocked.resize(kept);
  }

  const std::vector<std::byte>& body_of(const stream_state* s) const {
    return s->templated ? s->body : _settings->body;
  }

  // The path and body of the call on `s`, when its kind's path has placeholders or --template
  // gives the body; the kind's header block and the run's body otherwise.
  void render(stream_state* s) {
    const request_kind& kind = *s->kind;
    s->has_body = _settings->grpc || kind.method == "POST" || kind.method == "PUT" || kind.method == "PATCH";
    const request_template* path = path_template(kind);
    const bool body = _settings->templates->has_payload && !_settings->grpc && s->has_body;
    const message_template* message = _settings->grpc ? _settings->templates->message.get() : nullptr;
    s->own_block = path != nullptr;
    s->templated = path != nullptr || body || message != nullptr;
    if (!s->templated) return;
    const request_template& payload = _settings->templates->payload;
    const bool counted = (path != nullptr && (path->uses_seq() || path->uses_line())) ||
                         (body && (payload.uses_seq() || payload.uses_line())) ||
                         (message != nullptr && message->counted());
    const template_call call = _renderer.begin_call(counted);
    if (path != nullptr) {
      s->path.clear();
      _renderer.render(*path, call, s->path);
      const request_block& fixed = block_for(kind);
      s->block.assign(fixed.before_path.begin(), fixed.before_path.end());
      put_request_field(s->block, ":path", s->path);
      s->block.insert(s->block.end(), fixed.after_path.begin(), fixed.after_path.end());
    }
    s->body.clear();
    if (body) {
      _renderer.render(payload, call, s->body);
    } else if (message != nullptr) {
      // --proto --data with placeholders: the message after gRPC's 5-byte prefix, its length
      // written once it is known.
      s->body.resize(5);
      message->render(_renderer, call, s->body);
      grpc_frame_prefix(s->body);
    } else {
      s->body.assign(_settings->body.begin(), _settings->body.end());
    }
  }

  // The compiled path of `kind` when it has placeholders (checked at start-up), else null.
  const request_template* path_template(const request_kind& kind) {
    for (const auto& [k, t] : _paths) {
      if (k == &kind) return t.segments().empty() ? nullptr : &t;
    }
    const std::string& path = kind.path.empty() ? _settings->default_path : kind.path;
    _paths.emplace_back(&kind, request_template::has_braces(path) && !_settings->grpc
                                   ? request_template::compile(path, "path")
                                   : request_template());
    return path_template(kind);
  }

  const request_block& block_for(const request_kind& kind) {
    for (const auto& [k, b] : _blocks) {
      if (k == &kind) return b;
    }
    _blocks.emplace_back(&kind, h2_detail::encode_request_block(*_settings, kind));
    return _blocks.back().second;
  }

  stream_state* take_stream() {
    if (_free.empty()) {
      _all.push_back(std::make_unique<stream_state>());
      _all.back()->messages = grpc_message_reader(_settings->max_reply_bytes);
      return _all.back().get();
    }
    stream_state* s = _free.back();
    _free.pop_back();
    return s;  // open() resets what one attempt leaves
  }
  void give_back(stream_state* s) { _free.push_back(s); }

  // --- receiving ----------------------------------------------------------------------------

  bool on_frame(const frame& f) {
    if (_block_stream != 0 && f.type != h2::t_continuation) {
      return connection_error(h2::e_protocol, "a frame inside a header block");
    }
    switch (f.type) {
      case h2::t_data: return on_data(f);
      case h2::t_headers: return on_headers(f);
      case h2::t_priority: return on_priority(f);
      case h2::t_rst_stream: return on_rst_stream(f);
      case h2::t_settings: return on_settings(f);
      case h2::t_push_promise: return connection_error(h2::e_protocol, "PUSH_PROMISE, which our SETTINGS turned off");
      case h2::t_ping: return on_ping(f);
      case h2::t_goaway: return on_goaway(f);
      case h2::t_window_update: return on_window_update(f);
      case h2::t_continuation: return on_continuation(f);
      default: return true;  // a frame type we do not know is ignored (RFC 9113 §5.5)
    }
  }

  // Priorities mean nothing to a client; the frame is checked and dropped (RFC 9113 §6.3).
  bool on_priority(const frame& f) {
    if (f.stream == 0) return connection_error(h2::e_protocol, "PRIORITY on stream 0");
    if (f.payload.size() == 5) return true;
    stream_state* s = _streams.find(f.stream);
    return s == nullptr || stream_error(s, h2::e_frame_size);
  }

  // A stream the server may not speak of: one we never opened (ids are odd and ours).
  bool idle(std::int32_t id) const noexcept { return id >= _next_id || (id & 1) == 0; }

  bool on_data(const frame& f) {
    if (f.stream == 0) return connection_error(h2::e_protocol, "DATA on stream 0");
    if (idle(f.stream)) return connection_error(h2::e_protocol, "DATA on a stream never opened");
    // Flow control counts the whole payload, padding included (RFC 9113 §6.9.1).
    const auto length = static_cast<std::uint32_t>(f.payload.size());
    if (length > _recv_window) return connection_error(h2::e_flow_control, "DATA past the connection's window");
    _recv_window -= length;
    _recv_unacked += length;
    if (_recv_unacked >= connection_window / 2) {
      h2::put_window_update(_control, 0, _recv_unacked);
      _recv_window += _recv_unacked;
      _recv_unacked = 0;
    }
    std::span<const std::byte> data = f.payload;
    if (f.has(h2::f_padded) && !unpad(data)) return false;
    stream_state* s = _streams.find(f.stream);
    if (s == nullptr) return true;  // a stream already closed: its bytes are counted and dropped
    if (length > s->recv_window) return stream_error(s, h2::e_flow_control);
    s->recv_window -= length;
    s->recv_unacked += length;
    s->reply_bytes += data.size();
    if (s->reply_bytes > _settings->max_reply_bytes) {
      _failure = "a reply body over --max-body " + std::to_string(_settings->max_reply_bytes);
      _failure_kind = "reply_too_large";
      return false;
    }
    if (_settings->grpc) s->messages.feed(data);
    if (f.has(h2::f_end_stream)) {
      finish(s);
    } else if (s->recv_unacked >= stream_window / 2) {
      h2::put_window_update(_control, static_cast<std::uint32_t>(s->id), s->recv_unacked);
      s->recv_window += s->recv_unacked;
      s->recv_unacked = 0;
    }
    return true;
  }

  // Strips a padded frame's pad length and padding from `data`.
  bool unpad(std::span<const std::byte>& data) {
    if (data.empty()) return connection_error(h2::e_frame_size, "a padded frame without its pad length");
    const auto pad = static_cast<std::size_t>(data[0]);
    if (pad >= data.size()) return connection_error(h2::e_protocol, "padding as long as its frame");
    data = data.subspan(1, data.size() - 1 - pad);
    return true;
  }

  bool on_headers(const frame& f) {
    if (f.stream == 0) return connection_error(h2::e_protocol, "HEADERS on stream 0");
    if (idle(f.stream)) return connection_error(h2::e_protocol, "HEADERS on a stream never opened");
    std::span<const std::byte> fragment = f.payload;
    if (f.has(h2::f_padded) && !unpad(fragment)) return false;
    if (f.has(h2::f_priority)) {
      if (fragment.size() < 5) return connection_error(h2::e_frame_size, "HEADERS shorter than its priority");
      fragment = fragment.subspan(5);
    }
    _block_stream = f.stream;
    _block_ends_stream = f.has(h2::f_end_stream);
    _block_frames = 1;
    _block_bytes = 0;
    return header_fragment(fragment, f.has(h2::f_end_headers));
  }

  bool on_continuation(const frame& f) {
    if (_block_stream == 0 || f.stream != _block_stream) {
      return connection_error(h2::e_protocol, "CONTINUATION not after its stream's HEADERS");
    }
    if (++_block_frames > max_block_frames) {
      return connection_error(h2::e_enhance_your_calm,
                              "a header block in more than " + std::to_string(max_block_frames) + " frames");
    }
    return header_fragment(f.payload, f.has(h2::f_end_headers));
  }

  // A fragment of the header block being read, through HPACK's decoder (every block must be,
  // to keep its table in step with the server's, even one for a stream already closed).
  bool header_fragment(std::span<const std::byte> fragment, bool final) {
    const auto* in = reinterpret_cast<const std::uint8_t*>(fragment.data());
    std::size_t left = fragment.size();
    stream_state* s = _streams.find(_block_stream);
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t used = nghttp2_hd_inflate_hd2(_inflater, &nv, &flags, in, left, final ? 1 : 0);
      if (used < 0) return connection_error(h2::e_compression, "a header block that does not decode (HPACK)");
      in += used;
      left -= static_cast<std::size_t>(used);
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
        _block_bytes += 32 + nv.namelen + nv.valuelen;
        if (_block_bytes > max_header_list_bytes) {
          _failure = "HTTP/2: a reply's header list over " + std::to_string(max_header_list_bytes) + " bytes";
          _failure_kind = "reply_too_large";
          return false;
        }
        if (s != nullptr) {
          take_field(s, {reinterpret_cast<const char*>(nv.name), nv.namelen},
                     {reinterpret_cast<const char*>(nv.value), nv.valuelen});
        }
      }
      if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
        nghttp2_hd_inflate_end_headers(_inflater);
        break;
      }
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && (left == 0 || used == 0)) {
        // The fragment is used up; the rest of the block comes in a CONTINUATION.
        if (final) return connection_error(h2::e_compression, "a header block that ends inside a field (HPACK)");
        return true;
      }
    }
    _block_stream = 0;
    if (_block_ends_stream && s != nullptr) finish(s);
    return true;
  }

  void take_field(stream_state* s, std::string_view name, std::string_view value) {
    if (name == ":status") {
      s->http_status = h2_detail::http_status_of(value);
    } else if (_settings->grpc && name == "grpc-status") {
      s->grpc_status.assign(value.substr(0, 8));
    }
  }

  bool on_rst_stream(const frame& f) {
    if (f.stream == 0) return connection_error(h2::e_protocol, "RST_STREAM on stream 0");
    if (f.payload.size() != 4) return connection_error(h2::e_frame_size, "RST_STREAM not of 4 bytes");
    if (idle(f.stream)) return connection_error(h2::e_protocol, "RST_STREAM on a stream never opened");
    stream_state* s = _streams.find(f.stream);
    if (s == nullptr) return true;
    const std::uint32_t code = h2::read32(f.payload.data());
    if (code == h2::e_refused_stream && !_goaway && s->refusals < max_refusals) {
      // Not processed (too many streams for the server, say): sent again from write_pending,
      // after this receive; the call stays in flight meanwhile.
      ++s->refusals;
      close(s);
      _retry.push_back(s);
      return true;
    }
    end(s, "h2_" + code_name(code));
    close(s);
    give_back(s);
    return true;
  }

  bool on_settings(const frame& f) {
    if (f.stream != 0) return connection_error(h2::e_protocol, "SETTINGS on a stream");
    if (f.has(h2::f_ack)) {
      return f.payload.empty() || connection_error(h2::e_frame_size, "a SETTINGS acknowledgement with a payload");
    }
    if (f.payload.size() % 6 != 0) return connection_error(h2::e_frame_size, "SETTINGS not in 6-byte entries");
    // RFC 9113's initial limit is none: ours holds only until the server's first SETTINGS.
    if (!_seen_settings) _peer_max_streams = 0xffffffffu;
    _seen_settings = true;
    for (std::size_t i = 0; i < f.payload.size(); i += 6) {
      const std::byte* e = f.payload.data() + i;
      const auto id = static_cast<std::uint16_t>(static_cast<unsigned>(e[0]) << 8 | static_cast<unsigned>(e[1]));
      const std::uint32_t value = h2::read32(e + 2);
      switch (id) {
        case h2::s_enable_push:
          if (value > 1) return connection_error(h2::e_protocol, "SETTINGS_ENABLE_PUSH not 0 or 1");
          break;
        case h2::s_max_concurrent_streams: _peer_max_streams = value; break;
        case h2::s_initial_window_size:
          if (value > h2::max_window) return connection_error(h2::e_flow_control, "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1");
          if (!change_initial_window(value)) return false;
          break;
        case h2::s_max_frame_size:
          if (value < h2::default_max_frame || value > 0xffffff) {
            return connection_error(h2::e_protocol, "SETTINGS_MAX_FRAME_SIZE out of range");
          }
          _peer_max_frame = value;
          break;
        case h2::s_header_table_size:
          // Our blocks never use the table, but a decoder whose table shrank may insist on
          // hearing so first (RFC 7541 §4.2; nghttp2's does): once this SETTINGS is
          // acknowledged, the next block starts with a size update to 0.
          if (value < h2::default_table_size) _table_update_after_ack = true;
          break;
        default: break;
      }
    }
    h2::put_frame(_control, 0, h2::t_settings, h2::f_ack, 0);
    return acknowledged();
  }

  // The server's new initial window moves every open stream's send window by the difference.
  bool change_initial_window(std::uint32_t value) {
    const std::int64_t delta = static_cast<std::int64_t>(value) - _peer_initial_window;
    bool overflow = false;
    _streams.for_each([&](stream_state* s) {
      s->send_window += delta;
      overflow = overflow || s->send_window > h2::max_window;
    });
    if (overflow) return connection_error(h2::e_flow_control, "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream's window");
    _peer_initial_window = value;
    return true;
  }

  bool on_ping(const frame& f) {
    if (f.stream != 0) return connection_error(h2::e_protocol, "PING on a stream");
    if (f.payload.size() != 8) return connection_error(h2::e_frame_size, "PING not of 8 bytes");
    if (f.has(h2::f_ack)) return true;
    std::byte* p = h2::put_frame(_control, 8, h2::t_ping, h2::f_ack, 0);
    std::memcpy(p, f.payload.data(), 8);
    return acknowledged();
  }

  bool acknowledged() {
    if (++_unsent_acks <= max_unsent_acks) return true;
    return connection_error(h2::e_enhance_your_calm,
                            "more than " + std::to_string(max_unsent_acks) + " SETTINGS and PING frames to answer at once");
  }

  bool on_goaway(const frame& f) {
    if (f.stream != 0) return connection_error(h2::e_protocol, "GOAWAY on a stream");
    if (f.payload.size() < 8) return connection_error(h2::e_frame_size, "GOAWAY shorter than 8 bytes");
    const auto last = static_cast<std::int32_t>(h2::read32(f.payload.data()) & 0x7fffffffu);
    const std::uint32_t code = h2::read32(f.payload.data() + 4);
    if (code != h2::e_no_error) {
      // The server ends the connection for an error: its calls fail by the code it gave.
      _failure = "HTTP/2: the server sent GOAWAY " + std::string(nghttp2_http2_strerror(code));
      _failure_kind = "h2_goaway_" + code_name(code);
      return false;
    }
    _goaway = true;
    // Streams past its last id were never processed: dropped unanswered, as those waiting to
    // open, for the engine to issue again on the next connection.
    std::vector<stream_state*> dropped;
    _streams.for_each([&](stream_state* s) {
      if (s->id > last) dropped.push_back(s);
    });
    for (stream_state* s : dropped) {
      close(s);
      give_back(s);
    }
    for (std::size_t i = _waiting_head; i < _waiting.size(); ++i) give_back(_waiting[i]);
    _waiting.clear();
    _waiting_head = 0;
    return true;
  }

  bool on_window_update(const frame& f) {
    if (f.payload.size() != 4) return connection_error(h2::e_frame_size, "WINDOW_UPDATE not of 4 bytes");
    const std::uint32_t increment = h2::read32(f.payload.data()) & 0x7fffffffu;
    if (f.stream == 0) {
      if (increment == 0) return connection_error(h2::e_protocol, "a WINDOW_UPDATE of 0");
      if (_send_window + increment > h2::max_window) {
        return connection_error(h2::e_flow_control, "a WINDOW_UPDATE past 2^31-1");
      }
      _send_window += increment;
      return true;
    }
    if (idle(f.stream)) return connection_error(h2::e_protocol, "WINDOW_UPDATE on a stream never opened");
    stream_state* s = _streams.find(f.stream);
    if (s == nullptr) return true;
    if (increment == 0) return stream_error(s, h2::e_protocol);
    if (s->send_window + increment > h2::max_window) return stream_error(s, h2::e_flow_control);
    s->send_window += increment;
    return true;
  }

  // An error of one stream: reset it, and its call ends by the code.
  bool stream_error(stream_state* s, std::uint32_t code) {
    h2::put_rst_stream(_control, static_cast<std::uint32_t>(s->id), code);
    end(s, "h2_" + code_name(code));
    close(s);
    give_back(s);
    return true;
  }

  bool connection_error(std::uint32_t code, const std::string& why) {
    _failure = "HTTP/2: " + why + " (" + nghttp2_http2_strerror(code) + ")";
    _failure_kind = "h2_" + code_name(code);
    return false;
  }

  // The server ended the stream: its call's outcome, and the stream is closed.
  void finish(stream_state* s) {
    if (_settings->grpc) {
      end(s, grpc_call_outcome(s->http_status, s->grpc_status, s->messages));
    } else if (s->http_status >= 400 || s->http_status < 100) {
      end(s, std::string("http_").append(std::to_string(s->http_status)));
    } else {
      end(s, std::string());
    }
    // A reply before the whole request was sent: the rest is not wanted (RFC 9113 §8.1).
    if (!s->body_done) h2::put_rst_stream(_control, static_cast<std::uint32_t>(s->id), h2::e_cancel);
    close(s);
    give_back(s);
  }

  // The call on `s` is answered: `error` empty for success, else its kind.
  void end(stream_state* s, std::string error) {
    _ended = true;
    _ended_seq = s->seq;
    _ended_error = std::move(error);
  }

  // `s` leaves the open streams (its state stays with the caller: freed or sent again).
  void close(stream_state* s) {
    _streams.erase(s->id);
    if (s->blocked) {
      _blocked.erase(std::find(_blocked.begin(), _blocked.end(), s));
      s->blocked = false;
    }
  }

  std::shared_ptr<const h2_settings> _settings;
  nghttp2_hd_inflater* _inflater = nullptr;
  std::vector<std::pair<const request_kind*, request_block>> _blocks;
  std::vector<std::pair<const request_kind*, request_template>> _paths;  // empty: no placeholder
  template_renderer _renderer;
  std::vector<std::unique_ptr<stream_state>> _all;
  std::vector<stream_state*> _free;
  h2_detail::stream_table<stream_state> _streams;  // open: HEADERS sent, not yet ended
  std::vector<stream_state*> _waiting;  // over the server's concurrent-stream limit, in order
  std::size_t _waiting_head = 0;
  std::vector<stream_state*> _blocked;  // open, their bodies waiting for window
  std::vector<stream_state*> _retry;    // refused streams to send again
  std::vector<std::byte> _control;      // acks, WINDOW_UPDATE, RST_STREAM: sent by write_pending
  unsigned _unsent_acks = 0;
  bool _started = false;
  // The server's table shrank: a size update goes at the front of a block after our ack.
  bool _table_update_after_ack = false;
  bool _table_update_due = false;
  std::vector<std::byte> _updated_block;
  // The server's settings and our windows.
  std::uint32_t _peer_max_streams = streams_before_settings;
  bool _seen_settings = false;
  std::int64_t _peer_initial_window = h2::default_window;
  std::uint32_t _peer_max_frame = h2::default_max_frame;
  std::int64_t _send_window = h2::default_window;
  std::uint32_t _recv_window = connection_window;
  std::uint32_t _recv_unacked = 0;
  std::int64_t _next_id = 1;
  // The header block being read (HEADERS, then CONTINUATION until END_HEADERS).
  std::int32_t _block_stream = 0;
  bool _block_ends_stream = false;
  unsigned _block_frames = 0;
  std::size_t _block_bytes = 0;
  // What the parse did.
  bool _ended = false;
  std::uint64_t _ended_seq = 0;
  std::string _ended_error;
  std::string _failure;
  std::string _failure_kind;  // the error kind of _failure's calls, when it has one
  bool _seen_frame = false;
  bool _goaway = false;
  bool _retiring = false;
  bool _goaway_sent = false;
};

class h2_protocol final : public protocol {
 public:
  explicit h2_protocol(std::shared_ptr<const h2_settings> s) : _settings(std::move(s)) {}
  // Chosen once per connection: a grpc --stream connection carries one bidi call, every other
  // connection a call per stream.
  std::unique_ptr<connection_codec> new_connection() const override {
    if (_settings->stream) return h2_detail::make_grpc_stream_codec(_settings);
    return std::make_unique<h2_codec>(_settings);
  }
  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.path = _settings->default_path;
    if (_settings->grpc) {
      k.name = _settings->default_path.substr(1);
      k.method = "POST";
    } else {
      k.name = "GET " + _settings->default_path;
      k.method = "GET";
    }
    return {k};
  }
  bool talks_unasked() const override { return true; }

 private:
  std::shared_ptr<const h2_settings> _settings;
};

}  // namespace

std::unique_ptr<protocol> codecs::make_h2_protocol(const target& t, const codec_options& options) {
  auto s = h2_detail::make_h2_settings(t, options);
  return std::make_unique<h2_protocol>(std::move(s));
}

}  // namespace ringrpc::load

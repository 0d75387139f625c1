// h2c:// and grpc:// — HTTP/2 over plain TCP, many streams per connection as the depth. nghttp2
// is the state machine only: the engine's io_uring moves the bytes, and the codec hands
// nghttp2 whole frames, up to one that can end a stream, per parse_reply (so at most one call
// ends per parse, and the engine's framing stays the one every protocol shares). gRPC adds its message prefix to the
// request body and reads grpc-status from the trailers (grpc_framing.hpp).
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "grpc_framing.hpp"
#include "h2_session.hpp"
#include "message_template.hpp"
#include "protocol.hpp"

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_h2_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

using h2_detail::code_name;
using h2_detail::code_of;
using h2_detail::frame_header_bytes;
using h2_detail::h2_settings;
using h2_detail::max_frame_payload;
using h2_detail::path_index;

// Big windows: fewer WINDOW_UPDATE frames per call; the reply limit still caps each stream.
constexpr std::int32_t stream_window = 16 << 20;
constexpr std::int32_t connection_window = 1 << 30;
// Past this stream id the connection asks to be replaced before ids run out (2^31 - 1).
constexpr std::int32_t last_usable_stream_id = 0x7fffffff - 2 * 65536;
// A stream the server refused (REFUSED_STREAM: it never processed it) is sent again this many
// times on the same connection; past that it counts as an h2_refused_stream error, so a server
// that refuses everything ends calls instead of looping on them.
constexpr unsigned max_refusals = 8;

// One stream in flight. Reused through a free list: a run's steady state allocates none.
struct stream_state {
  std::uint64_t seq = 0;
  const request_kind* kind = nullptr;  // kept to send the request again if refused
  unsigned refusals = 0;
  std::size_t body_sent = 0;
  std::uint64_t reply_bytes = 0;
  unsigned http_status = 0;
  bool ended = false;  // its call was answered (or dropped); close only frees it
  bool has_body = false;
  // A request with placeholders (path, --template body): rendered when the call is written, and
  // kept with its stream so that a refused stream goes again with the same bytes. The buffers
  // keep their capacity from call to call.
  bool templated = false;
  std::string path;
  std::vector<std::byte> body;
  std::vector<nghttp2_nv> nva;
  std::string grpc_status;
  grpc_message_reader messages;
};

class h2_codec final : public connection_codec {
 public:
  explicit h2_codec(std::shared_ptr<const h2_settings> settings)
      : _settings(std::move(settings)), _renderer(_settings->templates->data) {
    _session = h2_detail::new_client_session(&h2_codec::install, this, stream_window, connection_window);
  }
  ~h2_codec() override { nghttp2_session_del(_session); }
  h2_codec(const h2_codec&) = delete;
  h2_codec& operator=(const h2_codec&) = delete;

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    stream_state* s = take_stream();
    s->seq = seq;
    s->kind = &kind;
    s->refusals = 0;
    render(s);
    submit(s);
    write_pending(out);
  }

  void write_pending(std::vector<std::byte>& out) override {
    // Refused streams go again, on this connection while it takes new streams; nghttp2 holds
    // back any HEADERS beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS until one closes.
    // After a GOAWAY they stay unanswered: the engine gives such calls back to be issued on
    // the next connection when this one closes (as calls behind an HTTP/1.1 Connection: close).
    for (stream_state* s : _retry) {
      if (_goaway || _retiring) {
        give_back(s);
      } else {
        submit(s);
      }
    }
    _retry.clear();
    if (_open == 0 && _retiring && !_goaway_sent) {
      // Stream ids nearly used up: say goodbye so the server closes and the engine reconnects.
      nghttp2_session_terminate_session(_session, NGHTTP2_NO_ERROR);
      _goaway_sent = true;
    }
    for (;;) {
      const std::uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(_session, &data);
      if (n <= 0) break;  // an error here resurfaces as the session's next receive failing
      const auto* p = reinterpret_cast<const std::byte*>(data);
      out.insert(out.end(), p, p + n);
    }
  }

  reply parse_reply(std::span<const std::byte> in) override {
    reply r;
    // The whole frames at the front, up to and including the first that can end a stream
    // (END_STREAM, RST_STREAM, GOAWAY, or a CONTINUATION that may complete such a HEADERS),
    // go to nghttp2 in one call: at most one call ends per parse, and the frames before it
    // (a reply's HEADERS, SETTINGS, WINDOW_UPDATE) cost no extra round through the engine.
    const auto* b = reinterpret_cast<const std::uint8_t*>(in.data());
    std::size_t whole = 0;
    while (in.size() - whole >= frame_header_bytes) {
      const std::uint8_t* h = b + whole;
      const std::size_t length = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
      if (length > max_frame_payload) {
        if (whole > 0) break;  // the frames before it first; the bad one is the next parse's
        return fail(r, "HTTP/2 frame of " + std::to_string(length) + " bytes over the 16384 allowed");
      }
      if (!_seen_frame && whole == 0 && h[3] != NGHTTP2_SETTINGS) {
        return fail(r, "the server's first HTTP/2 frame is not SETTINGS");
      }
      if (in.size() - whole < frame_header_bytes + length) break;
      whole += frame_header_bytes + length;
      const std::uint8_t type = h[3];
      const bool ends = ((type == NGHTTP2_HEADERS || type == NGHTTP2_DATA) && (h[4] & NGHTTP2_FLAG_END_STREAM) != 0) ||
                        type == NGHTTP2_RST_STREAM || type == NGHTTP2_GOAWAY || type == NGHTTP2_CONTINUATION;
      if (ends) break;
    }
    if (whole == 0) return r;
    _seen_frame = true;
    _ended_count = 0;
    _ended_error.clear();
    const std::size_t frame = whole;
    const ssize_t used = nghttp2_session_mem_recv(_session, b, frame);
    if (!_failure.empty()) return fail(r, _failure, _failure_kind);
    if (used < 0) {
      return fail(r, std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used)),
                  "h2_" + code_name(code_of(static_cast<int>(used))));
    }
    if (_goaway_error != NGHTTP2_NO_ERROR) {
      // The server ends the connection for an error: its calls fail by the code it gave.
      return fail(r, "HTTP/2: the server sent GOAWAY " + std::string(nghttp2_http2_strerror(_goaway_error)),
                  "h2_goaway_" + code_name(_goaway_error));
    }
    if (!_goaway && !_goaway_sent && nghttp2_session_check_request_allowed(_session) == 0) {
      // nghttp2 found a connection error in the server's frames (a window overflow, say) and
      // ends the session: nothing more is read, so the calls in flight fail by its code.
      const std::uint32_t code = _invalid_code != 0 ? _invalid_code : std::uint32_t{NGHTTP2_PROTOCOL_ERROR};
      return fail(r, "HTTP/2: the server's frames broke the session: " + std::string(nghttp2_http2_strerror(code)),
                  "h2_" + code_name(code));
    }
    if (nghttp2_session_want_read(_session) == 0 && !_goaway) {
      const std::uint32_t code = _invalid_code != 0 ? _invalid_code : std::uint32_t{NGHTTP2_PROTOCOL_ERROR};
      return fail(r, "HTTP/2: the server's frames broke the session", "h2_" + code_name(code));
    }
    if (_ended_count > 1) return fail(r, "HTTP/2: one frame ended several streams");  // an error mid-batch
    r.consumed = frame;
    r.close_after = _goaway || _retiring;
    if (_ended_count == 0) {
      r.status = reply_status::no_reply;
      return r;
    }
    r.seq = _ended_seq;
    r.status = _ended_error.empty() ? reply_status::ok : reply_status::error_reply;
    r.error = _ended_error;
    return r;
  }

 private:
  static void install(nghttp2_session_callbacks* cbs) {
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &h2_codec::on_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &h2_codec::on_data);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &h2_codec::on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &h2_codec::on_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, &h2_codec::on_invalid);
  }

  static reply fail(reply& r, std::string why, std::string kind = {}) {
    r.status = reply_status::protocol_error;
    r.error = std::move(why);
    r.lost_as = std::move(kind);
    return r;
  }

  // Opens a stream for the call on `s` (a first attempt or a refused one's next).
  void submit(stream_state* s) {
    s->body_sent = 0;
    s->reply_bytes = 0;
    s->http_status = 0;
    s->ended = false;
    s->grpc_status.clear();
    s->messages.reset();
    const request_kind& kind = *s->kind;
    const std::vector<nghttp2_nv>& nva = s->templated ? s->nva : headers_for(kind);
    s->has_body = _settings->grpc || kind.method == "POST" || kind.method == "PUT" || kind.method == "PATCH";
    nghttp2_data_provider body{};
    body.source.ptr = s;
    body.read_callback = &h2_codec::read_body;
    const std::int32_t id = nghttp2_submit_request(_session, nullptr, nva.data(), nva.size(),
                                                   s->has_body ? &body : nullptr, s);
    if (id < 0) {
      // Out of stream ids (or memory): the call stays unanswered and times out or is reported
      // unfinished; write_pending has already asked for a new connection near the end.
      give_back(s);
    } else {
      ++_open;
    }
  }

  // The path and body of the call on `s`, when its kind's path has placeholders or --template
  // gives the body; the kind's headers otherwise.
  void render(stream_state* s) {
    const request_kind& kind = *s->kind;
    const request_template* path = path_template(kind);
    const bool body = _settings->templates->has_payload && !_settings->grpc &&
                      (kind.method == "POST" || kind.method == "PUT" || kind.method == "PATCH");
    const message_template* message = _settings->grpc ? _settings->templates->message.get() : nullptr;
    s->templated = path != nullptr || body || message != nullptr;
    if (!s->templated) return;
    const request_template& payload = _settings->templates->payload;
    const bool counted = (path != nullptr && (path->uses_seq() || path->uses_line())) ||
                         (body && (payload.uses_seq() || payload.uses_line())) ||
                         (message != nullptr && message->counted());
    const template_call call = _renderer.begin_call(counted);
    const std::vector<nghttp2_nv>& fixed = headers_for(kind);
    s->nva.assign(fixed.begin(), fixed.end());
    if (path != nullptr) {
      s->path.clear();
      _renderer.render(*path, call, s->path);
      s->nva[path_index].value = reinterpret_cast<std::uint8_t*>(s->path.data());
      s->nva[path_index].valuelen = s->path.size();
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

  const std::vector<nghttp2_nv>& headers_for(const request_kind& kind) {
    for (const auto& [k, nva] : _nva) {
      if (k == &kind) return nva;
    }
    std::vector<nghttp2_nv> nva = h2_detail::request_headers(*_settings, kind);
    _nva.emplace_back(&kind, std::move(nva));
    return _nva.back().second;
  }

  stream_state* take_stream() {
    if (_free.empty()) {
      _all.push_back(std::make_unique<stream_state>());
      _all.back()->messages = grpc_message_reader(_settings->max_reply_bytes);
      return _all.back().get();
    }
    stream_state* s = _free.back();
    _free.pop_back();
    return s;  // submit() resets what one attempt leaves
  }
  void give_back(stream_state* s) { _free.push_back(s); }

  // The call on `s` is answered: `error` empty for success, else its kind.
  void end(stream_state* s, std::string error) {
    if (s->ended) return;
    s->ended = true;
    ++_ended_count;
    _ended_seq = s->seq;
    _ended_error = std::move(error);
  }

  void finish(stream_state* s) {
    if (_settings->grpc) {
      end(s, grpc_call_outcome(s->http_status, s->grpc_status, s->messages));
    } else if (s->http_status >= 400 || s->http_status < 100) {
      end(s, std::string("http_").append(std::to_string(s->http_status)));
    } else {
      end(s, std::string());
    }
  }

  static stream_state* stream_of(nghttp2_session* session, std::int32_t id) {
    return static_cast<stream_state*>(nghttp2_session_get_stream_user_data(session, id));
  }

  static int on_frame(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<h2_codec*>(user);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      self->_goaway = true;  // streams past its last id are closed next, unanswered: dropped
      self->_goaway_last = frame->goaway.last_stream_id;
      self->_goaway_error = frame->goaway.error_code;
      return 0;
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      if (stream_state* s = stream_of(session, frame->hd.stream_id)) self->finish(s);
    }
    return 0;
  }

  static int on_data(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                     std::size_t len, void* user) {
    auto* self = static_cast<h2_codec*>(user);
    stream_state* s = stream_of(session, id);
    if (s == nullptr) return 0;
    s->reply_bytes += len;
    if (s->reply_bytes > self->_settings->max_reply_bytes) {
      self->_failure = "a reply body over --max-body " + std::to_string(self->_settings->max_reply_bytes);
      self->_failure_kind = "reply_too_large";
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (self->_settings->grpc) s->messages.feed({reinterpret_cast<const std::byte*>(data), len});
    return 0;
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                       void* user) {
    auto* self = static_cast<h2_codec*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    stream_state* s = stream_of(session, frame->hd.stream_id);
    if (s == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      s->http_status = h2_detail::http_status_of(v);
    } else if (self->_settings->grpc && n == "grpc-status") {
      s->grpc_status.assign(v.substr(0, 8));
    }
    return 0;
  }

  static int on_close(nghttp2_session* session, std::int32_t id, std::uint32_t error_code, void* user) {
    auto* self = static_cast<h2_codec*>(user);
    stream_state* s = stream_of(session, id);
    if (s == nullptr) return 0;
    if (!s->ended) {
      if (self->_goaway && id > self->_goaway_last) {
        // Never processed by the server: the engine issues it again on the next connection.
        s->ended = true;
      } else if (error_code == NGHTTP2_REFUSED_STREAM && !self->_goaway && s->refusals < max_refusals) {
        // Not processed either (too many streams for the server, say): sent again from
        // write_pending, after this receive; the call stays in flight meanwhile.
        ++s->refusals;
        nghttp2_session_set_stream_user_data(session, id, nullptr);
        self->_retry.push_back(s);
        --self->_open;
        if (id >= last_usable_stream_id) self->_retiring = true;
        return 0;
      } else {
        self->end(s, "h2_" + code_name(error_code));
      }
    }
    nghttp2_session_set_stream_user_data(session, id, nullptr);
    self->give_back(s);
    --self->_open;
    if (id >= last_usable_stream_id) self->_retiring = true;
    return 0;
  }

  // A frame nghttp2 refused; for a connection error (an overflowing WINDOW_UPDATE on stream 0)
  // it then ends the session, and this is the code the calls in flight are failed by.
  static int on_invalid(nghttp2_session*, const nghttp2_frame*, int lib_error_code, void* user) {
    static_cast<h2_codec*>(user)->_invalid_code = code_of(lib_error_code);
    return 0;
  }

  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void* user) {
    auto* self = static_cast<h2_codec*>(user);
    auto* s = static_cast<stream_state*>(source->ptr);
    const auto& body = s->templated ? s->body : self->_settings->body;
    const std::size_t n = std::min(length, body.size() - s->body_sent);
    std::memcpy(buf, body.data() + s->body_sent, n);
    s->body_sent += n;
    if (s->body_sent == body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  std::shared_ptr<const h2_settings> _settings;
  nghttp2_session* _session = nullptr;
  std::vector<std::pair<const request_kind*, std::vector<nghttp2_nv>>> _nva;
  std::vector<std::pair<const request_kind*, request_template>> _paths;  // empty: no placeholder
  template_renderer _renderer;
  std::vector<std::unique_ptr<stream_state>> _all;
  std::vector<stream_state*> _free;
  std::vector<stream_state*> _retry;  // refused streams to send again
  unsigned _open = 0;
  // What the frame being parsed did.
  unsigned _ended_count = 0;
  std::uint64_t _ended_seq = 0;
  std::string _ended_error;
  std::string _failure;
  std::string _failure_kind;  // the error kind of _failure's calls, when it has one
  bool _seen_frame = false;
  bool _goaway = false;
  std::int32_t _goaway_last = 0;
  std::uint32_t _goaway_error = NGHTTP2_NO_ERROR;
  std::uint32_t _invalid_code = 0;  // the last frame nghttp2 refused, as an HTTP/2 error code
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

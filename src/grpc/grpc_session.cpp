// gRPC calls in, ringrpc frames out, and back (grpc_session.hpp). nghttp2 parses and writes
// HTTP/2; its callbacks below collect one request per stream and, at the request's end, turn it
// into a Request frame for the server. The server's Reply or Error frame for that call id
// (= the stream id) becomes the HTTP/2 response: headers, the message, trailers.
#include "grpc/grpc_session.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "grpc/grpc_text.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::detail::grpc {

namespace {

constexpr std::size_t message_prefix = 5;  // compressed flag + u32 big-endian length
constexpr std::string_view health_path = "/grpc.health.v1.Health/Check";
// gRPC codes the session answers with itself (grpc/status.h).
constexpr int code_invalid_argument = 3, code_not_found = 5, code_resource_exhausted = 8,
              code_unimplemented = 12, code_internal = 13;

nghttp2_nv nv(std::string_view name, std::string_view value) noexcept {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

/// One HTTP/2 stream: a gRPC call from its first header to its last byte out. (Outside the
/// anonymous namespace: session::state, which has external linkage, holds them.)
struct call_stream {
  std::int32_t id = 0;
  std::string path;
  std::string method;
  std::vector<metadata_entry> metadata;  // request headers the handler sees
  std::uint64_t timeout_us = 0;
  std::vector<std::byte> body;  // the request's DATA, message prefix included
  std::size_t header_bytes = 0;
  // Refused by the session before it became a call: the answer it gets.
  bool refused = false;
  int refusal_code = 0;
  std::string refusal_message;
  const char* http_status = "200";
  bool offer_identity = false;  // the refusal names the encodings we accept
  bool delivered = false;  // a Request frame went to the server
  bool answered = false;   // the response is submitted
  // The response's message (prefix included) and its trailers, until nghttp2 takes them.
  std::vector<std::byte> reply;
  std::size_t reply_sent = 0;
  std::vector<std::string> trailer_text;  // name, value, name, value ...
  call_stream* prev = nullptr;  // the session's list of its streams (freed with it)
  call_stream* next = nullptr;
};

namespace {

/// A frame the server wrote, decoded; frames from the server are ours, so one that fails to
/// decode is skipped rather than trusted.
bool decode_ours(std::span<const std::byte> f, std::vector<std::byte>& aligned, frame_view& v) noexcept {
  if (reinterpret_cast<std::uintptr_t>(f.data()) % 8 != 0) {
    try {
      aligned.assign(f.begin(), f.end());
    } catch (const std::bad_alloc&) {
      return false;
    }
    f = aligned;
  }
  return decode_frame(f, v) == decode_outcome::ok;
}

void append_pairs(const flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>* md,
                  std::vector<std::string>& text) {
  if (md == nullptr) return;
  for (const wire::Metadata* e : *md) {
    if (e == nullptr || e->key() == nullptr) continue;
    std::string key(e->key()->data(), e->key()->size());
    std::string_view value;
    if (e->value() != nullptr) value = {reinterpret_cast<const char*>(e->value()->data()), e->value()->size()};
    const bool binary = binary_key(key);
    text.push_back(std::move(key));
    text.push_back(binary ? base64_encode(value) : std::string(value));
  }
}

void to_nv(const std::vector<std::string>& text, std::vector<nghttp2_nv>& out) {
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) out.push_back(nv(text[i], text[i + 1]));
}

}  // namespace

struct session::state {
  session_limits limits;
  session_host& host;
  nghttp2_session* ng = nullptr;
  std::vector<std::byte>* plain = nullptr;  // receive(): where the frames for the server go
  std::size_t library_bytes = 0;  // nghttp2's allocations (the size prefix of each)
  std::size_t request_bytes = 0;  // bodies of requests being received
  std::size_t held_reply = 0;     // reply bytes nghttp2 has not taken yet
  std::size_t streams = 0;
  call_stream* live = nullptr;  // every stream not yet closed
  std::vector<std::byte> partial;  // reply frames' bytes not yet whole
  std::vector<std::byte> aligned;  // a reply frame copied to decode it
  // The flood bounds nghttp2 leaves to us (session_limits).
  std::int64_t last_ping_ns = 0;
  unsigned ping_strikes = 0;
  bool wrote_since_ping = false;  // a response of ours went out since the last PING
  double settings_tokens = 0;
  std::int64_t settings_refilled_ns = 0;
  // Set by a callback: the session fails after this call, with GOAWAY `goaway_code` saying
  // `goaway_debug` (a reason gRPC's clients read, such as "too_many_pings").
  std::string fatal;
  std::uint32_t goaway_code = NGHTTP2_ENHANCE_YOUR_CALM;
  std::string goaway_debug;
  bool closing_counted = false;  // this connection's close is in the server's counters

  state(const session_limits& l, session_host& h) : limits(l), host(h), settings_tokens(l.settings_burst) {}
  ~state() {
    // nghttp2 frees its streams without calling on_stream_close: ours go here.
    if (ng != nullptr) nghttp2_session_del(ng);
    while (live != nullptr) unlink_and_delete(live);
  }

  void link(call_stream* st) noexcept {
    st->next = live;
    if (live != nullptr) live->prev = st;
    live = st;
    ++streams;
  }
  void unlink_and_delete(call_stream* st) noexcept {
    if (st->prev != nullptr) st->prev->next = st->next;
    else live = st->next;
    if (st->next != nullptr) st->next->prev = st->prev;
    --streams;
    delete st;
  }

  static state& of(void* user) noexcept { return *static_cast<state*>(user); }
  call_stream* find(std::int32_t id) const noexcept {
    return static_cast<call_stream*>(nghttp2_session_get_stream_user_data(ng, id));
  }

  /// Appends `v` as a frame for the server; false (nothing appended) if the frame's body would
  /// be over max_frame_bytes, which the server's assembler would answer by closing the
  /// connection: the caller refuses that one call instead.
  bool emit(const frame_view& v) {
    thread_local frame_encoder encoder;
    const auto bytes = encoder.encode(v);
    if (bytes.size() - frame_prefix_bytes > limits.max_message_bytes) return false;
    plain->insert(plain->end(), bytes.begin(), bytes.end());
    return true;
  }

  void fail_with(std::string why, std::string debug, session_event e) {
    if (!fatal.empty()) return;
    fatal = std::move(why);
    goaway_debug = std::move(debug);
    if (!closing_counted) host.note(e);
    closing_counted = true;
  }
  void on_ping(std::int64_t now);
  void on_settings(std::int64_t now);

  void refuse(call_stream& s, int code, std::string message, const char* http = "200") {
    if (s.refused) return;
    s.refused = true;
    s.refusal_code = code;
    s.refusal_message = std::move(message);
    s.http_status = http;
    drop_body(s);
  }
  void drop_body(call_stream& s) noexcept {
    request_bytes -= s.body.size();
    std::vector<std::byte>().swap(s.body);
  }

  void answer_refusal(call_stream& s);
  void finish_request(call_stream& s);
  void answer_health(call_stream& s);
  void respond(call_stream& s, std::span<const std::byte> message, const frame_view* v);
  void answer_error(call_stream& s, const frame_view& v);
  void take_reply_frame(std::span<const std::byte> f);
};

namespace {

// nghttp2's memory, counted: each block carries its size in front (its free() is not told).
constexpr std::size_t size_prefix = 16;  // keeps malloc's alignment

void* mem_malloc(std::size_t n, void* user) {
  auto& s = session::state::of(user);
  if (s.library_bytes + n > s.limits.max_library_bytes) return nullptr;
  auto* base = static_cast<std::byte*>(std::malloc(n + size_prefix));
  if (base == nullptr) return nullptr;
  std::memcpy(base, &n, sizeof n);
  s.library_bytes += n;
  return base + size_prefix;
}

void mem_free(void* p, void* user) {
  if (p == nullptr) return;
  auto* base = static_cast<std::byte*>(p) - size_prefix;
  std::size_t n = 0;
  std::memcpy(&n, base, sizeof n);
  session::state::of(user).library_bytes -= n;
  std::free(base);
}

void* mem_calloc(std::size_t count, std::size_t size, void* user) {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* p = mem_malloc(count * size, user);
  if (p != nullptr) std::memset(p, 0, count * size);
  return p;
}

void* mem_realloc(void* p, std::size_t n, void* user) {
  if (p == nullptr) return mem_malloc(n, user);
  if (n == 0) {
    mem_free(p, user);
    return nullptr;
  }
  auto& s = session::state::of(user);
  auto* base = static_cast<std::byte*>(p) - size_prefix;
  std::size_t old = 0;
  std::memcpy(&old, base, sizeof old);
  if (n > old && s.library_bytes + (n - old) > s.limits.max_library_bytes) return nullptr;
  auto* grown = static_cast<std::byte*>(std::realloc(base, n + size_prefix));
  if (grown == nullptr) return nullptr;
  std::memcpy(grown, &n, sizeof n);
  s.library_bytes = s.library_bytes - old + n;
  return grown + size_prefix;
}

int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto& s = session::state::of(user);
  auto* st = new (std::nothrow) call_stream;
  if (st == nullptr) return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->id = frame->hd.stream_id;
  s.link(st);
  nghttp2_session_set_stream_user_data(ng, st->id, st);
  return 0;
}

// One request header. What nghttp2 does not bound (the header list's size) is bounded here.
void take_header(session::state& s, call_stream& st, std::string_view name, std::string_view value) {
  if (name == ":path") {
    st.path = value;
    st.method = method_of_path(value);
  } else if (name == ":method") {
    if (value != "POST") s.refuse(st, code_unimplemented, "gRPC calls are POST requests", "405");
  } else if (name.starts_with(':')) {
    // :scheme, :authority: nghttp2 checks them.
  } else if (name == "content-type") {
    if (!value.starts_with("application/grpc")) {
      s.refuse(st, code_invalid_argument, "content-type is not application/grpc", "415");
    }
  } else if (name == "grpc-timeout") {
    const auto us = parse_timeout(value);
    if (!us) s.refuse(st, code_internal, "malformed grpc-timeout", "400");
    st.timeout_us = us.value_or(0);
  } else if (name == "grpc-encoding") {
    if (value != "identity") {
      s.refuse(st, code_unimplemented, "grpc-encoding '" + std::string(value) + "' is not supported");
      st.offer_identity = true;
    }
  } else if (name == "te" || name == "user-agent" || name.starts_with("grpc-")) {
    // Transport headers, not the caller's metadata.
  } else if (binary_key(name)) {
    auto bytes = base64_decode(value);
    if (!bytes) return s.refuse(st, code_internal, "metadata '" + std::string(name) + "' is not base64");
    st.metadata.push_back({std::string(name), std::move(*bytes)});
  } else {
    st.metadata.push_back({std::string(name), std::string(value)});
  }
}

int on_header(nghttp2_session* ng, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
              const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
  auto& s = session::state::of(user);
  call_stream* st = s.find(frame->hd.stream_id);
  if (st == nullptr) return 0;
  st->header_bytes += namelen + valuelen + 32;  // RFC 7541's entry size
  if (st->header_bytes > s.limits.max_header_bytes) {
    // Trailers from a client count too; a peer that keeps sending them loses the connection.
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST && st->header_bytes > 2 * s.limits.max_header_bytes) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    try {
      s.refuse(*st, code_resource_exhausted,
               "request headers larger than " + std::to_string(s.limits.max_header_bytes) + " bytes", "431");
    } catch (const std::bad_alloc&) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST || st->refused) return 0;
  (void)ng;
  try {
    take_header(s, *st, {reinterpret_cast<const char*>(name), namelen},
                {reinterpret_cast<const char*>(value), valuelen});
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;  // out of memory: this connection goes
  }
  return 0;
}

int on_data_chunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                  void* user) {
  auto& s = session::state::of(user);
  call_stream* st = s.find(id);
  if (st == nullptr || st->refused) return 0;
  try {
    if (st->body.size() + len > s.limits.max_message_bytes + message_prefix) {
      s.refuse(*st, code_resource_exhausted,
               "request message larger than the server's max_frame_bytes (" +
                   std::to_string(s.limits.max_message_bytes) + ")");
    } else if (s.request_bytes + len > s.limits.max_request_bytes) {
      s.refuse(*st, code_resource_exhausted,
               "requests being received on this connection exceed max_inflight_bytes_per_connection");
    } else {
      const auto* p = reinterpret_cast<const std::byte*>(data);
      st->body.insert(st->body.end(), p, p + len);
      s.request_bytes += len;
    }
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& s = session::state::of(user);
  // A flood stops here: the rest of what was received is not processed (nor acknowledged).
  // (Out of memory for the reason's text: nothing may unwind through nghttp2; the connection goes.)
  if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    try {
      s.on_ping(steady_ns());
    } catch (const std::bad_alloc&) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return s.fatal.empty() ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    try {
      s.on_settings(steady_ns());
    } catch (const std::bad_alloc&) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return s.fatal.empty() ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  call_stream* st = s.find(frame->hd.stream_id);
  // A refused request is answered at its end too, its bytes dropped meanwhile: an answer
  // before it (with RST_STREAM NO_ERROR to stop the rest) reads as INTERNAL to gRPC's clients.
  if (st == nullptr || st->answered || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  try {
    if (st->refused) {
      s.answer_refusal(*st);
    } else {
      s.finish_request(*st);
    }
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

// A GOAWAY with an error that nghttp2 decided on itself (its RST_STREAM rate limit, a stream
// past the acknowledged concurrency, a protocol error it answers without failing the call
// into it) is counted here; ours are counted where we decide them.
int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type != NGHTTP2_GOAWAY || frame->goaway.error_code == NGHTTP2_NO_ERROR) return 0;
  auto& s = session::state::of(user);
  if (!s.closing_counted) {
    s.closing_counted = true;
    s.host.note(session_event::protocol_error);
  }
  return 0;
}

int on_stream_close(nghttp2_session* ng, std::int32_t id, std::uint32_t, void* user) {
  auto& s = session::state::of(user);
  call_stream* st = s.find(id);
  if (st == nullptr) return 0;
  nghttp2_session_set_stream_user_data(ng, id, nullptr);
  if (st->delivered && !st->answered && s.plain != nullptr) {
    // The client reset a call the server is running: it is cancelled there, as a Cancel frame
    // cancels it (its reply, when it comes, finds no stream and is dropped).
    frame_view v;
    v.call_id = static_cast<std::uint64_t>(id);
    v.kind = wire::Kind::Cancel;
    try {
      s.emit(v);
      s.host.note(session_event::cancelled);
    } catch (const std::bad_alloc&) {
      // The call runs to its end; its reply is dropped.
    }
  }
  s.drop_body(*st);
  s.held_reply -= st->reply.size() - st->reply_sent;
  s.unlink_and_delete(st);
  return 0;
}

// Copies the reply's message into nghttp2's DATA frames, then hands it the trailers.
ssize_t read_reply(nghttp2_session* ng, std::int32_t id, std::uint8_t* buf, std::size_t length,
                   std::uint32_t* flags, nghttp2_data_source* source, void* user) {
  auto& s = session::state::of(user);
  auto* st = static_cast<call_stream*>(source->ptr);
  const std::size_t n = std::min(length, st->reply.size() - st->reply_sent);
  std::memcpy(buf, st->reply.data() + st->reply_sent, n);
  st->reply_sent += n;
  s.held_reply -= n;
  if (st->reply_sent == st->reply.size()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    std::vector<std::byte>().swap(st->reply);
    st->reply_sent = 0;
    nghttp2_nv ok[] = {nv("grpc-status", "0")};
    if (st->trailer_text.empty()) {
      if (nghttp2_submit_trailer(ng, id, ok, 1) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    } else {
      try {
        std::vector<nghttp2_nv> t{ok[0]};
        to_nv(st->trailer_text, t);
        if (nghttp2_submit_trailer(ng, id, t.data(), t.size()) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
      } catch (const std::bad_alloc&) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;  // nothing may unwind through nghttp2: this connection goes
      }
      std::vector<std::string>().swap(st->trailer_text);
    }
  }
  return static_cast<ssize_t>(n);
}

}  // namespace

// gRPC's servers' ping policy: pings are answered, but one that comes too soon after the last,
// while we have sent nothing, is a strike, and the third strike ends the connection. Our
// responses forgive (clients measure bandwidth with pings while they receive).
void session::state::on_ping(std::int64_t now) {
  if (wrote_since_ping) {
    ping_strikes = 0;
  } else if (last_ping_ns != 0 && now - last_ping_ns < limits.min_ping_interval_ns) {
    ++ping_strikes;
  }
  wrote_since_ping = false;
  last_ping_ns = now;
  if (ping_strikes > 2) {
    goaway_code = NGHTTP2_ENHANCE_YOUR_CALM;
    fail_with("HTTP/2: too many pings", "too_many_pings", session_event::too_many_pings);
  }
}

// Each SETTINGS costs an acknowledgement: a token bucket bounds how many a peer may send.
void session::state::on_settings(std::int64_t now) {
  if (settings_refilled_ns != 0) {
    const double refill = static_cast<double>(now - settings_refilled_ns) * 1e-9 * limits.settings_per_second;
    settings_tokens = std::min<double>(limits.settings_burst, settings_tokens + refill);
  }
  settings_refilled_ns = now;
  if (settings_tokens < 1) {
    goaway_code = NGHTTP2_ENHANCE_YOUR_CALM;
    fail_with("HTTP/2: a SETTINGS flood", "too_many_settings", session_event::protocol_error);
    return;
  }
  settings_tokens -= 1;
}

void session::state::answer_refusal(call_stream& st) {
  st.answered = true;
  wrote_since_ping = true;
  host.note(session_event::refused);
  const std::string code = std::to_string(st.refusal_code);
  const std::string message = percent_encode(st.refusal_message);
  nghttp2_nv h[] = {nv(":status", st.http_status), nv("content-type", "application/grpc"),
                    nv("grpc-status", code), nv("grpc-message", message),
                    nv("grpc-accept-encoding", "identity")};
  nghttp2_submit_response(ng, st.id, h, st.offer_identity ? 5 : 4, nullptr);
}

void session::state::finish_request(call_stream& st) {
  if (st.path == health_path) return answer_health(st);
  if (st.method.empty()) {
    refuse(st, code_unimplemented, "no method for the path '" + st.path + "'");
    return answer_refusal(st);
  }
  // A unary call carries exactly one message.
  const std::span<const std::byte> body(st.body);
  if (body.size() < message_prefix) {
    refuse(st, code_unimplemented, "a unary call needs one request message, it sent none");
    return answer_refusal(st);
  }
  const auto flag = static_cast<std::uint8_t>(body[0]);
  const std::uint32_t length = static_cast<std::uint32_t>(body[1]) << 24 | static_cast<std::uint32_t>(body[2]) << 16 |
                               static_cast<std::uint32_t>(body[3]) << 8 | static_cast<std::uint32_t>(body[4]);
  if (flag != 0) {
    refuse(st, code_internal, flag == 1 ? "a compressed message without grpc-encoding" : "bad message flag");
    return answer_refusal(st);
  }
  if (length != body.size() - message_prefix) {
    refuse(st, length < body.size() - message_prefix ? code_unimplemented : code_internal,
           length < body.size() - message_prefix ? "a unary call takes one request message, it sent more"
                                                 : "the request message is shorter than its length prefix");
    return answer_refusal(st);
  }
  const metadata_to_send md{{}, st.metadata};
  frame_view v;
  v.call_id = static_cast<std::uint64_t>(st.id);
  v.kind = wire::Kind::Request;
  v.method = st.method;
  v.timeout_us = st.timeout_us;
  v.payload = body.subspan(message_prefix);
  if (!st.metadata.empty()) v.metadata_out = &md;
  if (!emit(v)) {
    // The message fit, but with its method and metadata the frame does not.
    refuse(st, code_resource_exhausted,
           "request larger than the server's max_frame_bytes (" + std::to_string(limits.max_message_bytes) + ")");
    return answer_refusal(st);
  }
  st.delivered = true;
  drop_body(st);
  std::vector<metadata_entry>().swap(st.metadata);
}

// grpc.health.v1.Health/Check, answered here: HealthCheckRequest { string service = 1; }.
void session::state::answer_health(call_stream& st) {
  host.note(session_event::health_check);
  std::string_view service;
  const std::span<const std::byte> body(st.body);
  if (body.size() >= message_prefix) {
    // Field 1, length-delimited, a short name: skip anything else (lenient, as parsers are).
    const auto m = body.subspan(message_prefix);
    if (m.size() >= 2 && static_cast<std::uint8_t>(m[0]) == 0x0a && static_cast<std::uint8_t>(m[1]) < 0x80 &&
        static_cast<std::size_t>(m[1]) + 2 <= m.size()) {
      service = {reinterpret_cast<const char*>(m.data()) + 2, static_cast<std::size_t>(m[1])};
    } else if (!m.empty() && static_cast<std::uint8_t>(m[0]) == 0x0a) {
      // A name of 128 bytes or more (or a cut one) names no registered service; never read it
      // as "" (the whole server).
      refuse(st, code_not_found, "unknown service");
      return answer_refusal(st);
    }
  }
  const auto h = host.check_health(service);
  if (h == session_host::health::unknown_service) {
    refuse(st, code_not_found, "unknown service '" + std::string(service) + "'");
    return answer_refusal(st);
  }
  // HealthCheckResponse { ServingStatus status = 1; }: SERVING 1, NOT_SERVING 2.
  const std::byte reply[] = {std::byte{0x08}, std::byte{static_cast<unsigned char>(h == session_host::health::serving ? 1 : 2)}};
  drop_body(st);
  respond(st, reply, nullptr);
}

void session::state::respond(call_stream& st, std::span<const std::byte> message, const frame_view* v) {
  st.reply.resize(message_prefix + message.size());
  const auto n = static_cast<std::uint32_t>(message.size());
  st.reply[0] = std::byte{0};
  st.reply[1] = std::byte(n >> 24);
  st.reply[2] = std::byte(n >> 16);
  st.reply[3] = std::byte(n >> 8);
  st.reply[4] = std::byte(n);
  if (!message.empty()) std::memcpy(st.reply.data() + message_prefix, message.data(), message.size());
  held_reply += st.reply.size();
  thread_local std::vector<std::string> header_text;
  thread_local std::vector<nghttp2_nv> headers;
  header_text.clear();
  headers.clear();
  headers.push_back(nv(":status", "200"));
  headers.push_back(nv("content-type", "application/grpc"));
  if (v != nullptr) {
    append_pairs(v->metadata, header_text);
    to_nv(header_text, headers);
    append_pairs(v->trailers, st.trailer_text);
  }
  nghttp2_data_provider body{};
  body.source.ptr = &st;
  body.read_callback = read_reply;
  st.answered = true;
  wrote_since_ping = true;
  nghttp2_submit_response(ng, st.id, headers.data(), headers.size(), &body);
  if (held_reply > limits.max_held_reply_bytes) {
    goaway_code = NGHTTP2_FLOW_CONTROL_ERROR;
    fail_with("HTTP/2: replies held back by the client's flow-control window exceed " +
                  std::to_string(limits.max_held_reply_bytes) + " bytes",
              "reply_window_exhausted", session_event::protocol_error);
  }
}

void session::state::answer_error(call_stream& st, const frame_view& v) {
  st.answered = true;
  wrote_since_ping = true;
  const std::string code = std::to_string(grpc_code(v.code));
  const std::string message = percent_encode(v.message);
  const std::string pushback = std::to_string(v.retry_after_ms);
  std::vector<std::string> text;
  append_pairs(v.metadata, text);
  append_pairs(v.trailers, text);
  std::vector<nghttp2_nv> h{nv(":status", "200"), nv("content-type", "application/grpc"), nv("grpc-status", code)};
  if (!message.empty()) h.push_back(nv("grpc-message", message));
  if (v.retry_after_ms != 0) {
    h.push_back(nv("grpc-retry-pushback-ms", pushback));
    h.push_back(nv("retry-after-ms", pushback));
  }
  to_nv(text, h);
  nghttp2_submit_response(ng, st.id, h.data(), h.size(), nullptr);
}

void session::state::take_reply_frame(std::span<const std::byte> f) {
  frame_view v;
  if (!decode_ours(f, aligned, v)) return;
  if (v.call_id == 0) {
    // The server's word on the whole connection (it is closing it): GOAWAY says why.
    const std::string why(v.message.substr(0, 256));
    nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng),
                          NGHTTP2_INTERNAL_ERROR, reinterpret_cast<const std::uint8_t*>(why.data()), why.size());
    return;
  }
  if (v.call_id > 0x7fffffff) return;
  call_stream* st = find(static_cast<std::int32_t>(v.call_id));
  if (st == nullptr || st->answered) return;  // reset by the client meanwhile
  if (v.kind == wire::Kind::Reply) {
    respond(*st, v.payload, &v);
  } else if (v.kind == wire::Kind::Error) {
    answer_error(*st, v);
  }
}

session::session(const session_limits& limits, session_host& host)
    : _s(std::make_unique<state>(limits, host)) {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    throw std::bad_alloc();
  }
  // Our encoder's HPACK table stays small; the decoder's is SETTINGS_HEADER_TABLE_SIZE's 4 KiB.
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  // Floods nghttp2 bounds itself, where the library has the bound (src/meson.build): stated
  // here with its defaults, so a change of theirs does not change ours unnoticed.
#ifdef RINGRPC_HAVE_NGHTTP2_STREAM_RESET_RATE_LIMIT
  nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);  // RST_STREAMs: a burst, then per second
#endif
#ifdef RINGRPC_HAVE_NGHTTP2_MAX_CONTINUATIONS
  nghttp2_option_set_max_continuations(opt, 8);  // CONTINUATIONs after one HEADERS
#endif
  nghttp2_option_set_max_outbound_ack(opt, 1000);  // acknowledgements queued and unsent
  nghttp2_option_set_max_settings(opt, 32);         // entries in one SETTINGS
  nghttp2_mem mem{_s.get(), mem_malloc, mem_free, mem_calloc, mem_realloc};
  const int rv = nghttp2_session_server_new3(&_s->ng, cb, _s.get(), opt, &mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) throw std::bad_alloc();
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(limits.max_header_bytes)},
  };
  if (nghttp2_submit_settings(_s->ng, NGHTTP2_FLAG_NONE, settings, 2) != 0) throw std::bad_alloc();
}

session::~session() = default;

std::size_t session::held_bytes() const noexcept {
  return _s->library_bytes + _s->request_bytes + _s->held_reply + _s->streams * sizeof(call_stream) +
         _s->partial.capacity() + _s->aligned.capacity();
}

namespace {

// Everything nghttp2 wants to send now, appended to `out`. False: the session failed.
bool drain(nghttp2_session* ng, std::vector<std::byte>& out, int& error) {
  for (;;) {
    const std::uint8_t* p = nullptr;
    const ssize_t n = nghttp2_session_mem_send(ng, &p);
    if (n < 0) {
      error = static_cast<int>(n);
      return false;
    }
    if (n == 0) return true;
    const auto* b = reinterpret_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  }
}

}  // namespace

record_session::outcome session::fail(std::vector<std::byte>& out) {
  if (_error.empty()) _error = _s->fatal;
  // GOAWAY says why, if nghttp2 can still say anything.
  const std::string& debug = _s->goaway_debug;
  nghttp2_submit_goaway(_s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(_s->ng), _s->goaway_code,
                        reinterpret_cast<const std::uint8_t*>(debug.data()), debug.size());
  int ignored = 0;
  try {
    (void)drain(_s->ng, out, ignored);
  } catch (const std::bad_alloc&) {
  }
  return outcome::failed;
}

record_session::outcome session::receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                                         std::vector<std::byte>& out) {
  // `plain` stays set through the drain too: a stream nghttp2 resets while sending (a peer's
  // flow-control error) closes there, and its running call must hear the Cancel.
  struct unset {
    state& s;
    ~unset() { s.plain = nullptr; }
  } guard{*_s};
  _s->plain = &plain;
  const ssize_t rv =
      nghttp2_session_mem_recv(_s->ng, reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
  if (rv < 0) return library_failed(static_cast<int>(rv), out);
  if (!_s->fatal.empty()) return fail(out);
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  if (nghttp2_session_want_read(_s->ng) == 0 && nghttp2_session_want_write(_s->ng) == 0) return outcome::closed;
  return outcome::ok;
}

record_session::outcome session::seal(std::span<const std::byte> plain, std::vector<std::byte>& out) {
  // Reply frames, whole or cut where the responder's batch ended: the cut part waits here.
  std::span<const std::byte> rest = plain;
  if (!_s->partial.empty()) {
    _s->partial.insert(_s->partial.end(), plain.begin(), plain.end());
    rest = _s->partial;
  }
  std::size_t used = 0;
  while (rest.size() - used >= frame_prefix_bytes) {
    const std::size_t whole = frame_prefix_bytes + read_frame_length(rest.data() + used);
    if (rest.size() - used < whole) break;
    _s->take_reply_frame(rest.subspan(used, whole));
    used += whole;
  }
  if (!_s->partial.empty()) {
    _s->partial.erase(_s->partial.begin(), _s->partial.begin() + static_cast<std::ptrdiff_t>(used));
  } else {
    _s->partial.assign(rest.begin() + static_cast<std::ptrdiff_t>(used), rest.end());
  }
  if (_s->aligned.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->aligned);
  // A big reply cut across seals grew it: keep what a few small frames need.
  if (_s->partial.empty() && _s->partial.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->partial);
  if (!_s->fatal.empty()) return fail(out);
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  return outcome::ok;
}

record_session::outcome session::start(std::vector<std::byte>& out) {
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  return outcome::ok;
}

// nghttp2 found the peer at fault (a protocol error, a flood it bounds itself: RST_STREAM's
// rate, CONTINUATIONs, queued acknowledgements) or ran out of the memory we allow it.
record_session::outcome session::library_failed(int error, std::vector<std::byte>& out) {
  if (_s->fatal.empty()) {
    _s->goaway_code = error == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
                      : error == NGHTTP2_ERR_NOMEM ? NGHTTP2_INTERNAL_ERROR
                                                    : NGHTTP2_PROTOCOL_ERROR;
    _s->fail_with(std::string("HTTP/2: ") + nghttp2_strerror(error), {}, session_event::protocol_error);
  }
  return fail(out);
}

record_session::outcome session::close_notify(std::vector<std::byte>& out) {
  nghttp2_submit_goaway(_s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(_s->ng),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  int error = 0;
  return drain(_s->ng, out, error) ? outcome::ok : outcome::failed;
}

}  // namespace ringrpc::detail::grpc

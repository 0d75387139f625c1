// The response side of a gRPC session: the server's frames for a call id (= the stream id)
// become that stream's HTTP/2 response. A unary Reply is headers, the message and trailers; an
// Error before any message is a trailers-only response. A stream's first frame sends the
// headers, each StreamMessage one gRPC message, its end (Reply or Error) the trailers once
// nghttp2 has taken every message before it. The server's credit for a stream is granted back
// as nghttp2 takes its messages, which the client's window paces: a client that does not read
// stops the handler's writes (docs/grpc.md, "Streams").
#include <algorithm>
#include <cstring>
#include <new>

#include "grpc/grpc_session_state.hpp"
#include "grpc/grpc_text.hpp"

namespace ringrpc::detail::grpc {

namespace {

/// A frame the server wrote, decoded; frames from the server are ours, so one that fails to
/// decode (outcome not ok) is skipped rather than trusted.
decoded_frame decode_ours(std::span<const std::byte> f, std::vector<std::byte>& aligned) noexcept {
  if (reinterpret_cast<std::uintptr_t>(f.data()) % 8 != 0) {
    try {
      aligned.assign(f.begin(), f.end());
    } catch (const std::bad_alloc&) {
      return {decode_outcome::malformed, {}};
    }
    f = aligned;
  }
  return decode_frame(f);
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

ssize_t read_reply_cb(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                      nghttp2_data_source* source, void* user) {
  try {
    return session::state::of(user).read_reply(*static_cast<call_stream*>(source->ptr), buf, length, flags);
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;  // nothing may unwind through nghttp2: this connection goes
  }
}

}  // namespace

void session::state::take_reply_frame(std::span<const std::byte> f) {
  decoded_frame decoded = decode_ours(f, aligned);
  if (decoded.outcome != decode_outcome::ok) return;
  const frame_view& v = decoded.view;
  if (v.call_id == 0) {
    // The server's word on the whole connection (it is closing it): GOAWAY says why.
    const std::string why(v.message.substr(0, 256));
    nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng),
                          NGHTTP2_INTERNAL_ERROR, reinterpret_cast<const std::uint8_t*>(why.data()), why.size());
    return;
  }
  if (v.call_id > 0x7fffffff) return;
  call_stream* st = find(static_cast<std::int32_t>(v.call_id));
  if (st == nullptr || st->answered) return;  // reset by the client, or ended here, meanwhile
  if (st->kind != 0 && (v.kind == wire::Kind::Reply || v.kind == wire::Kind::Error)) {
    // The end of a stream the client may still be sending on: what it sent is not for anyone.
    drop_body(*st);
    give_back_window(*st);
  }
  switch (v.kind) {
    case wire::Kind::Reply:
      if (st->kind == 0) return respond(*st, v.payload, &v);
      // A client stream's Reply carries its one answer (an empty one too: an empty protobuf
      // message is a message); another stream's, only a payload it has.
      if (st->kind == 2 || !v.payload.empty()) {
        if (!st->headers_sent) send_headers(*st, &v);
        add_message(*st, v.payload);
      }
      if (!st->headers_sent) return answer_trailers_only(*st, 0, {}, v);
      return end_with(*st, 0, {}, &v);
    case wire::Kind::Error:
      if (!st->headers_sent) return answer_trailers_only(*st, grpc_code(v.code), v.message, v);
      return end_with(*st, grpc_code(v.code), v.message, &v);
    case wire::Kind::StreamMessage:
      if (st->kind == 0) return;
      if (!st->headers_sent) send_headers(*st, &v);
      return add_message(*st, v.payload);
    case wire::Kind::StreamCredit:
      st->credit_messages += v.credit_messages;
      st->credit_bytes += static_cast<std::int64_t>(std::min<std::uint64_t>(v.credit_bytes, std::uint64_t{1} << 62));
      return pump(*st);
    default:
      return;
  }
}

// A unary call's answer: headers, the one message, trailers.
void session::state::respond(call_stream& st, std::span<const std::byte> message, const frame_view* v) {
  send_headers(st, v);
  add_message(st, message);
  end_with(st, 0, {}, v);
}

// The response's headers (the server's metadata, if `v` has any), with a data source that
// gives nghttp2 the stream's messages as they come.
void session::state::send_headers(call_stream& st, const frame_view* v) {
  thread_local std::vector<std::string> header_text;
  thread_local std::vector<nghttp2_nv> headers;
  header_text.clear();
  headers.clear();
  headers.push_back(nv(":status", "200"));
  headers.push_back(nv("content-type", "application/grpc"));
  if (v != nullptr) {
    append_pairs(v->metadata, header_text);
    to_nv(header_text, headers);
  }
  nghttp2_data_provider body{};
  body.source.ptr = &st;
  body.read_callback = read_reply_cb;
  st.headers_sent = true;
  wrote_since_ping = true;
  submitted(st, nghttp2_submit_response(ng, st.id, headers.data(), headers.size(), &body));
}

void session::state::add_message(call_stream& st, std::span<const std::byte> message) {
  if (st.reply_sent == st.reply.size()) {
    st.reply.clear();
    st.reply_sent = 0;
  } else if (st.reply_sent >= 64 * 1024) {
    st.reply.erase(st.reply.begin(), st.reply.begin() + static_cast<std::ptrdiff_t>(st.reply_sent));
    st.reply_sent = 0;
  }
  const std::size_t at = st.reply.size();
  st.reply.resize(at + message_prefix + message.size());
  const auto n = static_cast<std::uint32_t>(message.size());
  std::byte* p = st.reply.data() + at;
  p[0] = std::byte{0};
  p[1] = std::byte(n >> 24);
  p[2] = std::byte(n >> 16);
  p[3] = std::byte(n >> 8);
  p[4] = std::byte(n);
  if (!message.empty()) std::memcpy(p + message_prefix, message.data(), message.size());
  held_reply += message_prefix + message.size();
  if (st.kind != 0) {
    // Where this message ends in the bytes nghttp2 will have taken: its credit goes back then.
    st.message_ends.push_back(st.taken + (st.reply.size() - st.reply_sent));
  }
  wake(st);
}

// The stream's end: its trailers go once nghttp2 has taken every message before them.
void session::state::end_with(call_stream& st, int code, std::string_view message, const frame_view* v) {
  st.answered = true;
  st.end_code = code;
  st.end_message = message;
  if (v != nullptr) append_pairs(v->trailers, st.trailer_text);
  wake(st);
}

// No message was sent: one HEADERS frame carries the status, the server's headers and its
// trailers.
void session::state::answer_trailers_only(call_stream& st, int code, std::string_view message, const frame_view& v) {
  st.answered = true;
  st.headers_sent = true;
  wrote_since_ping = true;
  const std::string code_text = std::to_string(code);
  const std::string message_text = percent_encode(message);
  const std::string pushback = std::to_string(v.retry_after_ms);
  std::vector<std::string> text;
  append_pairs(v.metadata, text);
  append_pairs(v.trailers, text);
  std::vector<nghttp2_nv> h{nv(":status", "200"), nv("content-type", "application/grpc"),
                            nv("grpc-status", code_text)};
  if (!message_text.empty()) h.push_back(nv("grpc-message", message_text));
  if (v.retry_after_ms != 0) {
    h.push_back(nv("grpc-retry-pushback-ms", pushback));
    h.push_back(nv("retry-after-ms", pushback));
  }
  to_nv(text, h);
  submitted(st, nghttp2_submit_response(ng, st.id, h.data(), h.size(), nullptr));
}

void session::state::wake(call_stream& st) {
  if (!st.deferred) return;
  st.deferred = false;
  const int rv = nghttp2_session_resume_data(ng, st.id);
  if (rv == NGHTTP2_ERR_NOMEM) throw std::bad_alloc();
}

// nghttp2's data source: copies the stream's messages into its DATA frames; with none waiting
// the stream is deferred until the server sends one or its end; after the end, the trailers.
ssize_t session::state::read_reply(call_stream& st, std::uint8_t* buf, std::size_t length, std::uint32_t* flags) {
  const std::size_t waiting = st.reply.size() - st.reply_sent;
  if (waiting == 0 && !st.answered) {
    st.deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  const std::size_t n = std::min(length, waiting);
  if (n != 0) std::memcpy(buf, st.reply.data() + st.reply_sent, n);
  st.reply_sent += n;
  st.taken += n;
  held_reply -= n;
  // Data going out forgives the client's PINGs: gRPC's clients measure the bandwidth with one
  // per burst of DATA they receive.
  if (n != 0) wrote_since_ping = true;
  if (st.kind != 0) grant_taken(st);
  if (st.reply_sent != st.reply.size() || !st.answered) return static_cast<ssize_t>(n);
  *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
  empty_buffer(st.reply);
  st.reply_sent = 0;
  const std::string code = std::to_string(st.end_code);
  const std::string message = percent_encode(st.end_message);
  thread_local std::vector<nghttp2_nv> t;  // kept: no allocation per call
  t.clear();
  t.push_back(nv("grpc-status", code));
  if (!message.empty()) t.push_back(nv("grpc-message", message));
  to_nv(st.trailer_text, t);
  const int rv = nghttp2_submit_trailer(ng, st.id, t.data(), t.size());
  if (rv != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
  std::vector<std::string>().swap(st.trailer_text);
  return static_cast<ssize_t>(n);
}

// Messages nghttp2 took are the client's to read: the server may send as many more. Granted
// in one frame once half our window is taken (as ringrpc's own clients grant).
void session::state::grant_taken(call_stream& st) {
  while (st.ends_head < st.message_ends.size() && st.message_ends[st.ends_head] <= st.taken) {
    const std::uint64_t end = st.message_ends[st.ends_head++];
    st.grant_messages += 1;
    st.grant_bytes += end - st.last_end - message_prefix;
    st.last_end = end;
  }
  if (st.ends_head == st.message_ends.size()) {
    st.message_ends.clear();
    st.ends_head = 0;
  }
  if (st.answered) return;  // the end is in: nothing more to grant for
  if (st.grant_messages < server_window_messages / 2 && st.grant_bytes < server_window_bytes / 2) return;
  frame_view v;
  v.call_id = static_cast<std::uint64_t>(st.id);
  v.kind = wire::Kind::StreamCredit;
  v.credit_messages = st.grant_messages;
  v.credit_bytes = st.grant_bytes;
  emit(v);
  st.grant_messages = 0;
  st.grant_bytes = 0;
}

}  // namespace ringrpc::detail::grpc

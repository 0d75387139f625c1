// The response side of a gRPC session: the server's frames for a call id (= the stream id)
// become that stream's HTTP/2 response. A unary Reply is headers, the message and trailers; an
// Error before any message is a trailers-only response. A stream's first frame sends the
// headers, each StreamMessage one gRPC message, its end (Reply or Error) the trailers after
// every message before it. The server's credit for a stream is granted back as its messages
// go out, which the client's window paces: a client that does not read stops the handler's
// writes (docs/grpc.md, "Streams").
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

void to_fields(const std::vector<std::string>& text, std::vector<h2_field>& out) {
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) out.push_back({text[i], text[i + 1]});
}

}  // namespace

void session::state::take_reply_frame(std::span<const std::byte> f) {
  decoded_frame decoded = decode_ours(f, aligned);
  if (decoded.outcome != decode_outcome::ok) return;
  const frame_view& v = decoded.view;
  if (v.call_id == 0) {
    // The server's word on the whole connection (it is closing it): GOAWAY says why.
    h2.shut_down(h2::e_internal, v.message.substr(0, 256));
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

// The response's headers, with the server's metadata if `v` has any.
void session::state::send_headers(call_stream& st, const frame_view* v) {
  thread_local std::vector<std::string> header_text;
  thread_local std::vector<h2_field> headers;
  header_text.clear();
  headers.clear();
  headers.push_back(h2::status_200);
  headers.push_back(h2::grpc_content_type);
  if (v != nullptr) {
    append_pairs(v->metadata, header_text);
    to_fields(header_text, headers);
  }
  st.headers_sent = true;
  wrote_since_ping = true;
  h2.send_headers(st, headers, false);
}

// One gRPC message: its prefix and body as one DATA payload, written now as far as the
// client's windows allow (the rest waits in HTTP/2's stream).
void session::state::add_message(call_stream& st, std::span<const std::byte> message) {
  const auto n = static_cast<std::uint32_t>(message.size());
  const std::byte prefix[message_prefix] = {std::byte{0}, std::byte(n >> 24), std::byte(n >> 16), std::byte(n >> 8),
                                            std::byte(n)};
  if (st.kind != 0) {
    // Where this message ends in the stream's DATA: its credit goes back once that is out.
    st.queued += message_prefix + message.size();
    st.message_ends.push_back(st.queued);
  }
  h2.send_data(st, prefix, message);
}

// The stream's end: its trailers, which HTTP/2 sends after every message before them.
void session::state::end_with(call_stream& st, int code, std::string_view message, const frame_view* v) {
  st.answered = true;
  const std::string code_text = std::to_string(code);
  const std::string message_text = percent_encode(message);
  thread_local std::vector<std::string> trailer_text;
  thread_local std::vector<h2_field> t;  // kept: no allocation per call
  trailer_text.clear();
  t.clear();
  t.push_back(code == 0 ? h2::grpc_status_ok : h2_field{"grpc-status", code_text});
  if (!message_text.empty()) t.push_back({"grpc-message", message_text});
  if (v != nullptr) {
    append_pairs(v->trailers, trailer_text);
    to_fields(trailer_text, t);
  }
  h2.send_trailers(st, t);
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
  std::vector<h2_field> h{h2::status_200, h2::grpc_content_type, {"grpc-status", code_text}};
  if (!message_text.empty()) h.push_back({"grpc-message", message_text});
  if (v.retry_after_ms != 0) {
    h.push_back({"grpc-retry-pushback-ms", pushback});
    h.push_back({"retry-after-ms", pushback});
  }
  to_fields(text, h);
  h2.send_headers(st, h, true);
}

// Messages that went out are the client's to read: the server may send as many more. Granted
// in one frame once half our window is out (as ringrpc's own clients grant).
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

// The request side of a gRPC session: a client's headers and DATA become frames for the server.
// A unary call (or a server stream, which also takes one request message) is collected whole
// and becomes one Request (StreamOpen) at its END_STREAM. A client or bidi stream opens as
// soon as its headers are in, and each message becomes a StreamMessage as the server's credit
// allows: what the credit holds back keeps its HTTP/2 window, so a handler that does not read
// stops the client (docs/grpc.md, "Streams").
#include <algorithm>
#include <cstring>
#include <new>

#include "grpc/grpc_session_state.hpp"
#include "grpc/grpc_text.hpp"

namespace ringrpc::detail::grpc {

namespace {

bool takes_messages(const call_stream& st) noexcept { return st.kind == 2 || st.kind == 3; }

std::string bytes_text(std::size_t n) { return std::to_string(n); }

}  // namespace

void session::state::refuse(call_stream& s, int code, std::string message, const char* http) {
  if (s.refused) return;
  cancel_on_server(s);  // a stream the server runs (its client's trailers were refused) ends there too
  s.refused = true;
  s.refusal_code = code;
  s.refusal_message = std::move(message);
  s.http_status = http;
  drop_body(s);
}

void session::state::drop_body(call_stream& s) noexcept {
  request_bytes -= s.body.size();
  empty_buffer(s.body);
  s.body_head = 0;
  s.body_whole = 0;
}

// One request header, checked by HTTP/2 (h2_server); the header list's size is bounded by the
// caller (on_field).
void session::state::take_header(call_stream& st, std::string_view name, std::string_view value) {
  if (name == ":path") {
    st.path = value;
    method_of_path(value, st.method);
  } else if (name == ":method") {
    if (value != "POST") refuse(st, code_unimplemented, "gRPC calls are POST requests", "405");
  } else if (name.starts_with(':')) {
    // :scheme, :authority: HTTP/2 checks them.
  } else if (name == "content-type") {
    if (!value.starts_with("application/grpc")) {
      refuse(st, code_invalid_argument, "content-type is not application/grpc", "415");
    }
  } else if (name == "grpc-timeout") {
    const auto us = parse_timeout(value);
    if (!us) refuse(st, code_internal, "malformed grpc-timeout", "400");
    st.timeout_us = us.value_or(0);
  } else if (name == "grpc-encoding") {
    if (value != "identity") {
      refuse(st, code_unimplemented, "grpc-encoding '" + std::string(value) + "' is not supported");
      st.offer_identity = true;
    }
  } else if (name == "te" || name == "user-agent" || name.starts_with("grpc-")) {
    // Transport headers, not the caller's metadata.
  } else if (binary_key(name)) {
    auto bytes = base64_decode(value);
    if (!bytes) return refuse(st, code_internal, "metadata '" + std::string(name) + "' is not base64");
    st.metadata.push_back({std::string(name), std::move(*bytes)});
  } else {
    st.metadata.push_back({std::string(name), std::string(value)});
  }
}

// A kept header block opens a request again: the path, method, deadline and metadata it meant
// the last time (the same bytes, with HPACK's table unchanged, are the same fields).
bool session::state::on_known_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) {
  const known_request& k = known[slot];
  if (k.block != id) return false;
  auto& st = static_cast<call_stream&>(s);
  st.header_bytes = k.header_bytes;
  st.path = k.path;
  st.method = k.method;
  st.timeout_us = k.timeout_us;
  st.metadata = k.metadata;
  return true;
}

// A request refused for its headers is not remembered: each is refused again, field by field.
void session::state::remember_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) {
  const auto& st = static_cast<const call_stream&>(s);
  known_request& k = known[slot];
  k.block = 0;
  if (st.refused) return;
  try {
    k.path = st.path;
    k.method = st.method;
    k.metadata = std::vector<metadata_entry>(st.metadata);  // fresh: no string keeps an old capacity
  } catch (const std::bad_alloc&) {
    return;  // not remembered: the block's fields are taken one by one
  }
  k.timeout_us = st.timeout_us;
  k.header_bytes = st.header_bytes;
  k.block = id;
}

std::size_t session::state::known_bytes() const noexcept {
  std::size_t n = 0;
  for (const known_request& k : known) {
    n += k.path.capacity() + k.method.capacity() + k.metadata.capacity() * sizeof(metadata_entry);
    for (const metadata_entry& e : k.metadata) n += e.key.capacity() + e.value.capacity();
  }
  return n;
}

// The request's headers are all in: a client or bidi stream opens now, before its messages
// (its handler may answer before the client sends anything).
void session::state::headers_done(call_stream& st) {
  if (st.refused || st.path == health_path || st.method.empty()) return;
  st.kind = host.method_kind(st.method);
  if (takes_messages(st)) open_stream(st, {});
}

void session::state::take_data(call_stream& st, std::span<const std::byte> data) {
  st.received += data.size();
  if (st.refused || st.answered || st.client_done) return give_back_window(st);  // dropped
  if (request_bytes + data.size() > limits.max_request_bytes) {
    const std::string why = "requests being received on this connection exceed max_inflight_bytes_per_connection";
    if (takes_messages(st)) return end_stream_here(st, code_resource_exhausted, why);
    refuse(st, code_resource_exhausted, why);
    return give_back_window(st);
  }
  if (!takes_messages(st) && st.body.size() + data.size() > limits.max_message_bytes + message_prefix) {
    refuse(st, code_resource_exhausted,
           "request message larger than the server's max_frame_bytes (" + bytes_text(limits.max_message_bytes) + ")");
    return give_back_window(st);
  }
  st.body.insert(st.body.end(), data.begin(), data.end());
  request_bytes += data.size();
  if (takes_messages(st)) return pump(st);
  give_back_window(st);
}

// The client's window goes back for what the server took. While a whole message waits for
// the server's credit, every byte buffered behind it keeps its window too, so the client can
// send no more than its window beyond what the handler took. With none waiting, a message
// being received gives its window back as it comes: one larger than the window could not
// arrive otherwise (max_frame_bytes bounds it).
void session::state::give_back_window(call_stream& st) {
  const std::uint64_t held = st.body_whole > st.body_head ? st.body.size() - st.body_head : 0;
  const std::uint64_t target = st.received - held;
  if (target <= st.consumed) return;
  h2.consume(st, target - st.consumed);
  st.consumed = target;
}

// The client's END_STREAM.
void session::state::request_done(call_stream& st) {
  if (st.answered) return;
  if (st.refused) {
    // A stream whose response began (its client's trailers were refused): the trailers say so.
    if (st.headers_sent) return end_with(st, st.refusal_code, st.refusal_message, nullptr);
    return answer_refusal(st);
  }
  if (takes_messages(st)) {
    st.client_done = true;
    return pump(st);
  }
  finish_request(st);
}

// A unary call or a server stream: exactly one request message.
void session::state::finish_request(call_stream& st) {
  if (st.path == health_path) return answer_health(st);
  if (st.method.empty()) {
    refuse(st, code_unimplemented, "no method for the path '" + st.path + "'");
    return answer_refusal(st);
  }
  const std::span<const std::byte> body(st.body);
  if (body.size() < message_prefix) {
    refuse(st, code_unimplemented, "a unary call needs one request message, it sent none");
    return answer_refusal(st);
  }
  const auto flag = static_cast<std::uint8_t>(body[0]);
  const std::uint32_t length = message_length(body.data());
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
  if (st.kind == 1) return open_stream(st, body.subspan(message_prefix));
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
           "request larger than the server's max_frame_bytes (" + bytes_text(limits.max_message_bytes) + ")");
    return answer_refusal(st);
  }
  st.delivered = true;
  drop_body(st);
  std::vector<metadata_entry>().swap(st.metadata);
}

// A StreamOpen for the method's kind; `request` is a server stream's one message. The server
// may send as many messages as our window, granted back as they go out.
void session::state::open_stream(call_stream& st, std::span<const std::byte> request) {
  const metadata_to_send md{{}, st.metadata};
  frame_view v;
  v.call_id = static_cast<std::uint64_t>(st.id);
  v.kind = wire::Kind::StreamOpen;
  v.method = st.method;
  v.timeout_us = st.timeout_us;
  v.payload = request;
  v.stream_kind = st.kind;
  v.credit_messages = server_window_messages;
  v.credit_bytes = server_window_bytes;
  if (!st.metadata.empty()) v.metadata_out = &md;
  if (!emit(v)) {
    refuse(st, code_resource_exhausted,
           "request larger than the server's max_frame_bytes (" + bytes_text(limits.max_message_bytes) + ")");
    return answer_refusal(st);
  }
  st.delivered = true;
  if (st.kind == 1) drop_body(st);
  std::vector<metadata_entry>().swap(st.metadata);
}

// A client or bidi stream's messages go to the server while its credit lasts; the client's
// half-close follows the last of them.
void session::state::pump(call_stream& st) {
  if (!st.delivered || st.answered) return;
  // Past the whole messages known so far: are more whole now?
  while (st.body.size() - st.body_whole >= message_prefix) {
    const std::byte* p = st.body.data() + st.body_whole;
    const auto flag = static_cast<std::uint8_t>(p[0]);
    const std::uint32_t length = message_length(p);
    if (flag != 0) {
      return end_stream_here(st, code_internal,
                             flag == 1 ? "a compressed message without grpc-encoding" : "bad message flag");
    }
    if (length > limits.max_message_bytes) {
      return end_stream_here(st, code_resource_exhausted,
                             "request message larger than the server's max_frame_bytes (" +
                                 bytes_text(limits.max_message_bytes) + ")");
    }
    if (st.body.size() - st.body_whole - message_prefix < length) break;
    st.body_whole += message_prefix + length;
  }
  while (st.body_head < st.body_whole && st.credit_messages >= 1 && st.credit_bytes > 0) {
    const std::uint32_t length = message_length(st.body.data() + st.body_head);
    frame_view v;
    v.call_id = static_cast<std::uint64_t>(st.id);
    v.kind = wire::Kind::StreamMessage;
    v.payload = std::span<const std::byte>(st.body).subspan(st.body_head + message_prefix, length);
    if (!emit(v)) {
      return end_stream_here(st, code_resource_exhausted,
                             "request message larger than the server's max_frame_bytes (" +
                                 bytes_text(limits.max_message_bytes) + ")");
    }
    st.credit_messages -= 1;
    st.credit_bytes -= length;
    st.body_head += message_prefix + length;
  }
  // What went to the server leaves the buffer (all of it, or a big enough front to be worth
  // the move).
  if (st.body_head == st.body.size()) {
    request_bytes -= st.body.size();
    st.body.clear();
    st.body_head = st.body_whole = 0;
    if (st.body.capacity() > 64 * 1024) std::vector<std::byte>().swap(st.body);
  } else if (st.body_head >= 16 * 1024 && st.body_head * 2 >= st.body.size()) {
    st.body.erase(st.body.begin(), st.body.begin() + static_cast<std::ptrdiff_t>(st.body_head));
    request_bytes -= st.body_head;
    st.body_whole -= st.body_head;
    st.body_head = 0;
  }
  give_back_window(st);
  if (!st.client_done || st.half_closed) return;
  if (st.body.empty()) {
    frame_view v;
    v.call_id = static_cast<std::uint64_t>(st.id);
    v.kind = wire::Kind::StreamHalfClose;
    emit(v);
    st.half_closed = true;
  } else if (st.body_whole != st.body.size()) {
    end_stream_here(st, code_internal, "the request stream ended inside a message");
  }
  // Else whole messages still wait for credit: the half-close follows them.
}

// The session ends a stream itself (a message too large, a request cap, a malformed message):
// the server's side is cancelled, the client hears why.
void session::state::end_stream_here(call_stream& st, int code, std::string message) {
  cancel_on_server(st);
  drop_body(st);
  give_back_window(st);
  st.delivered = false;  // its Cancel is sent: refuse() sends no second
  if (!st.headers_sent) {
    st.refused = false;  // refuse() takes the new reason
    refuse(st, code, std::move(message));
    return answer_refusal(st);
  }
  st.refused = true;
  host.note(session_event::refused);
  end_with(st, code, message, nullptr);
}

void session::state::answer_refusal(call_stream& st) {
  st.answered = true;
  st.headers_sent = true;
  wrote_since_ping = true;
  host.note(session_event::refused);
  const std::string code = std::to_string(st.refusal_code);
  const std::string message = percent_encode(st.refusal_message);
  const h2_field h[] = {{":status", st.http_status}, {"content-type", "application/grpc"},
                        {"grpc-status", code}, {"grpc-message", message},
                        {"grpc-accept-encoding", "identity"}};
  h2.send_headers(st, std::span(h, st.offer_identity ? 5 : 4), true);
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
  const std::byte reply[] = {std::byte{0x08},
                             std::byte{static_cast<unsigned char>(h == session_host::health::serving ? 1 : 2)}};
  drop_body(st);
  respond(st, reply, nullptr);
}

}  // namespace ringrpc::detail::grpc

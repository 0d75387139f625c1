// A gRPC server session (src/grpc) fed whatever a client sends after HTTP/2's preface, cut into
// two reads at the place the first byte says. Every frame the session makes must be a frame the
// server can decode; calls are answered (a reply, or an error for every third), streams
// ("/server", "/client", "/bidi" are stream methods) get messages, credit and ends, and the
// answers are sealed back through the session, so the response side and the stream credit
// run on what the input made too. It must never crash, read past what it was given, or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "grpc/grpc_session.hpp"
#include "wire/frame_codec.hpp"

namespace {

struct host final : ringrpc::detail::grpc::session_host {
  health check_health(std::string_view service) noexcept override {
    return service.empty() || service == "echo" ? health::serving : health::unknown_service;
  }
  void note(ringrpc::detail::grpc::session_event) noexcept override {}
  std::uint8_t method_kind(std::string_view method) noexcept override {
    return method == "server" ? 1 : method == "client" ? 2 : method == "bidi" ? 3 : 0;
  }
};

constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// The server's answers to the Request frames in `frames` (whole frames, as the session makes).
void answer(std::vector<std::byte>& frames, std::vector<std::byte>& replies) {
  ringrpc::detail::frame_encoder encoder;
  std::vector<std::byte> one, aligned;
  std::size_t at = 0;
  unsigned n = 0;
  while (frames.size() - at >= 4) {
    const std::size_t whole = 4 + ringrpc::detail::read_frame_length(frames.data() + at);
    if (frames.size() - at < whole) std::abort();  // the session writes whole frames only
    aligned.assign(frames.begin() + static_cast<std::ptrdiff_t>(at),
                   frames.begin() + static_cast<std::ptrdiff_t>(at + whole));
    at += whole;
    ringrpc::detail::frame_view v;
    if (ringrpc::detail::decode_frame(aligned, v) != ringrpc::detail::decode_outcome::ok) std::abort();
    const auto add = [&](const ringrpc::detail::frame_view& f) {
      encoder.encode_into(f, one);
      replies.insert(replies.end(), one.begin(), one.end());
    };
    ringrpc::detail::frame_view r;
    r.call_id = v.call_id;
    if (v.kind == ringrpc::wire::Kind::StreamOpen || v.kind == ringrpc::wire::Kind::StreamMessage) {
      // A message back (the first of a stream, its headers), and credit for the client's.
      r.kind = ringrpc::wire::Kind::StreamMessage;
      r.payload = v.payload;
      add(r);
      if (v.kind == ringrpc::wire::Kind::StreamMessage) {
        ringrpc::detail::frame_view c;
        c.call_id = v.call_id;
        c.kind = ringrpc::wire::Kind::StreamCredit;
        c.credit_messages = 1;
        c.credit_bytes = v.payload.size() + 1;
        add(c);
      }
      if (v.kind == ringrpc::wire::Kind::StreamOpen && v.stream_kind == 1) {
        r.kind = ringrpc::wire::Kind::Reply;
        r.payload = {};
        add(r);
      }
      continue;
    }
    if (v.kind == ringrpc::wire::Kind::StreamHalfClose) {
      r.kind = ++n % 2 == 0 ? ringrpc::wire::Kind::Reply : ringrpc::wire::Kind::Error;
      r.code = ringrpc::status::internal;
      add(r);
      continue;
    }
    if (v.kind != ringrpc::wire::Kind::Request) continue;
    if (++n % 3 == 0) {
      ringrpc::detail::frame_view e;
      e.call_id = v.call_id;
      e.kind = ringrpc::wire::Kind::Error;
      e.code = ringrpc::status::not_found;
      e.message = "no such thing\n";
      e.retry_after_ms = 5;
      encoder.encode_into(e, one);
    } else {
      ringrpc::detail::encode_reply_frame(v.call_id, v.payload, one);
    }
    replies.insert(replies.end(), one.begin(), one.end());
  }
  frames.clear();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  host h;
  ringrpc::detail::grpc::session_limits limits;
  limits.max_message_bytes = 64 * 1024;
  limits.max_request_bytes = 256 * 1024;
  limits.max_header_bytes = 4096;
  limits.max_concurrent_streams = 16;
  ringrpc::detail::grpc::session s(limits, h);
  std::vector<std::byte> frames, out, replies;
  using outcome = ringrpc::record_session::outcome;
  if (s.receive({reinterpret_cast<const std::byte*>(preface.data()), preface.size()}, frames, out) != outcome::ok) {
    std::abort();
  }
  const auto* p = reinterpret_cast<const std::byte*>(data) + 1;
  const std::size_t rest = size - 1;
  const std::size_t cut = std::min<std::size_t>(data[0], rest);
  for (const auto part : {std::span(p, cut), std::span(p + cut, rest - cut)}) {
    if (s.receive(part, frames, out) == outcome::failed) return 0;
    answer(frames, replies);
    // Sealed in two pieces, as the responder's limit may cut a frame.
    const std::size_t half = replies.size() / 2;
    if (s.seal(std::span(replies).first(half), out) == outcome::failed) return 0;
    if (s.seal(std::span(replies).subspan(half), out) == outcome::failed) return 0;
    replies.clear();
    // What the seals decided for the server (credit, messages it let go) is answered too.
    s.take_frames_for_server(frames);
    answer(frames, replies);
    if (s.seal(replies, out) == outcome::failed) return 0;
    replies.clear();
    out.clear();
  }
  return 0;
}

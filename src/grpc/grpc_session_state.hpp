#pragma once
// Inside a gRPC session (grpc_session.hpp): one record per HTTP/2 stream, and the state
// HTTP/2's callbacks work on. The request side (grpc_requests.cpp) turns a client's headers and
// messages into frames for the server; the response side (grpc_responses.cpp) turns the
// server's frames into HTTP/2; grpc_session.cpp holds the HTTP/2 connection (h2_server.hpp)
// and the session's interface.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/token_bucket.hpp"
#include "grpc/grpc_memory.hpp"
#include "grpc/grpc_session.hpp"
#include "grpc/h2_server.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::detail::grpc {

inline constexpr std::size_t message_prefix = 5;  // compressed flag + u32 big-endian length
inline constexpr std::string_view health_path = "/grpc.health.v1.Health/Check";
// gRPC codes the session answers with itself (grpc/status.h).
inline constexpr int code_invalid_argument = 3, code_not_found = 5, code_resource_exhausted = 8,
                     code_unimplemented = 12, code_internal = 13;

/// What a stream may send before the other side grants more: client -> server is the ringrpc
/// protocol's constant (docs/protocol.md 13.3); server -> client is what our StreamOpen offers,
/// 64 KiB, about HTTP/2's default stream window, so a stream holds about what the client's
/// window would.
inline constexpr std::int64_t client_window_messages = 16;
inline constexpr std::int64_t client_window_bytes = 262144;
inline constexpr std::uint32_t server_window_messages = 16;
inline constexpr std::uint64_t server_window_bytes = 65536;

/// A stream's request or reply buffer keeps up to this much capacity when emptied, so that a
/// small call's buffers serve the next call on the record without an allocation; held_bytes()
/// charges it to every live stream.
inline constexpr std::size_t kept_buffer_bytes = 1024;

/// Empties `b`, keeping its capacity up to kept_buffer_bytes.
inline void empty_buffer(std::vector<std::byte>& b) noexcept {
  b.clear();
  if (b.capacity() > kept_buffer_bytes) std::vector<std::byte>().swap(b);
}

/// A gRPC message's 5-byte prefix at `p`: the compressed flag and the length.
inline std::uint32_t message_length(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[1]) << 24 | static_cast<std::uint32_t>(p[2]) << 16 |
         static_cast<std::uint32_t>(p[3]) << 8 | static_cast<std::uint32_t>(p[4]);
}

/// One HTTP/2 stream: a gRPC call from its first header to its last byte out. Its HTTP/2 part
/// (windows, state, DATA the peer's window holds back) is h2_server's. Every member has its
/// initializer: a kept record is renewed by default-initialization (grpc_stream_cache.cpp).
struct call_stream : h2_stream {
  std::uint8_t kind = 0;  // the method's ringrpc stream kind: 0 unary, 1 server, 2 client, 3 bidi
  std::string path;
  std::string method;
  std::vector<metadata_entry> metadata;  // request headers the handler sees
  std::uint64_t timeout_us = 0;
  std::size_t header_bytes = 0;

  // The request side. `body` holds the DATA not yet given to the server, message prefixes
  // included: a unary call's (or a server stream's) whole request, or a client or bidi
  // stream's messages from `body_head` on, the whole ones (up to `body_whole`) waiting for the
  // server's credit.
  std::vector<std::byte> body;
  std::size_t body_head = 0;
  std::size_t body_whole = 0;
  std::uint64_t received = 0;  // DATA bytes of this stream ...
  std::uint64_t consumed = 0;  // ... and those whose flow-control window went back to the client
  std::int64_t credit_messages = client_window_messages;  // what the server lets us send it
  std::int64_t credit_bytes = client_window_bytes;
  bool client_done = false;  // END_STREAM came: the half-close follows the messages held
  bool half_closed = false;  // ... and went to the server

  // Refused by the session before it became a call (or ended by it since): the answer it gets.
  bool refused = false;
  int refusal_code = 0;
  std::string refusal_message;
  const char* http_status = "200";
  bool offer_identity = false;  // the refusal names the encodings we accept
  bool delivered = false;  // a Request or StreamOpen went to the server
  bool answered = false;   // the end is known: nothing more comes from the server for it

  // The response side: headers once, then messages (prefix included), then trailers. A
  // stream's messages count in `queued` as they are given to HTTP/2 and in `taken` as they go
  // out; the server's credit for each goes back when it is out.
  bool headers_sent = false;
  std::uint64_t queued = 0;
  std::uint64_t taken = 0;
  std::vector<std::uint64_t> message_ends;  // `queued` at which each message still out ends
  std::size_t ends_head = 0;
  std::uint64_t last_end = 0;
  std::uint32_t grant_messages = 0;  // server messages taken and not yet granted back
  std::uint64_t grant_bytes = 0;

  call_stream* prev = nullptr;  // the session's list of its streams (freed with it)
  call_stream* next = nullptr;
};

struct session::state final : h2_handler {
  session_limits limits;
  session_host& host;
  // Where frames for the server go: receive()'s output while it runs, else `to_server`, which
  // the server takes after a seal (session::take_frames_for_server).
  std::vector<std::byte>* plain = nullptr;
  std::vector<std::byte> to_server;
  library_memory library;         // HPACK's decoder's allocations, against limits.max_library_bytes
  h2_server h2;
  std::size_t request_bytes = 0;  // the streams' `body` bytes
  std::size_t streams = 0;
  call_stream* live = nullptr;  // every stream not yet closed
  std::vector<std::byte> partial;  // reply frames' bytes not yet whole
  std::vector<std::byte> aligned;  // a reply frame copied to decode it
  // The flood bounds HTTP/2 leaves to gRPC's policy (session_limits).
  std::int64_t last_ping_ns = 0;
  unsigned ping_strikes = 0;
  bool wrote_since_ping = false;  // a response of ours went out since the last PING
  token_bucket settings_bucket;  // each SETTINGS costs an acknowledgement
  bool closing_counted = false;  // this connection's close is in the server's counters
  // What a kept header block's fields made of the request they opened (remember_block), by the
  // block's slot: a client's next calls of the same method with the same metadata (and no
  // deadline, whose grpc-timeout changes per call) send the same block, and take this in one
  // step (on_known_block) instead of a compare per field name.
  struct known_request {
    std::uint64_t block = 0;  // hpack_repeats' id of the block; 0: none
    std::string path;
    std::string method;
    std::vector<metadata_entry> metadata;
    std::uint64_t timeout_us = 0;
    std::size_t header_bytes = 0;
  };
  known_request known[hpack_repeats::kept];

  state(const session_limits& l, session_host& h);
  ~state();

  /// The record of stream `id`, or null.
  call_stream* find(std::int32_t id) noexcept { return static_cast<call_stream*>(h2.find(id)); }
  /// A stream record, fresh or kept from a finished stream (grpc_stream_cache.cpp). Throws
  /// std::bad_alloc.
  call_stream* new_stream();
  /// A finished stream's record, kept for a next one or freed.
  static void recycle(call_stream* st) noexcept;
  void link(call_stream* st) noexcept;
  void unlink_and_delete(call_stream* st) noexcept;  ///< ... and recycle()

  /// Appends `v` as a frame for the server; false (nothing appended) if the frame's body would
  /// be over max_frame_bytes, which the server's assembler would answer by closing the
  /// connection: the caller refuses that one call instead.
  bool emit(const frame_view& v);
  /// Ends the connection with GOAWAY `code` saying `debug` (a reason gRPC's clients read, such
  /// as "too_many_pings"), counted as `e`.
  void fail_with(std::uint32_t code, std::string why, std::string debug, session_event e);
  /// A Cancel for `st` if the server runs it and has not ended it; true if one went. Throws
  /// std::bad_alloc.
  bool cancel_on_server(call_stream& st);

  // What HTTP/2 tells us (h2_handler; grpc_session.cpp).
  h2_stream& on_open(std::int32_t id) override;
  void on_field(h2_stream& s, std::string_view name, std::string_view value, bool trailer) override;
  bool on_known_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) override;
  void remember_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) override;
  void on_headers(h2_stream& s) override;
  void on_data(h2_stream& s, std::span<const std::byte> data) override;
  void on_request_end(h2_stream& s) override;
  void on_sent(h2_stream& s, std::size_t n) override;
  void on_closed(h2_stream& s, bool by_peer) noexcept override;
  void on_ping() override;
  void on_settings() override;

  // The request side (grpc_requests.cpp).
  void refuse(call_stream& s, int code, std::string message, const char* http = "200");
  void drop_body(call_stream& s) noexcept;
  void take_header(call_stream& st, std::string_view name, std::string_view value);
  std::size_t known_bytes() const noexcept;  ///< what `known` holds
  void take_data(call_stream& st, std::span<const std::byte> data);
  void headers_done(call_stream& st);
  void request_done(call_stream& st);
  void finish_request(call_stream& st);
  void answer_health(call_stream& st);
  void open_stream(call_stream& st, std::span<const std::byte> request);
  void pump(call_stream& st);
  void give_back_window(call_stream& st);
  void end_stream_here(call_stream& st, int code, std::string message);
  void answer_refusal(call_stream& s);

  // The response side (grpc_responses.cpp).
  void take_reply_frame(std::span<const std::byte> f);
  void respond(call_stream& st, std::span<const std::byte> message, const frame_view* v);
  void send_headers(call_stream& st, const frame_view* v);
  void add_message(call_stream& st, std::span<const std::byte> message);
  void end_with(call_stream& st, int code, std::string_view message, const frame_view* v);
  void answer_trailers_only(call_stream& st, int code, std::string_view message, const frame_view& v);
  void grant_taken(call_stream& st);
};

}  // namespace ringrpc::detail::grpc

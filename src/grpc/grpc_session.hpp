#pragma once
// gRPC over HTTP/2 on a ringrpc connection, as a record layer: HTTP/2 bytes from the peer
// become ringrpc frames (a Request per unary call, a StreamOpen and StreamMessages per
// streaming call, a Cancel per RST_STREAM of one in flight), and the server's frames become
// HTTP/2 responses. Everything between the frames and the server is the server's own: the
// same checks, caps, budget and dispatch as a ringrpc client meets. HTTP/2 itself is
// h2_server.hpp (no socket of its own; nghttp2's HPACK decoder); this module's job is the gRPC
// mapping and gRPC's own bounds (docs/grpc.md).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::detail::grpc {

/// The server's caps as a gRPC connection applies them before a frame exists.
struct session_limits {
  std::uint32_t max_concurrent_streams = 100;  ///< SETTINGS_MAX_CONCURRENT_STREAMS
  std::size_t max_message_bytes = 16u << 20;   ///< one request message (max_frame_bytes)
  std::size_t max_request_bytes = 32u << 20;   ///< request bodies being received, all streams
  std::size_t max_header_bytes = 16 * 1024;    ///< one header block: name + value + 32 each
  std::size_t max_held_reply_bytes = 4u << 20; ///< replies the peer's window holds back (holding_back())
  std::size_t max_library_bytes = 1u << 20;    ///< what nghttp2's HPACK decoder may allocate
  /// A PING sooner than this after the previous one, with no response of ours between them,
  /// is a strike; the third strike closes the connection ("too_many_pings"), as gRPC's own
  /// servers do (their default: 5 minutes).
  std::int64_t min_ping_interval_ns = 300'000'000'000;
  /// SETTINGS frames a peer may send in a burst, and per second after it.
  unsigned settings_burst = 16;
  unsigned settings_per_second = 2;
};

/// What a session tells the server's counters.
enum class session_event : std::uint8_t {
  refused,         ///< a call answered by the session itself (bad path, encoding, size, timeout)
  cancelled,       ///< RST_STREAM of a call the server was running
  health_check,    ///< grpc.health.v1.Health/Check answered
  protocol_error,  ///< the connection closed with GOAWAY: a protocol error or a flood
  too_many_pings,  ///< ... GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
};

/// What a session asks of the server it belongs to.
class session_host {
 public:
  enum class health : std::uint8_t { serving, not_serving, unknown_service };
  /// grpc.health.v1.Health/Check for `service` ("" is the whole server).
  virtual health check_health(std::string_view service) noexcept = 0;
  virtual void note(session_event e) noexcept = 0;
  /// The ringrpc stream kind `method` is registered as (1 server, 2 client, 3 bidi), or 0: a
  /// unary method, or none (the server answers that call as it answers any).
  virtual std::uint8_t method_kind(std::string_view method) noexcept = 0;

 protected:
  ~session_host() = default;
};

/// One connection's session; owned and used by one thread (the shard's).
class session final : public record_session {
 public:
  /// Throws std::bad_alloc.
  session(const session_limits& limits, session_host& host);
  ~session() override;
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  outcome receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                  std::vector<std::byte>& out) override;
  outcome seal(std::span<const std::byte> plain, std::vector<std::byte>& out) override;
  outcome start(std::vector<std::byte>& out) override;
  bool established() const noexcept override { return true; }
  std::string error() const override { return _error; }
  peer_certificate_identity peer_identity() const override { return {}; }
  std::string describe() const override { return "HTTP/2 (gRPC)"; }
  /// A request, or a stream's message, part-received: a peer that stops sending in the middle
  /// of one is shed by the frame-stall timeout, as one stopping inside a frame is.
  bool holds_partial_record() const noexcept override;
  /// GOAWAY: the server ends the connection in order.
  outcome close_notify(std::vector<std::byte>& out) override;

  /// Bytes this session holds now: HPACK's decoder's, request bodies being received, replies
  /// waiting for the peer's window (charged to the server's memory budget).
  std::size_t held_bytes() const noexcept;
  /// Replies the client's flow-control window holds back have reached max_held_reply_bytes:
  /// the server seals no more until the client reads (the rest wait in its reply queue, where
  /// the write-stall timeout sheds a client that never does).
  bool holding_back() const noexcept;

  /// Frames for the server decided while sealing (stream credit the client's reading freed,
  /// client messages the server's credit let go, cancels of streams the session reset): the
  /// server takes them after the seal, as it takes what receive() gives it. The next
  /// receive() gives them first, so none overtakes another. take_frames_for_server() throws
  /// std::bad_alloc.
  bool has_frames_for_server() const noexcept;
  void take_frames_for_server(std::vector<std::byte>& plain);

  struct state;  // what HTTP/2's callbacks work on (grpc_session_state.hpp)

 private:
  outcome finish(bool out_of_memory);
  std::unique_ptr<state> _s;
  std::string _error;
};

}  // namespace ringrpc::detail::grpc

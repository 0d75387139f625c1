#pragma once
// What ringrpc-load speaks: one small codec per protocol, chosen by the target URL's scheme.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "request_template.hpp"
#include "ringrpc/metadata.hpp"

namespace ringrpc::load {

class message_template;  // message_template.hpp

/// A parsed target: ringrpc://host:port/method, echo://host:port, redis://host:port,
/// http://host:port/path, h2c://host:port/path, grpc://host:port/pkg.Service/Method.
struct target {
  std::string scheme;  ///< "ringrpc", "echo", "redis", "http", "h2c", "grpc"
  std::string host;
  std::uint16_t port = 0;
  /// method (ringrpc, without the leading '/'), path (http, h2c) or "/pkg.Service/Method" (grpc)
  std::string path;
  /// Spoken over TLS: https (http), rediss (redis), ringrpcs (ringrpc), h2 (h2c), grpcs (grpc).
  bool tls = false;
};

/// Parses a target URL; throws std::invalid_argument with a message naming what is wrong.
target parse_target(std::string_view url);

/// One weighted request kind of a run (`--mix`): e.g. a ringrpc method, an HTTP path, a redis
/// command. `name` is what reports show.
struct request_kind {
  std::string name;
  unsigned weight = 1;
  std::string method;  ///< ringrpc method / HTTP method ("GET", "POST") / redis command ("PING", "SET", "GET")
  std::string path;    ///< HTTP path; unused elsewhere
};

/// --max-body's default: what one reply may hold, and so what one connection buffers.
inline constexpr std::uint32_t default_max_reply_bytes = 1u << 20;

/// The request texts that change per call (request_template.hpp). HTTP and h2c paths (the URL's,
/// --mix's) are compiled by their codecs from the request kinds, with `data` behind them.
struct request_templates {
  bool has_payload = false;
  request_template payload;  ///< --template: the payload (ringrpc), body (HTTP, h2c), SET value (redis)
  bool has_key = false;
  request_template key;      ///< --redis-key: the key of GET and SET
  /// --method or --proto with placeholders in --data: the typed request each call renders (the
  /// ringrpc payload, the gRPC message); null otherwise.
  std::shared_ptr<const message_template> message;
  /// --data-file's lines, the run's call counter and seed; never null.
  std::shared_ptr<template_data> data = std::make_shared<template_data>();
};

/// Options every codec may use.
struct codec_options {
  std::vector<std::byte> payload;       ///< request payload (ringrpc, echo, HTTP POST body, redis SET value)
  std::uint64_t key_space = 100000;     ///< redis: keys are "key:<n>", n < key_space
  /// A reply (its body: HTTP, h2c, gRPC message; its frame: ringrpc, echo, redis) claiming or
  /// bringing more fails its connection's calls as "reply_too_large" (--max-body). A chunked
  /// HTTP body may take twice this on the wire, its chunk framing included.
  std::uint32_t max_reply_bytes = default_max_reply_bytes;
  std::uint64_t timeout_us = 0;         ///< ringrpc: deadline sent with each call
  std::string host_header;              ///< HTTP Host header
  /// HTTP, h2c, gRPC: extra "Name: value" header lines (-H); a Host among them replaces
  /// host_header. ringrpc: metadata sent with every call, the name lowercased as its key
  /// ("Authorization: Bearer T" is the key authorization); "key=value" as ringrpc-call takes it
  /// is accepted too.
  std::vector<std::string> headers;
  /// ringrpc: sent as "authorization: Bearer <token>" unless headers already have an
  /// authorization (main() fills it from RINGRPC_TOKEN, as ringrpc-call does).
  std::string bearer_token;
  /// ringrpc: a reply whose payload is not the request's own bytes is an error
  /// ("payload_mismatch"): for echo methods, to check the bytes come back exact.
  bool verify_echo = false;
  /// Per-call request texts; null means none (make_protocol then gives its codecs an empty set,
  /// for placeholders in HTTP paths).
  std::shared_ptr<const request_templates> templates;
  /// ringrpc --stream: each connection carries one bidi stream of the method, and a "call" is
  /// one message on it, answered by the message the server sends back (proto_ringrpc_stream.cpp).
  bool stream = false;
  /// --stream: the messages in flight per stream at most (-P), which sizes the window the
  /// client grants the server.
  std::uint32_t stream_depth = 1;
};

/// Where a URL's connections go: the one endpoint of a host:port target (parse_target). The
/// seam for targets that name a set of servers (a registry, e.g. etcd://) rather than one:
/// they resolve here to their members, and the engine spreads connections over the list
/// (engine_config::endpoints). Throws std::invalid_argument as parse_target does.
/// etcd://HOST:PORT/SERVICE[/PATH][?prefix=/p&scheme=ringrpc] lists the service's live members
/// once (target_etcd.hpp); std::runtime_error when etcd cannot be reached or lists none, and
/// std::invalid_argument in a build without the discovery library.
std::vector<target> resolve_endpoints(std::string_view url);

/// Whether `url` names a registry (etcd://) whose members resolve_endpoints lists.
bool is_registry_url(std::string_view url);

/// The outcome of trying to parse one reply from the front of the received bytes.
enum class reply_status {
  incomplete,      ///< need more bytes; nothing consumed
  ok,              ///< one successful reply consumed
  error_reply,     ///< one reply consumed that the server sent as an error (e.g. HTTP 5xx, RESP -ERR, ringrpc status)
  protocol_error,  ///< the bytes cannot be a valid reply; the connection must be closed
  /// bytes consumed that answer no request (HTTP/2 SETTINGS, WINDOW_UPDATE, the head of a
  /// reply whose end is still to come); `close_after` may be set (an HTTP/2 GOAWAY)
  no_reply,
};

struct reply {
  reply_status status = reply_status::incomplete;
  std::size_t consumed = 0;   ///< bytes of the input this reply used (0 unless ok/error_reply)
  std::uint64_t seq = 0;      ///< which request it answers (the seq passed to write_request)
  std::string error;          ///< error_reply: a short kind, e.g. "http_503", "resp_err", "server_busy"; protocol_error: what was wrong
  /// The server announced it closes the connection after this reply (HTTP `Connection:
  /// close`): send nothing more on it and reconnect once it has closed, without an error.
  bool close_after = false;
  /// The server answered that this port expects TLS (nginx's 400 "The plain HTTP request was
  /// sent to HTTPS port"): a plaintext URL at a TLS port, diagnosed when it is the first reply.
  bool tls_port = false;
  /// protocol_error only: the bytes are the protocol, but the reply broke a limit or the
  /// server ended the connection with a named error ("reply_too_large",
  /// "h2_goaway_enhance_your_calm", "h2_flow_control_error"). The calls in flight on the
  /// connection are counted under this kind, and it is not diagnosed as another protocol.
  std::string lost_as;
};

/// A protocol_error reply saying what was wrong with the bytes.
inline reply protocol_error(std::string what) {
  reply r;
  r.status = reply_status::protocol_error;
  r.error = std::move(what);
  return r;
}

/// What a --stream codec's one stream has come to, for the engine to count (streams_opened,
/// streams_failed) when the connection ends or is replaced.
struct stream_progress {
  bool open_sent = false;    ///< the StreamOpen went out with the first message (counted as opened)
  bool opened = false;       ///< the server answered it: a message, a grant or an Ok end came back
  bool half_closed = false;  ///< we sent StreamHalfClose (at the end of the run)
  bool ended = false;        ///< its end came (Reply or Error)
  /// ended with an Error, or the server broke the stream's rules (end_kind "protocol"):
  /// `end_kind` and `end_message` say which
  bool failed = false;
  std::string end_kind;      ///< the status as errors are counted: "bad_request", ..., or "protocol"
  std::string end_message;   ///< the server's message, or what it broke
  std::uint64_t credit_waits = 0;  ///< messages that found no credit and waited for the server's grant
};

/// The stream side of a --stream codec: what the engine does once per connection at the end of
/// the run (never per call).
class stream_control {
 public:
  virtual ~stream_control() = default;
  /// Appends the half-close (the stream sends no more messages) to `out`; the server then ends
  /// the stream once it has answered every message.
  virtual void half_close(std::vector<std::byte>& out) = 0;
  virtual const stream_progress& progress() const noexcept = 0;
  /// The bytes of the buffer that keeps messages waiting for credit (tests: it stays bounded).
  virtual std::size_t held_buffer_bytes() const noexcept = 0;
};

/// Per-connection codec state. Owned by one engine thread.
class connection_codec {
 public:
  virtual ~connection_codec() = default;
  /// Appends the encoding of request `seq` of kind `kind` to `out`. Sequence numbers increase
  /// by one per request on a connection.
  virtual void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) = 0;
  /// Parses at most one reply from the front of `in`. Must never read past `in`, never crash
  /// on any input, and never accept more than max_reply_bytes for one reply.
  virtual reply parse_reply(std::span<const std::byte> in) = 0;
  /// Appends bytes the protocol must send unasked after what it received (HTTP/2 SETTINGS and
  /// PING acknowledgements, WINDOW_UPDATE). Called after each receive when
  /// protocol::talks_unasked() says so.
  virtual void write_pending(std::vector<std::byte>& out) { (void)out; }
  /// --stream codecs: their stream; null for every other codec.
  virtual stream_control* stream() noexcept { return nullptr; }
};

/// Makes codecs for one target. Thread-safe: engine threads call new_connection().
class protocol {
 public:
  virtual ~protocol() = default;
  virtual std::unique_ptr<connection_codec> new_connection() const = 0;
  /// The default request kinds when no --mix is given.
  virtual std::vector<request_kind> default_kinds() const = 0;
  /// Whether its codecs have bytes to send that no request asked for (see write_pending).
  virtual bool talks_unasked() const { return false; }
};

/// ringrpc: the metadata every call carries, made of options.headers and bearer_token (see
/// there). Throws std::invalid_argument naming a bad pair (never showing its value).
std::vector<metadata_entry> ringrpc_call_metadata(const codec_options& options);

/// The protocol for `t`. Throws std::invalid_argument for an unknown scheme or bad options.
std::unique_ptr<protocol> make_protocol(const target& t, const codec_options& options);

}  // namespace ringrpc::load

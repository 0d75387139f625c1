#pragma once
/// \file The counters of a running server: one table, and the view server::stats() returns.
///
/// Every server counter is one line of RINGRPC_SERVER_COUNTERS below. That line is the whole
/// of the counter's definition: its name in server_stats (and in /status's "counters"), its
/// kind, the Prometheus family and label it has on /metrics, and its help texts. The enum
/// server_counter, the names server_stats::get() knows, the /metrics and /status pages and
/// the server's own aggregation are all made from it. Adding a counter is one line here plus
/// the code that increments it (src/server: a shard-owned counter is a slot of
/// shard::_counts, bumped on the owning thread; see src/server/README.md).
///
/// Compatibility (docs/compatibility.md): server_stats holds its values in a std::vector and
/// reads them through functions defined in libringrpc, so its size and layout do not change
/// when a counter is added. The enum is append-only: a counter is added at the END of the
/// list, never in the middle, never renumbered; a counter that stops meaning anything keeps its
/// slot (and reads 0). A program built against an older header reads the counters it knows; one
/// built against a newer header than the library it runs with reads 0 (and get() nullopt) for
/// counters that library does not have.

#include "ringrpc/cxx20.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/export.hpp"

// X(name, kind, metric, label_key, label_value, metric_help, help)
//   name         the counter's name: the server_counter enumerator and server_stats::get()'s key
//   kind         counter (only grows) or gauge (a level now)
//   metric       its family on /metrics; "" = only in server_stats and /status
//   label_key, label_value   the sample's label within that family; "" = none. Several
//                counters may share one family with different label values (rejected calls
//                by path); the family's HELP is the first non-empty metric_help among them
//   metric_help  the family's HELP text on /metrics (exact: dashboards and tests read it)
//   help         what the counter counts, for server_stats::entries(); "" = metric_help
// Append new counters at the end (see above).
#define RINGRPC_SERVER_COUNTERS(X)                                                                  \
  X(connections_accepted, counter, "ringrpc_connections_accepted_total", "", "",                   \
    "Connections accepted.", "")                                                                    \
  X(connections_open, gauge, "ringrpc_open_connections", "", "",                                    \
    "Connections open now [Hadoop: NumOpenConnections].", "")                                       \
  X(connections_refused, counter, "ringrpc_connections_refused_total", "reason", "max_connections", \
    "Connections closed at once: max_connections, or a per-address limit.",                         \
    "Connections closed at once: max_connections were open.")                                      \
  X(connections_refused_per_address, counter, "ringrpc_connections_refused_total", "reason",        \
    "per_address", "",                                                                              \
    "Connections closed at once: max_connections_per_address open from the address, or "          \
    "accept_rate_per_address exceeded.")                                                            \
  X(connections_idle_closed, counter, "ringrpc_connections_idle_closed_total", "", "",              \
    "Connections closed after idle_timeout.", "")                                                   \
  X(connections_dead_closed, counter, "ringrpc_connections_dead_closed_total", "", "",              \
    "Connections the liveness check closed: reset or ended, but their receive never completed.", "") \
  X(calls_received, counter, "ringrpc_rpc_calls_received_total", "", "",                            \
    "Requests and one-way messages read from clients [Hadoop: RpcQueueTimeNumOps counts the ones "  \
    "that ran].",                                                                                   \
    "Frames that became calls (requests and one-way messages).")                                   \
  X(calls_completed, counter, "ringrpc_rpc_replies_written_total", "", "",                          \
    "Answers written to clients (or dropped because the client had gone).", "")                     \
  X(calls_rejected_busy, counter, "ringrpc_rpc_calls_rejected_total", "path", "server_busy",        \
    "Calls answered at once without running, by path.",                                             \
    "Calls answered SERVER_BUSY at once: a pool or an inbox was full.")                            \
  X(calls_rejected_stopping, counter, "ringrpc_rpc_calls_rejected_total", "path", "shutting_down",  \
    "", "Calls answered SHUTTING_DOWN: the server is draining or the endpoint stopped.")            \
  X(calls_unknown, counter, "ringrpc_rpc_calls_rejected_total", "path", "unknown_method", "",       \
    "Calls answered UNKNOWN_METHOD: no such endpoint.")                                            \
  X(cancel_requests, counter, "ringrpc_rpc_cancel_requests_total", "", "",                          \
    "Cancel frames received.", "")                                                                  \
  X(bad_frames, counter, "ringrpc_rpc_calls_rejected_total", "path", "bad_frame", "",               \
    "Frames that failed verification or limits.")                                                   \
  X(partial_writes, counter, "ringrpc_partial_writes_total", "", "",                                \
    "Writes the kernel took in part; the rest was requeued at the head.", "")                       \
  X(reads_paused, counter, "ringrpc_reads_paused_total", "", "",                                    \
    "Times a connection stopped being read for back-pressure.", "")                                 \
  X(bytes_in, counter, "ringrpc_received_bytes_total", "", "",                                      \
    "Bytes read from clients [Hadoop: ReceivedBytes].", "")                                         \
  X(bytes_out, counter, "ringrpc_sent_bytes_total", "", "",                                         \
    "Bytes written to clients [Hadoop: SentBytes].", "")                                            \
  X(event_loop_stalls, counter, "ringrpc_event_loop_stalls_total", "", "",                          \
    "Reader loop turns that held their thread over 10 ms.", "")                                     \
  X(buffered_bytes, gauge, "ringrpc_buffered_bytes", "", "",                                        \
    "Bytes held for peers: partial frames, admitted requests, unwritten replies.", "")              \
  X(buffered_bytes_peak, gauge, "ringrpc_buffered_bytes_peak", "", "",                              \
    "The most bytes held for peers at once since start.", "")                                       \
  X(buffered_bytes_limit, gauge, "ringrpc_buffered_bytes_limit", "", "",                            \
    "max_buffered_bytes: the server-wide memory budget.", "")                                       \
  X(budget_pauses, counter, "ringrpc_budget_pauses_total", "", "",                                  \
    "Connections that stopped being read because the memory budget was exhausted.", "")             \
  X(calls_rejected_memory, counter, "ringrpc_calls_rejected_memory_total", "", "",                  \
    "Calls answered SERVER_BUSY because the memory budget was exhausted.", "")                      \
  X(connections_write_stalled, counter, "ringrpc_connections_shed_total", "reason", "write_stall",  \
    "Connections closed because their peer stalled.",                                               \
    "Connections shed: replies waited while the peer read nothing.")                               \
  X(connections_frame_stalled, counter, "ringrpc_connections_shed_total", "reason", "frame_stall",  \
    "", "Connections shed: a partial frame got no further byte.")                                  \
  X(out_of_memory, counter, "ringrpc_out_of_memory_total", "", "",                                  \
    "Allocations that failed; one call or connection failed instead of the server.", "")            \
  X(calls_bad_metadata, counter, "ringrpc_rpc_calls_rejected_total", "path", "bad_metadata", "",    \
    "Calls answered BAD_REQUEST: metadata over the caps or malformed.")                            \
  X(calls_unauthenticated, counter, "ringrpc_rpc_calls_rejected_total", "path", "unauthenticated",  \
    "", "Calls answered UNAUTHENTICATED: no accepted token or identity.")                          \
  X(calls_permission_denied, counter, "ringrpc_rpc_calls_rejected_total", "path",                   \
    "permission_denied", "", "Calls answered PERMISSION_DENIED: an authorizer refused.")           \
  X(calls_auth_limited, counter, "ringrpc_auth_limited_total", "", "",                              \
    "Calls refused UNAUTHENTICATED without a look at their token: their address had used up its "   \
    "failed-authentication budget (auth failure_burst).",                                           \
    "Calls answered UNAUTHENTICATED without a look at the token: the address had used up "         \
    "auth_failures.burst (also counted in calls_unauthenticated).")                                \
  X(connections_auth_closed, counter, "ringrpc_connections_auth_closed_total", "", "",               \
    "Connections closed after auth failures_per_connection failed or refused tokens.", "")          \
  X(tls_handshakes, counter, "ringrpc_tls_handshakes_total", "", "",                                \
    "TLS handshakes completed.", "")                                                                \
  X(tls_handshake_failures, counter, "ringrpc_tls_handshake_failures_total", "", "",                \
    "TLS handshakes refused or garbled (connection closed).", "")                                   \
  X(tls_handshake_timeouts, counter, "ringrpc_tls_handshake_timeouts_total", "", "",                \
    "TLS connections closed: no handshake within tls_handshake_timeout.", "")                       \
  X(tls_handshakes_refused, counter, "ringrpc_tls_handshakes_refused_total", "reason",              \
    "max_handshakes",                                                                               \
    "TLS connections closed at once: max_tls_handshakes, or the per-address share, under way.",    \
    "TLS connections closed at once: max_tls_handshakes were under way.")                          \
  X(tls_handshakes_refused_per_address, counter, "ringrpc_tls_handshakes_refused_total", "reason",  \
    "per_address", "",                                                                              \
    "TLS connections closed at once: max_tls_handshakes_per_address were under way from the "      \
    "same address.")                                                                                \
  X(tls_handshakes_silent_closed, counter, "ringrpc_tls_handshakes_silent_closed_total", "", "",    \
    "TLS handshakes closed: the peer sent nothing for tls_handshake_silence_timeout while slots "    \
    "were scarce.",                                                                                 \
    "")                                                                                             \
  X(tls_handshakes_in_progress, gauge, "", "", "", "", "TLS handshakes under way now.")              \
  X(streams_opened, counter, "ringrpc_streams_opened_total", "", "",                                \
    "Streams opened (accepted by their method's pool).", "")                                                 \
  X(streams_open, gauge, "ringrpc_open_streams", "", "", "Streams open now.", "")                   \
  X(streams_refused_per_connection, counter, "ringrpc_streams_refused_total", "reason",             \
    "per_connection",                                                                               \
    "Stream opens answered SERVER_BUSY at a stream cap, by cap (also counted as server_busy "       \
    "calls rejected).",                                                                             \
    "Stream opens answered SERVER_BUSY: the connection had max_streams_per_connection (or "         \
    "max_inflight_per_connection - 1) open.")                                                       \
  X(streams_refused_per_address, counter, "ringrpc_streams_refused_total", "reason", "per_address", \
    "", "Stream opens answered SERVER_BUSY: max_streams_per_address were open from the address.")   \
  X(streams_refused_server, counter, "ringrpc_streams_refused_total", "reason", "max_streams", "",  \
    "Stream opens answered SERVER_BUSY: max_streams were open in the server.")                      \
  X(stream_messages_received, counter, "ringrpc_stream_messages_total", "direction", "received",    \
    "Stream messages, by direction.", "Stream messages read from clients.")                         \
  X(stream_messages_sent, counter, "ringrpc_stream_messages_total", "direction", "sent", "",        \
    "Stream messages written to clients (or dropped because the client had gone).")                 \
  X(stream_writes_blocked_credit, counter, "ringrpc_stream_writes_blocked_total", "reason", "credit", \
    "Stream writes answered would_block (flow-control stalls), by what held them.",                 \
    "Stream writes answered would_block: the client had granted no credit.")                        \
  X(stream_writes_blocked_buffer, counter, "ringrpc_stream_writes_blocked_total", "reason", "buffer", \
    "", "Stream writes answered would_block: the connection's unwritten stream messages were at "   \
    "max_queued_reply_bytes.")                                                                      \
  X(shard_stalls, counter, "", "", "", "",                                                          \
    "Stretches of user code that held a shard's thread over 10 ms: a direct handler, a coroutine "  \
    "step on its shard (per method on /metrics: ringrpc_shard_stalls_total).")                       \
  X(downstream_calls_ok, counter, "ringrpc_downstream_calls_total", "result", "ok",                 \
    "Calls on-shard handlers made to the server's downstreams (ringrpc/downstream.hpp), by result.", \
    "Downstream calls answered with a reply.")                                                       \
  X(downstream_calls_error, counter, "ringrpc_downstream_calls_total", "result", "error", "",       \
    "Downstream calls answered with an error status by the downstream.")                             \
  X(downstream_calls_failed, counter, "ringrpc_downstream_calls_total", "result", "failed", "",     \
    "Downstream calls sent (or queued to be) that failed here: timed out, cancelled, their "         \
    "connection lost or refused, a protocol error, the server stopping.")                            \
  X(downstream_calls_refused, counter, "ringrpc_downstream_calls_total", "result", "refused", "",   \
    "Downstream calls refused at once, unsent: the target down (backoff), a bound reached "          \
    "(client_busy), a deadline passed or a cancellation before the call, the server stopping.")     \
  X(downstream_connects_ok, counter, "ringrpc_downstream_connects_total", "result", "ok",           \
    "Connections shards opened to the server's downstreams, by result.", "")                         \
  X(downstream_connects_failed, counter, "ringrpc_downstream_connects_total", "result", "failed",   \
    "", "Connects to a downstream that failed (refused, unreachable, timed out): each starts a "     \
    "backoff.")                                                                                      \
  X(grpc_connections, counter, "ringrpc_grpc_connections_total", "", "",                            \
    "Connections to the plaintext port that spoke HTTP/2 (gRPC) instead of ringrpc frames.", "")     \
  X(grpc_calls_refused, counter, "ringrpc_grpc_calls_refused_total", "", "",                        \
    "gRPC calls answered by the HTTP/2 layer itself, unrun: a path naming no method, compression, " \
    "a malformed grpc-timeout or message, headers or a message over their caps.", "")               \
  X(grpc_cancels, counter, "ringrpc_grpc_cancels_total", "", "",                                    \
    "RST_STREAM from gRPC clients that cancelled a call the server was running.", "")               \
  X(grpc_health_checks, counter, "ringrpc_grpc_health_checks_total", "", "",                        \
    "grpc.health.v1.Health/Check calls answered.", "")                                              \
  X(grpc_protocol_errors, counter, "ringrpc_grpc_connections_closed_total", "reason", "protocol",   \
    "gRPC connections closed with GOAWAY by the server, by reason.",                                \
    "HTTP/2 protocol errors and floods (RST_STREAM, CONTINUATION, SETTINGS, acknowledgements), "     \
    "a client's window holding back too many replies.")                                             \
  X(grpc_too_many_pings, counter, "ringrpc_grpc_connections_closed_total", "reason",                \
    "too_many_pings", "", "Clients that pinged more often than gRPC's ping policy allows.")

RINGRPC_API_BEGIN

namespace ringrpc {

/// One per line of RINGRPC_SERVER_COUNTERS, in that order. The values are fixed once
/// released (the list is append-only): a program may store them.
enum class server_counter : std::uint16_t {
#define RINGRPC_COUNTER_ENUMERATOR(name, ...) name,
  RINGRPC_SERVER_COUNTERS(RINGRPC_COUNTER_ENUMERATOR)
#undef RINGRPC_COUNTER_ENUMERATOR
};

/// The counters this header knows. The library a program runs with may know more (a newer one):
/// server_counters().size() and server_stats::size() tell at run time.
inline constexpr std::size_t server_counter_count = 0
#define RINGRPC_COUNTER_ONE(...) +1
    RINGRPC_SERVER_COUNTERS(RINGRPC_COUNTER_ONE)
#undef RINGRPC_COUNTER_ONE
    ;

enum class counter_kind : std::uint8_t {
  counter,  ///< only grows while the server lives (a rate is its difference over time)
  gauge,    ///< a level now: goes up and down
};

/// One line of the table, as the library has it.
struct server_counter_info {
  server_counter id;
  counter_kind kind;
  std::string_view name;         ///< e.g. "calls_received"
  std::string_view help;         ///< what it counts (one sentence)
  std::string_view metric;       ///< its /metrics family, or "" when it has none
  std::string_view label_key;    ///< its label in that family, or ""
  std::string_view label_value;
  std::string_view metric_help;  ///< the family's HELP, or "" when another member gives it
};

/// Every counter the library knows, in enum order (entry i has id i). Static storage.
std::span<const server_counter_info> server_counters() noexcept;

/// Counters of a running server, merged from the per-thread counters when server::stats() is
/// called (a copy: it does not change afterwards). Cheap to copy around; reading it by enum is
/// an index into a vector.
///
///   const ringrpc::server_stats st = server.stats();
///   std::uint64_t n = st[ringrpc::server_counter::calls_received];
///   if (auto v = st.get("bytes_in")) ...;             // by name, e.g. from a command line
///   for (const auto& e : st.entries()) print(e.info.name, e.value, e.info.help);
class server_stats {
 public:
  /// Every counter reads 0.
  server_stats() = default;
  /// Values indexed by server_counter (what server::stats() builds); missing ones read 0.
  explicit server_stats(std::vector<std::uint64_t> values) noexcept : _values(std::move(values)) {}

  /// The counter's value; 0 for one this object does not hold (a library older than the header).
  std::uint64_t operator[](server_counter c) const noexcept;
  /// The value of the counter named `name` ("calls_received"), or nullopt for no such counter.
  std::optional<std::uint64_t> get(std::string_view name) const noexcept;
  /// How many counters this object holds: those of the library that made it.
  std::size_t size() const noexcept { return _values.size(); }

  struct entry {
    const server_counter_info& info;
    std::uint64_t value;
  };
  /// Every counter held, in enum order, with its name, help and kind: for tools that print
  /// or export all of them without naming each.
  std::vector<entry> entries() const;

 private:
  std::vector<std::uint64_t> _values;  // by server_counter; the only member (see the file comment)
};

}  // namespace ringrpc

RINGRPC_API_END

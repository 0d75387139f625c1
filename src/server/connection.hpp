#pragma once
// One accepted client connection, shared by its reader, the handlers and the responder.

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/address_streams.hpp"
#include "server/call.hpp"
#include "ringrpc/peer_identity.hpp"
#include "server/caller_shares.hpp"
#include "base/peer_address.hpp"
#include "server/stream_table.hpp"
#include "server/tls_link.hpp"
#include "server/write_slots.hpp"
#include "wire/frame_assembler.hpp"

namespace ringrpc::detail {

class shard;
class stream_state;

/// Why the reader closed a connection itself (the sweep's timeouts); `peer`: it did not.
enum class close_cause : std::uint8_t {
  peer, idle, write_stalled, frame_stalled, handshake_timeout, handshake_silent
};

/// The reason as events and logs give it; null for `peer`.
inline const char* describe(close_cause c) noexcept {
  switch (c) {
    case close_cause::idle: return "idle";
    case close_cause::write_stalled: return "write stalled: the peer read nothing while replies waited";
    case close_cause::frame_stalled: return "frame stalled: part of a frame and no further byte";
    case close_cause::handshake_timeout: return "TLS handshake timed out";
    case close_cause::handshake_silent: return "TLS handshake silent while handshake slots were scarce";
    case close_cause::peer: break;
  }
  return nullptr;
}


/// What a plaintext connection's bytes are: ringrpc frames, or HTTP/2 carrying gRPC (then they
/// pass through a session in rare->tls, as a TLS connection's do). Decided by its first bytes.
enum class wire_protocol : std::uint8_t {
  frames,
  sniffing,  // the first bytes so far are a prefix of HTTP/2's client preface (shard_grpc.cpp)
  grpc,
};

/// Where the shard is with a connection's incoming bytes; it only moves forward.
enum class read_state : std::uint8_t {
  open,        // frames are read and run
  peer_ended,  // nothing more will arrive (end of stream); frames already received still run
  closing,     // no further frame is accepted; it finishes once its receive has ended
  finished,    // the shard has let go of it; only the release of its last reference is pending
};

/// The connection's multishot receive.
enum class recv_state : std::uint8_t {
  idle,        // none armed (ended, or not armed yet)
  armed,       // armed in the ring
  cancelling,  // armed, and an ASYNC_CANCEL for it was sent
};

/// Lifetime: reference counted. The reader holds one reference from hand-off until it has seen
/// the final completion of the connection's receive; its outstanding calls hold one between
/// them (retain_for_call); a pending resume holds one; connection-event calls hold one each. Whoever drops the last reference closes the socket and frees the object,
/// so the fd is never reused while any request of ours could still name it.
///
/// Fields are grouped by the thread that owns them; only the atomics are shared. Every idle
/// connection costs this struct (bench/idle_connections.py), so fields are ordered to pack:
/// keep sizeof(connection) at 216 or below (static_assert at the end), which malloc serves
/// from 224-byte chunks.
struct connection {
  connection(int fd_, shard* owner_, std::uint32_t max_frame) noexcept
      : fd(fd_), owner(owner_), assembler(max_frame) {}
  ~connection();  // closes the socket and tells the owning reader (connection.cpp)
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // --- shared
  const int fd;
  /// The fair-share counters of this connection's caller: its own (`own_share`), or those of
  /// every connection from its address (fair_share_by = address; `share` then points into
  /// the server's caller_shares and is released with the connection).
  caller_share own_share;
  std::atomic<std::uint32_t> refs{1};
  shard* const owner;
  /// Calls accepted and not yet released. Written by the shard's thread only (its reader
  /// creates calls, its responder releases them), so a plain load and store; atomic because
  /// /connections reads it. Together these calls hold one reference (see retain_for_call).
  std::atomic<std::uint32_t> outstanding{0};
  std::atomic<std::uint16_t> cancel_count{0};  // ids in the cancel set (see is_cancelled), <= 256
  /// The recent handler time per call of this connection's calls (caller_shares.hpp,
  /// next_recent_cost): written by the workers that run them (sampled), read by the reader
  /// as it admits calls and by the pool workers its queued calls wait in (cost_hint).
  std::atomic<std::uint16_t> recent_cost{0};
  std::atomic<bool> backlogged{false};        // responder: too many reply bytes queued
  std::atomic<bool> paused{false};            // reader stopped reading for back-pressure
  std::atomic<bool> write_failed{false};      // responder: the peer cannot take replies
  std::atomic<bool> gone{false};  // reader: EOF, reset or closed; running handlers may give up
  /// Responder: reply bytes not yet written, for /connections and the idle check (which only
  /// asks "any?"); saturates at 4 GiB - 1. The responder's own accounting uses the exact count.
  std::atomic<std::uint32_t> queued_bytes{0};
  std::uint64_t id = 0;           // set at hand-off, before anyone else sees the connection
  std::int64_t accepted_ns = 0;   // likewise (steady clock)
  std::atomic<std::int64_t> last_write_ns{0};   // responder: last write completion
  /// Request bytes of calls accepted and not yet released (the shard's thread alone writes it).
  std::atomic<std::size_t> request_bytes{0};
  caller_share* share = &own_share;

  /// "address:port" of the peer (formatted now: for events and pages, not the call path).
  std::string peer() const { return address.text(); }

  /// Cancel frames name calls by id; the set stays tiny (ids leave it when their call is
  /// released), so handlers polling cancelled() pay one relaxed load while nobody cancels.
  bool is_cancelled(std::uint64_t call_id) noexcept {
    if (gone.load(std::memory_order_relaxed) || write_failed.load(std::memory_order_relaxed)) {
      return true;
    }
    if (cancel_count.load(std::memory_order_acquire) == 0) return false;
    connection_rare* r = rare.load(std::memory_order_acquire);
    std::lock_guard lock(r->cancel_mu);
    return std::find(r->cancelled_ids.begin(), r->cancelled_ids.end(), call_id) != r->cancelled_ids.end();
  }
  /// Reader thread. Throws std::bad_alloc (the cancel is then not recorded).
  void note_cancel(std::uint64_t call_id) {
    connection_rare& r = rare_part();
    std::lock_guard lock(r.cancel_mu);
    // A cancel for a call that already finished would linger; keep the set bounded.
    if (r.cancelled_ids.size() >= max_cancelled_ids) r.cancelled_ids.erase(r.cancelled_ids.begin());
    r.cancelled_ids.push_back(call_id);
    cancel_count.store(static_cast<std::uint16_t>(r.cancelled_ids.size()), std::memory_order_release);
  }
  void forget_cancel(std::uint64_t call_id) noexcept {
    if (cancel_count.load(std::memory_order_acquire) == 0) return;
    connection_rare* r = rare.load(std::memory_order_acquire);
    std::lock_guard lock(r->cancel_mu);
    std::erase(r->cancelled_ids, call_id);
    cancel_count.store(static_cast<std::uint16_t>(r->cancelled_ids.size()), std::memory_order_release);
  }

  /// Reader thread: why the connection failed ("" if it did not).
  std::string_view failure() const noexcept {
    const connection_rare* r = rare.load(std::memory_order_relaxed);
    return r != nullptr ? std::string_view(r->failure) : std::string_view();
  }
  /// Reader thread: records the first reason the connection failed (later ones are dropped;
  /// so is this one if there is no memory left to keep it).
  void note_failure(std::string_view why) noexcept {
    try {
      connection_rare& r = rare_part();
      if (r.failure.empty()) r.failure = why;
    } catch (const std::bad_alloc&) {
    }
  }

  static constexpr std::size_t max_cancelled_ids = 256;
  /// What few connections ever need (a cancel, a failure), allocated on first use by the
  /// reader thread and freed with the connection: an idle connection does not carry a mutex,
  /// a vector and a string.
  struct connection_rare {
    std::mutex cancel_mu;
    std::vector<std::uint64_t> cancelled_ids;
    std::string failure;
    /// Reader thread: who the peer proved to be (TLS, after the handshake); null = nobody.
    /// Calls point at it (call::peer) for their life, so a replaced identity is retired, not
    /// freed, until the connection goes.
    std::shared_ptr<const peer_identity> identity;  // written under identity_mu
    std::mutex identity_mu;  // other threads copying `identity` (connection events)
    std::vector<std::shared_ptr<const peer_identity>> retired_identities;
    /// Reader thread: the connection's identity plus an accepted token's subject, one per
    /// subject seen on this connection (bounded by the configured tokens' subjects); calls
    /// carrying that token point at it.
    std::vector<std::shared_ptr<const peer_identity>> token_identities;
    /// Reader thread: tokens refused on this connection (server_options::auth_failures).
    std::uint32_t auth_failures = 0;
    /// The connection's session: TLS (the TLS listener's connections, shard_tls.cpp) and/or
    /// gRPC's HTTP/2 (shard_grpc.cpp); null for ringrpc frames in plaintext.
    std::unique_ptr<tls_link> tls;
    /// Reader thread: the connection's open streams (shard_streams.cpp), and the stray frames,
    /// credit violations and kind mismatches it sent (past a cap, it is closed).
    stream_table<stream_state> streams;
    std::uint32_t stream_protocol_errors = 0;
    bool keepalive_on = false;  // Reader thread: TCP keepalive set, at the first stream
    /// Reader thread: the streams open from this connection's address (max_streams_per_address),
    /// looked up at its first stream.
    std::shared_ptr<address_streams::count> streams_from_address;
    /// Bytes of stream messages handlers wrote that are not yet on the socket (added by the
    /// writer, any thread; taken off by the responder): past max_queued_reply_bytes, writes
    /// would block, so credit a peer grants without reading cannot make the server hold more.
    std::atomic<std::size_t> stream_out_bytes{0};
    /// Reader thread: the rapid-reset bucket (shard_streams.cpp): streams cancelled before the
    /// server wrote anything take a token; refilled with time.
    double reset_tokens = -1;  // < 0: not started (full)
    std::int64_t reset_refilled_ns = 0;
  };
  std::atomic<connection_rare*> rare{nullptr};
  connection_rare& rare_part() {
    connection_rare* r = rare.load(std::memory_order_relaxed);
    if (r == nullptr) {
      r = new connection_rare;
      rare.store(r, std::memory_order_release);
    }
    return *r;
  }

  /// Reader thread (the TLS layer, once its handshake has verified what the peer presented):
  /// publishes who the peer is, for the authorizer, call_context::peer() and later connection
  /// events. Calls already accepted keep the identity they were accepted with. Throws
  /// std::bad_alloc.
  void set_peer_identity(std::shared_ptr<const peer_identity> who) {
    connection_rare& r = rare_part();
    r.retired_identities.reserve(r.retired_identities.size() + r.token_identities.size() + 1);
    std::lock_guard lock(r.identity_mu);
    if (r.identity != nullptr) r.retired_identities.push_back(std::move(r.identity));
    r.identity = std::move(who);
    // Token identities copy the old one's certificate part: derive them afresh.
    for (auto& t : r.token_identities) r.retired_identities.push_back(std::move(t));
    r.token_identities.clear();
  }
  /// Reader thread: the identity calls are accepted with; null for plaintext.
  const peer_identity* identity() const noexcept {
    const connection_rare* r = rare.load(std::memory_order_relaxed);
    return r != nullptr ? r->identity.get() : nullptr;
  }
  /// Any thread: a copy of the identity as it is now (connection events).
  std::shared_ptr<const peer_identity> identity_shared() const {
    connection_rare* r = rare.load(std::memory_order_acquire);
    if (r == nullptr) return nullptr;
    std::lock_guard lock(r->identity_mu);
    return r->identity;
  }

  // --- reader thread
  frame_assembler assembler;
  connection* live_prev = nullptr;  // the reader's list of its connections
  connection* live_next = nullptr;
  connection* resume_next = nullptr;  // the reader's list of connections to resume this turn
  read_state reading = read_state::open;
  recv_state receive = recv_state::idle;
  bool half_closed = false;  // the peer ended its stream cleanly (FIN), not a reset
  bool budget_paused = false;  // not read while the server's memory budget is exhausted
  bool counted_per_address = false;  // admitted by peer_limits: released when it finishes
  bool liveness_checked = false;  // looked at once in this silence (shard::check_liveness)
  bool tls = false;  // accepted on the TLS listener: bytes pass through rare->tls (never changes)
  wire_protocol protocol = wire_protocol::frames;
  std::uint8_t preface_seen = 0;  // sniffing: bytes of the HTTP/2 preface matched so far
  close_cause closed_by = close_cause::peer;  // why the reader closed it, if it did
  peer_address address;  // set at hand-off, before anyone else sees it (here: it packs)
  /// Assembler capacity charged to the memory budget (a frame is at most 1 GiB: 32 bits hold
  /// it, and keep room for the shared word after it in this struct's 216 bytes).
  std::uint32_t assembler_charged = 0;
  /// Shared. Who may write to the socket (responder_inline.cpp). Low bits: the replies handlers
  /// handed to the responder and not yet written, plus one while the responder lends the
  /// connection a write slot (the replies of its own thread count through that one).
  /// inline_writer_bit: a handler's thread is writing its own reply. A handler writes only when
  /// it finds the gate at 0; the responder writes only while the bit is clear. So bytes of two
  /// replies never interleave, and a reply handed over earlier is never overtaken.
  std::atomic<std::uint32_t> reply_gate{0};
  std::int64_t last_read_ns = 0;  // reader turn in which bytes last arrived

  // --- responder (the reader's thread)
  write_slot* write = nullptr;  // lent by the responder while replies are queued
};
static_assert(sizeof(connection) <= 216, "an idle connection's memory: see bench/idle_connections.py");

/// Reader thread: the connection's bytes pass through a session (TLS, or gRPC's HTTP/2) in
/// rare->tls, in both directions.
inline bool linked(const connection* c) noexcept { return c->tls || c->protocol == wire_protocol::grpc; }

/// Responder: what /connections and the idle check read of the replies `c` has queued.
inline void note_queued(connection* c, std::size_t bytes) noexcept {
  c->queued_bytes.store(static_cast<std::uint32_t>(std::min<std::size_t>(bytes, UINT32_MAX)),
                        std::memory_order_relaxed);
}

/// Drops one reference; the last one closes and frees the connection.
inline void release(connection* c) noexcept {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c;
}

/// See connection::reply_gate.
inline constexpr std::uint32_t inline_writer_bit = 1u << 31;

inline void retain(connection* c) noexcept { c->refs.fetch_add(1, std::memory_order_relaxed); }

/// Shard thread: nothing more will arrive from the peer (a connection already closing stays so).
inline void note_peer_ended(connection* c) noexcept {
  if (c->reading == read_state::open) c->reading = read_state::peer_ended;
}
/// Shard thread: no further frame of `c` is accepted.
inline void note_closing(connection* c) noexcept {
  if (c->reading < read_state::closing) c->reading = read_state::closing;
}
inline bool is_closing(const connection* c) noexcept { return c->reading >= read_state::closing; }

/// Shard thread: one more call of `c` is outstanding. The calls of a connection hold one
/// reference between them, taken by the first and dropped by the last (responder::release_call),
/// so a connection with many calls in flight pays no locked instruction per call.
inline void retain_for_call(connection* c) noexcept {
  const std::uint32_t n = c->outstanding.load(std::memory_order_relaxed);
  c->outstanding.store(n + 1, std::memory_order_relaxed);
  if (n == 0) retain(c);
}

/// A paused gRPC connection keeps its receive: the client's WINDOW_UPDATEs, which let its
/// waiting replies out, come on it (its new calls are held as frames, as a paused
/// connection's are).
inline bool reads_while_paused(const connection* c) noexcept { return c->protocol == wire_protocol::grpc; }

/// Reading must pause while the connection has too many calls or request bytes in flight, or
/// too many reply bytes unwritten.
inline bool over_limits(const connection* c, unsigned max_inflight, std::size_t max_inflight_bytes) noexcept {
  // The shard's thread writes all three and is the only one to ask.
  return c->outstanding.load(std::memory_order_relaxed) >= max_inflight ||
         c->request_bytes.load(std::memory_order_relaxed) >= max_inflight_bytes ||
         c->backlogged.load(std::memory_order_relaxed);
}

}  // namespace ringrpc::detail

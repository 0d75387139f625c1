// gRPC on the plaintext port: a connection whose first 24 bytes are HTTP/2's client preface
// gets a gRPC session (src/grpc) between its socket and its frames, in rare->tls where a TLS
// connection keeps its record session; from there on its bytes take the TLS connections' path
// through the reader and the responder. Anything else is ringrpc frames, as before.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "grpc/grpc_over_tls.hpp"
#include "server/server_core.hpp"
#include "server/shard.hpp"
#include "server/stream_endpoint.hpp"

namespace ringrpc::detail {

namespace {

// HTTP/2's client connection preface (RFC 9113, 3.4). Read as a ringrpc length prefix, "PRI "
// is 541,676,112 bytes: more than the default max_frame_bytes but within what it may be set
// to, so the whole preface is compared, not its first four bytes.
constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::span<const std::byte> preface_bytes(std::size_t n) noexcept {
  return {reinterpret_cast<const std::byte*>(preface.data()), n};
}

grpc::session_limits limits_of(const server_options& o) noexcept {
  grpc::session_limits l;
  l.max_concurrent_streams = o.max_inflight_per_connection;
  l.max_message_bytes = o.max_frame_bytes;
  l.max_request_bytes = o.max_inflight_bytes_per_connection;
  // The caller's metadata has its own cap (checked on the frame); gRPC's own headers need room.
  l.max_header_bytes = o.max_metadata_bytes + 8 * 1024;
  // Replies the peer's flow-control window holds back are request bytes' mirror image: the
  // same per-connection cap bounds them.
  l.max_held_reply_bytes = o.max_inflight_bytes_per_connection;
  return l;
}

}  // namespace

void shard::receive_unframed(connection* c, std::span<const std::byte> bytes) {
  if (is_closing(c)) return;  // a failed session is not fed again
  if (c->protocol == wire_protocol::sniffing) {
    const std::size_t seen = c->preface_seen;
    const std::size_t n = std::min(bytes.size(), preface.size() - seen);
    if (std::memcmp(bytes.data(), preface.data() + seen, n) != 0) {
      // Not HTTP/2: the bytes that matched so far, then these, are ringrpc frames.
      c->protocol = wire_protocol::frames;
      c->preface_seen = 0;
      if (seen > 0) deliver(c, preface_bytes(seen));
      deliver(c, bytes);
      return;
    }
    c->preface_seen = static_cast<std::uint8_t>(seen + n);
    if (c->preface_seen < preface.size()) return;  // a prefix: wait (the frame-stall timeout applies)
    c->preface_seen = 0;
    if (!start_grpc(c)) return;
    receive_through_link(c, preface_bytes(preface.size()));
    bytes = bytes.subspan(n);
    if (bytes.empty() || is_closing(c)) return;
  }
  receive_through_link(c, bytes);
}

bool shard::start_grpc(connection* c) noexcept {
  try {
    auto link = std::make_unique<tls_link>();
    link->handshaking = false;  // no handshake: a plaintext connection, announced at accept
    link->announced = true;
    link->encrypted = false;
    grpc::session_host& host = *this;  // a private base: converted here, not in make_unique
    auto s = std::make_unique<grpc::session>(limits_of(_core.options()), host);
    link->grpc = s.get();
    link->session = std::move(s);
    c->rare_part().tls = std::move(link);
  } catch (const std::bad_alloc&) {
    c->protocol = wire_protocol::frames;  // no session: nothing more is read
    out_of_memory(c, "out of memory starting an HTTP/2 session");
    return false;
  }
  c->protocol = wire_protocol::grpc;
  _counts[sc::grpc_connections].add();
  return true;
}

std::size_t shard::grpc_pending_cap() const noexcept {
  return _core.options().max_queued_reply_bytes + _core.options().max_inflight_bytes_per_connection;
}

// A TLS connection whose handshake chose ALPN h2: its TLS session goes inside a gRPC one, which
// also takes the plaintext this receive already produced (a client's first HTTP/2 bytes may
// come with its handshake's last flight). False: the connection failed.
bool shard::grpc_in_tls(connection* c, tls_link& t) noexcept {
  try {
    grpc::session_host& host = *this;  // a private base: converted here, not in make_unique
    auto inner = std::make_unique<grpc::session>(limits_of(_core.options()), host);
    grpc::session* g = inner.get();
    auto both = std::make_unique<grpc::over_tls>(std::move(t.session), std::move(inner));
    grpc::over_tls& layered = *both;
    t.session = std::move(both);
    t.grpc = g;
    c->protocol = wire_protocol::grpc;
    _counts[sc::grpc_connections].add();
    // The plaintext so far was HTTP/2, not frames: through the gRPC session, frames back.
    std::vector<std::byte> h2;
    h2.swap(_tls_plain);
    const auto r = layered.take_plaintext(h2, _tls_plain, t.pending);
    if (r == record_session::outcome::failed) {
      _responder.kick(c);
      tls_failed(c, t, t.session->error());
      return false;
    }
  } catch (const std::bad_alloc&) {
    out_of_memory(c, "out of memory starting an HTTP/2 session");
    return false;
  }
  return true;
}

// grpc.health.v1.Health/Check: the server serves until it starts to drain; a service is known
// when it is, or contains, or is contained in, a registered endpoint's name.
grpc::session_host::health shard::check_health(std::string_view service) noexcept {
  if (!service.empty()) {
    bool known = false;
    if (_table) {
      for (const auto& [name, slot] : _table->by_name) {
        const std::string_view n = name;
        const auto under = [](std::string_view a, std::string_view b) {
          return a.size() > b.size() && a.starts_with(b) && a[b.size()] == '.';
        };
        if (n == service || under(n, service) || under(service, n)) {
          known = true;
          break;
        }
      }
    }
    if (!known) return health::unknown_service;
  }
  return _core.leaving() || _quiesced ? health::not_serving : health::serving;
}

// Asked for every gRPC call before its frame exists; the frame's dispatch looks the same name
// up next. Both share the last lookup (one compare, as for a connection's frames), and the
// kind of the last endpoint asked about is kept with it.
std::uint8_t shard::method_kind(std::string_view method) noexcept {
  endpoint_slot* slot = _last_slot != nullptr && method == _last_method ? _last_slot : nullptr;
  if (slot == nullptr) {
    slot = _table ? _table->find(method) : nullptr;
    if (slot == nullptr) return 0;
    _last_slot = nullptr;
    try {
      _last_method.assign(method);
      _last_slot = slot;
    } catch (const std::bad_alloc&) {
      // Not kept: the next call looks its method up again.
    }
  }
  if (slot != _kind_slot) {
    const auto* ep = dynamic_cast<const stream_endpoint*>(&slot->target());
    _kind = ep != nullptr ? static_cast<std::uint8_t>(ep->kind()) : 0;
    _kind_slot = slot;
  }
  return _kind;
}

void shard::session_frames_waiting(connection* c) noexcept {
  tls_link& t = *c->rare.load(std::memory_order_relaxed)->tls;
  if (t.frames_waiting) return;
  try {
    _session_frames.push_back(c);
  } catch (const std::bad_alloc&) {
    // Not listed: the frames go with the connection's next receive (session::receive gives
    // them first), which a stream waiting on them may wait for until its deadline.
    _core.note_out_of_memory();
    return;
  }
  t.frames_waiting = true;
  retain(c);
}

void shard::deliver_session_frames() noexcept {
  // A connection listed again while this runs (its frames answered at once and sealed by a
  // write completing meanwhile) waits for the next turn, which the loop does not sleep before.
  std::vector<connection*> now;
  now.swap(_session_frames);
  for (connection* c : now) {
    tls_link& t = *c->rare.load(std::memory_order_relaxed)->tls;
    t.frames_waiting = false;
    if (!is_closing(c) && t.grpc != nullptr) {
      try {
        _tls_plain.clear();
        t.grpc->take_frames_for_server(_tls_plain);
        deliver(c, _tls_plain);
      } catch (const std::bad_alloc&) {
        out_of_memory(c, "out of memory delivering a gRPC session's frames");
      }
      charge_assembler(c);
      charge_tls(c, t);
    }
    release(c);
  }
  if (_session_frames.empty()) {
    now.clear();
    _session_frames.swap(now);  // keeps the capacity: no allocation per turn
  }
}

void shard::note(grpc::session_event e) noexcept {
  switch (e) {
    case grpc::session_event::refused: _counts[sc::grpc_calls_refused].add(); break;
    case grpc::session_event::cancelled: _counts[sc::grpc_cancels].add(); break;
    case grpc::session_event::health_check: _counts[sc::grpc_health_checks].add(); break;
    case grpc::session_event::protocol_error: _counts[sc::grpc_protocol_errors].add(); break;
    case grpc::session_event::too_many_pings: _counts[sc::grpc_too_many_pings].add(); break;
  }
}

}  // namespace ringrpc::detail

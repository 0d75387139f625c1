// A gRPC session's frame: the HTTP/2 connection (h2_server.hpp) and the record_session
// interface the server drives (grpc_session.hpp). HTTP/2 hands each request's headers and DATA
// to the request side (grpc_requests.cpp); seal() hands the server's frames to the response
// side (grpc_responses.cpp); the flood bounds HTTP/2 leaves to gRPC's policy (PING, SETTINGS,
// header lists) are here.
#include "grpc/grpc_session.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/clock.hpp"
#include "grpc/grpc_memory.hpp"
#include "grpc/grpc_session_state.hpp"

namespace ringrpc::detail::grpc {

namespace {

h2_limits h2_limits_of(const session_limits& l) noexcept {
  h2_limits h;
  h.max_concurrent_streams = l.max_concurrent_streams;
  h.max_header_list_bytes = static_cast<std::uint32_t>(std::min<std::size_t>(l.max_header_bytes, 0xffffffffu));
  return h;
}

}  // namespace

h2_stream& session::state::on_open(std::int32_t) {
  call_stream* st = new_stream();
  link(st);
  return *st;
}

void session::state::on_field(h2_stream& s, std::string_view name, std::string_view value, bool trailer) {
  auto& st = static_cast<call_stream&>(s);
  st.header_bytes += name.size() + value.size() + 32;  // RFC 7541's entry size
  if (st.header_bytes > limits.max_header_bytes) {
    // Trailers from a client count too; a peer that keeps sending them loses the connection.
    if (trailer && st.header_bytes > 2 * limits.max_header_bytes) {
      return fail_with(h2::e_enhance_your_calm, "HTTP/2: a request's trailers past twice the header-list cap", {},
                       session_event::protocol_error);
    }
    return refuse(st, code_resource_exhausted,
                  "request headers larger than " + std::to_string(limits.max_header_bytes) + " bytes", "431");
  }
  if (trailer || st.refused) return;
  take_header(st, name, value);
}

void session::state::on_headers(h2_stream& s) { headers_done(static_cast<call_stream&>(s)); }

void session::state::on_data(h2_stream& s, std::span<const std::byte> data) {
  take_data(static_cast<call_stream&>(s), data);
}

// A refused request is answered at its end too, its bytes dropped meanwhile: an answer before
// it (with RST_STREAM NO_ERROR to stop the rest) reads as INTERNAL to gRPC's clients.
void session::state::on_request_end(h2_stream& s) { request_done(static_cast<call_stream&>(s)); }

void session::state::on_sent(h2_stream& s, std::size_t n) {
  auto& st = static_cast<call_stream&>(s);
  st.taken += n;
  // Data going out forgives the client's PINGs: gRPC's clients measure the bandwidth with one
  // per burst of DATA they receive.
  wrote_since_ping = true;
  if (st.kind != 0) grant_taken(st);
}

void session::state::on_closed(h2_stream& s, bool) noexcept {
  auto& st = static_cast<call_stream&>(s);
  // The client reset a call or stream the server is running: it is cancelled there, as a
  // Cancel frame cancels it (its answer, when it comes, finds no stream and is dropped).
  try {
    if (cancel_on_server(st)) host.note(session_event::cancelled);
  } catch (const std::bad_alloc&) {
    // The call runs to its end; its reply is dropped.
  }
  drop_body(st);
  unlink_and_delete(&st);
}

// gRPC's servers' ping policy: pings are answered, but one that comes too soon after the last,
// while we have sent nothing, is a strike, and the third strike ends the connection. Our
// responses forgive (clients measure bandwidth with pings while they receive).
void session::state::on_ping() {
  const std::int64_t now = coarse_now_ns();
  if (wrote_since_ping) {
    ping_strikes = 0;
  } else if (last_ping_ns != 0 && now - last_ping_ns < limits.min_ping_interval_ns) {
    ++ping_strikes;
  }
  wrote_since_ping = false;
  last_ping_ns = now;
  if (ping_strikes > 2) {
    fail_with(h2::e_enhance_your_calm, "HTTP/2: too many pings", "too_many_pings", session_event::too_many_pings);
  }
}

// Each SETTINGS costs an acknowledgement: a token bucket bounds how many a peer may send.
void session::state::on_settings() {
  if (!settings_bucket.take(coarse_now_ns())) {
    fail_with(h2::e_enhance_your_calm, "HTTP/2: a SETTINGS flood", "too_many_settings", session_event::protocol_error);
  }
}

session::state::state(const session_limits& l, session_host& h)
    : limits(l),
      host(h),
      plain(&to_server),
      library{0, l.max_library_bytes},
      h2(*this, h2_limits_of(l), library),
      settings_bucket(l.settings_burst, l.settings_per_second) {}

session::state::~state() {
  // The connection goes with its streams: nothing is told of them.
  while (live != nullptr) unlink_and_delete(live);
}

void session::state::link(call_stream* st) noexcept {
  st->next = live;
  if (live != nullptr) live->prev = st;
  live = st;
  ++streams;
}

void session::state::unlink_and_delete(call_stream* st) noexcept {
  if (st->prev != nullptr) st->prev->next = st->next;
  else live = st->next;
  if (st->next != nullptr) st->next->prev = st->prev;
  --streams;
  recycle(st);
}

bool session::state::emit(const frame_view& v) {
  thread_local frame_encoder encoder;
  const auto bytes = encoder.encode(v);
  if (bytes.size() - frame_prefix_bytes > limits.max_message_bytes) return false;
  plain->insert(plain->end(), bytes.begin(), bytes.end());
  return true;
}

bool session::state::cancel_on_server(call_stream& st) {
  if (!st.delivered || st.answered) return false;
  frame_view v;
  v.call_id = static_cast<std::uint64_t>(st.id);
  v.kind = wire::Kind::Cancel;
  emit(v);
  return true;
}

void session::state::fail_with(std::uint32_t code, std::string why, std::string debug, session_event e) {
  if (h2.failed()) return;
  if (!closing_counted) host.note(e);
  closing_counted = true;
  h2.fail(code, std::move(why), debug);
}

session::session(const session_limits& limits, session_host& host) : _s(std::make_unique<state>(limits, host)) {}

session::~session() = default;

std::size_t session::held_bytes() const noexcept {
  return _s->library.bytes + _s->request_bytes + _s->h2.held_bytes() +
         _s->streams * (sizeof(call_stream) + 2 * kept_buffer_bytes) + _s->partial.capacity() +
         _s->aligned.capacity() + _s->to_server.capacity() + _s->known_bytes();
}

namespace {

// For the length of one of the session's calls: HTTP/2's bytes go to the caller's `out`, and
// frames for the server to `plain` (receive) or to the session's own list (the others).
class lend {
 public:
  lend(session::state& s, std::vector<std::byte>& out, std::vector<std::byte>* plain = nullptr) noexcept : _s(s) {
    _s.h2.set_output(&out);
    if (plain != nullptr) _s.plain = plain;
  }
  ~lend() {
    _s.h2.set_output(nullptr);
    _s.plain = &_s.to_server;
  }
  lend(const lend&) = delete;
  lend& operator=(const lend&) = delete;

 private:
  session::state& _s;
};

}  // namespace

// After a call into HTTP/2: the streams it closed are let go, and a connection it ended is
// counted (ours are counted where we decide them: fail_with).
record_session::outcome session::finish(bool out_of_memory) {
  if (out_of_memory) {
    _s->fail_with(h2::e_internal, "HTTP/2: out of memory", {}, session_event::protocol_error);
  } else {
    _s->h2.settle();
  }
  if (_s->h2.failed()) {
    if (!_s->closing_counted) {
      _s->closing_counted = true;
      _s->host.note(session_event::protocol_error);
    }
    if (_error.empty()) _error = _s->h2.error();
    return outcome::failed;
  }
  return outcome::ok;
}

record_session::outcome session::receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                                         std::vector<std::byte>& out) {
  // Frames for the server go straight to `plain` while this runs. Those a seal left for the
  // server come first: they were decided first.
  plain.insert(plain.end(), _s->to_server.begin(), _s->to_server.end());
  _s->to_server.clear();
  const lend guard(*_s, out, &plain);
  bool out_of_memory = false;
  try {
    _s->h2.receive(in);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  const outcome o = finish(out_of_memory);
  if (o == outcome::ok && _s->h2.done()) return outcome::closed;
  return o;
}

record_session::outcome session::seal(std::span<const std::byte> plain, std::vector<std::byte>& out) {
  const lend guard(*_s, out);
  bool out_of_memory = false;
  try {
    // Reply frames, whole or cut where the responder's batch ended: the cut part waits here.
    std::span<const std::byte> rest = plain;
    if (!_s->partial.empty()) {
      _s->partial.insert(_s->partial.end(), plain.begin(), plain.end());
      rest = _s->partial;
    }
    std::size_t used = 0;
    while (rest.size() - used >= frame_prefix_bytes && !_s->h2.failed()) {
      const std::size_t whole = frame_prefix_bytes + read_frame_length(rest.data() + used);
      if (rest.size() - used < whole) break;
      _s->take_reply_frame(rest.subspan(used, whole));
      used += whole;
    }
    if (!_s->partial.empty()) {
      _s->partial.erase(_s->partial.begin(), _s->partial.begin() + static_cast<std::ptrdiff_t>(used));
    } else {
      _s->partial.assign(rest.begin() + static_cast<std::ptrdiff_t>(used), rest.end());
    }
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  if (_s->aligned.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->aligned);
  // A big reply cut across seals grew it: keep what a few small frames need.
  if (_s->partial.empty() && _s->partial.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->partial);
  return finish(out_of_memory);
}

bool session::holds_partial_record() const noexcept {
  // A request still arriving, or part of a stream's message. Not while whole messages wait for
  // the server's credit: then the wait is the handler's, and the window we hold back may be
  // what keeps the rest of the message from coming. An HTTP/2 frame cut short counts too.
  if (_s->h2.holds_partial_frame()) return true;
  for (const call_stream* st = _s->live; st != nullptr; st = st->next) {
    if (st->answered) continue;
    const bool messages = st->kind == 2 || st->kind == 3;
    if (messages ? st->body.size() > st->body_whole && st->body_whole == st->body_head : !st->delivered) return true;
  }
  return false;
}

bool session::holding_back() const noexcept { return _s->h2.pending_bytes() >= _s->limits.max_held_reply_bytes; }

bool session::has_frames_for_server() const noexcept { return !_s->to_server.empty(); }

void session::take_frames_for_server(std::vector<std::byte>& plain) {
  plain.insert(plain.end(), _s->to_server.begin(), _s->to_server.end());
  _s->to_server.clear();
  if (_s->to_server.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->to_server);
}

record_session::outcome session::start(std::vector<std::byte>& out) {
  const lend guard(*_s, out);
  bool out_of_memory = false;
  try {
    _s->h2.start();
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  return finish(out_of_memory);
}

record_session::outcome session::close_notify(std::vector<std::byte>& out) {
  const lend guard(*_s, out);
  try {
    _s->h2.shut_down();
  } catch (const std::bad_alloc&) {
    return outcome::failed;
  }
  return outcome::ok;
}

}  // namespace ringrpc::detail::grpc

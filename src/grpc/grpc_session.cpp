// A gRPC session's frame: nghttp2 set up with our memory, options and callbacks, and the
// record_session interface the server drives (grpc_session.hpp). The callbacks hand each
// request's headers and DATA to the request side (grpc_requests.cpp); seal() hands the server's
// frames to the response side (grpc_responses.cpp); the flood bounds nghttp2 leaves to its user
// (PING, SETTINGS, header lists) are here.
#include "grpc/grpc_session.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "grpc/grpc_memory.hpp"
#include "grpc/grpc_session_state.hpp"

namespace ringrpc::detail::grpc {

namespace {

int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto& s = session::state::of(user);
  call_stream* st = nullptr;
  try {
    st = s.new_stream();
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  st->id = frame->hd.stream_id;
  s.link(st);
  nghttp2_session_set_stream_user_data(ng, st->id, st);
  return 0;
}

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
              const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
  auto& s = session::state::of(user);
  call_stream* st = s.find(frame->hd.stream_id);
  if (st == nullptr) return 0;
  st->header_bytes += namelen + valuelen + 32;  // RFC 7541's entry size
  try {
    if (st->header_bytes > s.limits.max_header_bytes) {
      // Trailers from a client count too; a peer that keeps sending them loses the connection.
      if (frame->headers.cat != NGHTTP2_HCAT_REQUEST && st->header_bytes > 2 * s.limits.max_header_bytes) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
      }
      s.refuse(*st, code_resource_exhausted,
               "request headers larger than " + std::to_string(s.limits.max_header_bytes) + " bytes", "431");
      return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST || st->refused) return 0;
    s.take_header(*st, {reinterpret_cast<const char*>(name), namelen},
                  {reinterpret_cast<const char*>(value), valuelen});
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;  // out of memory: this connection goes
  }
  return 0;
}

int on_data_chunk(nghttp2_session* ng, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                  void* user) {
  auto& s = session::state::of(user);
  // The connection's window goes back at once (each stream's own window paces it, below); the
  // streams' windows, when their bytes are taken (give_back_window).
  if (nghttp2_session_consume_connection(ng, len) == NGHTTP2_ERR_NOMEM) return NGHTTP2_ERR_CALLBACK_FAILURE;
  call_stream* st = s.find(id);
  try {
    if (st == nullptr) {
      if (nghttp2_session_consume_stream(ng, id, len) == NGHTTP2_ERR_NOMEM) return NGHTTP2_ERR_CALLBACK_FAILURE;
      return 0;
    }
    s.take_data(*st, {reinterpret_cast<const std::byte*>(data), len});
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& s = session::state::of(user);
  const bool ack = (frame->hd.flags & NGHTTP2_FLAG_ACK) != 0;
  try {
    // A flood stops here: the rest of what was received is not processed (nor acknowledged).
    if (frame->hd.type == NGHTTP2_PING && !ack) s.on_ping(steady_ns());
    if (frame->hd.type == NGHTTP2_SETTINGS && !ack) s.on_settings(steady_ns());
    if (!s.fatal.empty()) return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    call_stream* st = s.find(frame->hd.stream_id);
    if (st == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) s.headers_done(*st);
    // A refused request is answered at its end too, its bytes dropped meanwhile: an answer
    // before it (with RST_STREAM NO_ERROR to stop the rest) reads as INTERNAL to gRPC's clients.
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) s.request_done(*st);
  } catch (const std::bad_alloc&) {
    // Nothing may unwind through nghttp2: out of memory, the connection goes.
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

// A GOAWAY with an error that nghttp2 decided on itself (its RST_STREAM rate limit, a stream
// past the acknowledged concurrency, a protocol error it answers without failing the call
// into it) is counted here; ours are counted where we decide them.
int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type != NGHTTP2_GOAWAY || frame->goaway.error_code == NGHTTP2_NO_ERROR) return 0;
  auto& s = session::state::of(user);
  if (!s.closing_counted) {
    s.closing_counted = true;
    s.host.note(session_event::protocol_error);
  }
  return 0;
}

int on_stream_close(nghttp2_session* ng, std::int32_t id, std::uint32_t, void* user) {
  auto& s = session::state::of(user);
  call_stream* st = s.find(id);
  if (st == nullptr) return 0;
  nghttp2_session_set_stream_user_data(ng, id, nullptr);
  // The client reset a call or stream the server is running: it is cancelled there, as a
  // Cancel frame cancels it (its answer, when it comes, finds no stream and is dropped).
  try {
    if (s.cancel_on_server(*st)) s.host.note(session_event::cancelled);
  } catch (const std::bad_alloc&) {
    // The call runs to its end; its reply is dropped.
  }
  s.drop_body(*st);
  s.held_reply -= st->reply.size() - st->reply_sent;
  s.unlink_and_delete(st);
  return 0;
}


}  // namespace

// gRPC's servers' ping policy: pings are answered, but one that comes too soon after the last,
// while we have sent nothing, is a strike, and the third strike ends the connection. Our
// responses forgive (clients measure bandwidth with pings while they receive).
void session::state::on_ping(std::int64_t now) {
  if (wrote_since_ping) {
    ping_strikes = 0;
  } else if (last_ping_ns != 0 && now - last_ping_ns < limits.min_ping_interval_ns) {
    ++ping_strikes;
  }
  wrote_since_ping = false;
  last_ping_ns = now;
  if (ping_strikes > 2) {
    goaway_code = NGHTTP2_ENHANCE_YOUR_CALM;
    fail_with("HTTP/2: too many pings", "too_many_pings", session_event::too_many_pings);
  }
}

// Each SETTINGS costs an acknowledgement: a token bucket bounds how many a peer may send.
void session::state::on_settings(std::int64_t now) {
  if (settings_refilled_ns != 0) {
    const double refill = static_cast<double>(now - settings_refilled_ns) * 1e-9 * limits.settings_per_second;
    settings_tokens = std::min<double>(limits.settings_burst, settings_tokens + refill);
  }
  settings_refilled_ns = now;
  if (settings_tokens < 1) {
    goaway_code = NGHTTP2_ENHANCE_YOUR_CALM;
    fail_with("HTTP/2: a SETTINGS flood", "too_many_settings", session_event::protocol_error);
    return;
  }
  settings_tokens -= 1;
}


session::state::state(const session_limits& l, session_host& h)
    : limits(l), host(h), plain(&to_server), settings_tokens(l.settings_burst) {
  library.cap = l.max_library_bytes;
}

session::state::~state() {
  // nghttp2 frees its streams without calling on_stream_close: ours go here.
  if (ng != nullptr) nghttp2_session_del(ng);
  while (live != nullptr) unlink_and_delete(live);
}

void session::state::link(call_stream* st) noexcept {
  st->next = live;
  if (live != nullptr) live->prev = st;
  live = st;
  ++streams;
}

void session::state::unlink_and_delete(call_stream* st) noexcept {
  if (last_found == st) last_found = nullptr;
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

void session::state::fail_with(std::string why, std::string debug, session_event e) {
  if (!fatal.empty()) return;
  fatal = std::move(why);
  goaway_debug = std::move(debug);
  if (!closing_counted) host.note(e);
  closing_counted = true;
}

void session::state::submitted(call_stream& st, int rv) {
  if (rv == 0) return;
  if (rv == NGHTTP2_ERR_NOMEM) throw std::bad_alloc();
  // The stream is in no state to answer (a bug of ours, or a state nghttp2 knows better):
  // reset it rather than leave the client waiting for an answer that will not come, and end
  // the server's side of it.
  cancel_on_server(st);
  st.answered = true;
  if (nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR) == NGHTTP2_ERR_NOMEM) {
    throw std::bad_alloc();
  }
}

session::session(const session_limits& limits, session_host& host)
    : _s(std::make_unique<state>(limits, host)) {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    throw std::bad_alloc();
  }
  // Our encoder's HPACK table stays small; the decoder's is SETTINGS_HEADER_TABLE_SIZE's 4 KiB.
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  // Floods nghttp2 bounds itself, where the library has the bound (src/meson.build): stated
  // here with its defaults, so a change of theirs does not change ours unnoticed.
#ifdef RINGRPC_HAVE_NGHTTP2_STREAM_RESET_RATE_LIMIT
  nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);  // RST_STREAMs: a burst, then per second
#endif
#ifdef RINGRPC_HAVE_NGHTTP2_MAX_CONTINUATIONS
  nghttp2_option_set_max_continuations(opt, 8);  // CONTINUATIONs after one HEADERS
#endif
  // Each stream's window goes back as the server takes its bytes (give_back_window): a handler
  // that does not read holds its client back.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, 1000);  // acknowledgements queued and unsent
  nghttp2_option_set_max_settings(opt, 32);         // entries in one SETTINGS
  nghttp2_mem mem = counting_allocator(_s->library);
  const int rv = nghttp2_session_server_new3(&_s->ng, cb, _s.get(), opt, &mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) throw std::bad_alloc();
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(limits.max_header_bytes)},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (nghttp2_submit_settings(_s->ng, NGHTTP2_FLAG_NONE, settings, 3) != 0) throw std::bad_alloc();
}

session::~session() = default;

std::size_t session::held_bytes() const noexcept {
  return _s->library.bytes + _s->request_bytes + _s->held_reply +
         _s->streams * (sizeof(call_stream) + 2 * kept_buffer_bytes) +
         _s->partial.capacity() + _s->aligned.capacity() + _s->to_server.capacity();
}

namespace {

// Everything nghttp2 wants to send now, appended to `out`. False: the session failed.
bool drain(nghttp2_session* ng, std::vector<std::byte>& out, int& error) {
  for (;;) {
    const std::uint8_t* p = nullptr;
    const ssize_t n = nghttp2_session_mem_send(ng, &p);
    if (n < 0) {
      error = static_cast<int>(n);
      return false;
    }
    if (n == 0) return true;
    const auto* b = reinterpret_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  }
}

}  // namespace

record_session::outcome session::fail(std::vector<std::byte>& out) {
  if (_error.empty()) _error = _s->fatal;
  // GOAWAY says why, if nghttp2 can still say anything.
  const std::string& debug = _s->goaway_debug;
  nghttp2_submit_goaway(_s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(_s->ng), _s->goaway_code,
                        reinterpret_cast<const std::uint8_t*>(debug.data()), debug.size());
  int ignored = 0;
  try {
    (void)drain(_s->ng, out, ignored);
  } catch (const std::bad_alloc&) {
  }
  return outcome::failed;
}

record_session::outcome session::receive(std::span<const std::byte> in, std::vector<std::byte>& plain,
                                         std::vector<std::byte>& out) {
  // Frames for the server go straight to `plain` while this runs, the drain included (a stream
  // nghttp2 resets while sending closes there, and its running call must hear the Cancel).
  // Those a seal left for the server come first: they were decided first.
  struct unset {
    state& s;
    ~unset() { s.plain = &s.to_server; }
  } guard{*_s};
  plain.insert(plain.end(), _s->to_server.begin(), _s->to_server.end());
  _s->to_server.clear();
  _s->plain = &plain;
  const ssize_t rv =
      nghttp2_session_mem_recv(_s->ng, reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
  if (rv < 0) return library_failed(static_cast<int>(rv), out);
  if (!_s->fatal.empty()) return fail(out);
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  if (nghttp2_session_want_read(_s->ng) == 0 && nghttp2_session_want_write(_s->ng) == 0) return outcome::closed;
  return outcome::ok;
}

record_session::outcome session::seal(std::span<const std::byte> plain, std::vector<std::byte>& out) {
  // Reply frames, whole or cut where the responder's batch ended: the cut part waits here.
  std::span<const std::byte> rest = plain;
  if (!_s->partial.empty()) {
    _s->partial.insert(_s->partial.end(), plain.begin(), plain.end());
    rest = _s->partial;
  }
  std::size_t used = 0;
  while (rest.size() - used >= frame_prefix_bytes) {
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
  if (_s->aligned.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->aligned);
  // A big reply cut across seals grew it: keep what a few small frames need.
  if (_s->partial.empty() && _s->partial.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->partial);
  if (!_s->fatal.empty()) return fail(out);
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  return outcome::ok;
}

bool session::holds_partial_record() const noexcept {
  // A request still arriving, or part of a stream's message. Not while whole messages wait for
  // the server's credit: then the wait is the handler's, and the window we hold back may be
  // what keeps the rest of the message from coming.
  for (const call_stream* st = _s->live; st != nullptr; st = st->next) {
    if (st->answered) continue;
    const bool messages = st->kind == 2 || st->kind == 3;
    if (messages ? st->body.size() > st->body_whole && st->body_whole == st->body_head : !st->delivered) return true;
  }
  return false;
}

bool session::holding_back() const noexcept { return _s->held_reply >= _s->limits.max_held_reply_bytes; }

bool session::has_frames_for_server() const noexcept { return !_s->to_server.empty(); }

void session::take_frames_for_server(std::vector<std::byte>& plain) {
  plain.insert(plain.end(), _s->to_server.begin(), _s->to_server.end());
  _s->to_server.clear();
  if (_s->to_server.capacity() > 64 * 1024) std::vector<std::byte>().swap(_s->to_server);
}

record_session::outcome session::start(std::vector<std::byte>& out) {
  int error = 0;
  if (!drain(_s->ng, out, error)) return library_failed(error, out);
  return outcome::ok;
}

// nghttp2 found the peer at fault (a protocol error, a flood it bounds itself: RST_STREAM's
// rate, CONTINUATIONs, queued acknowledgements) or ran out of the memory we allow it.
record_session::outcome session::library_failed(int error, std::vector<std::byte>& out) {
  if (_s->fatal.empty()) {
    _s->goaway_code = error == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
                      : error == NGHTTP2_ERR_NOMEM ? NGHTTP2_INTERNAL_ERROR
                                                    : NGHTTP2_PROTOCOL_ERROR;
    _s->fail_with(std::string("HTTP/2: ") + nghttp2_strerror(error), {}, session_event::protocol_error);
  }
  return fail(out);
}

record_session::outcome session::close_notify(std::vector<std::byte>& out) {
  nghttp2_submit_goaway(_s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(_s->ng),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  int error = 0;
  return drain(_s->ng, out, error) ? outcome::ok : outcome::failed;
}

}  // namespace ringrpc::detail::grpc

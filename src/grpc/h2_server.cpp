// The server's side of an HTTP/2 connection (h2_server.hpp): frames in, stream states and
// windows kept; what the server sends is h2_send.cpp.
#include "grpc/h2_server.hpp"

#include "base/clock.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>

namespace ringrpc::detail::grpc {

using namespace h2;

namespace {

// RFC 9113 §8.2.1: a field name is a token in lower case (RFC 9110 §5.6.2's tchar without A-Z).
constexpr std::array<bool, 256> name_chars = [] {
  std::array<bool, 256> t{};
  for (char c = 'a'; c <= 'z'; ++c) t[static_cast<unsigned char>(c)] = true;
  for (char c = '0'; c <= '9'; ++c) t[static_cast<unsigned char>(c)] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool valid_name(std::string_view name) noexcept {
  std::size_t i = !name.empty() && name[0] == ':' ? 1 : 0;  // a pseudo-header's colon
  if (i == name.size()) return false;
  for (; i < name.size(); ++i) {
    if (!name_chars[static_cast<unsigned char>(name[i])]) return false;
  }
  return true;
}

// ... and a value has no NUL, CR or LF, and no white space at either end.
bool valid_value(std::string_view v) noexcept {
  if (!v.empty() && (v.front() == ' ' || v.front() == '\t' || v.back() == ' ' || v.back() == '\t')) return false;
  for (char c : v) {
    if (c == '\0' || c == '\r' || c == '\n') return false;
  }
  return true;
}

// RFC 9113 §8.2.2: fields of HTTP/1.1's connection management are malformed in HTTP/2.
bool connection_specific(std::string_view name) noexcept {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

std::uint8_t pseudo_bit(std::string_view name) noexcept {
  if (name == ":method") return 1;
  if (name == ":scheme") return 2;
  if (name == ":path") return 4;
  if (name == ":authority") return 8;
  return 0;
}
constexpr std::uint8_t required_pseudo = 1 | 2 | 4;

}  // namespace

h2_server::h2_server(h2_handler& handler, const h2_limits& limits, library_memory& memory)
    : _h(handler),
      _limits(limits),
      _mem(counting_allocator(memory)),
      _resets(limits.reset_burst, limits.resets_per_second),
      _empty_frames(limits.empty_frame_burst, limits.empty_frames_per_second) {
  // The decoder keeps a pointer to `_mem` (unlike nghttp2's session, which copies it).
  if (nghttp2_hd_inflate_new2(&_inflater, &_mem) != 0) throw std::bad_alloc();
}

h2_server::~h2_server() { nghttp2_hd_inflate_del(_inflater); }

void h2_server::start() {
  if (_started) return;
  _started = true;
  const std::pair<std::uint16_t, std::uint32_t> settings[] = {
      {s_max_concurrent_streams, _limits.max_concurrent_streams},
      {s_max_header_list_size, _limits.max_header_list_bytes},
      {s_no_rfc7540_priorities, 1},
  };
  std::byte* p = put_frame(out(), 6 * std::size(settings), t_settings, 0, 0);
  for (const auto& [id, value] : settings) {
    p[0] = std::byte(id >> 8);
    p[1] = std::byte(id);
    write32(p + 2, value);
    p += 6;
  }
}

void h2_server::receive(std::span<const std::byte> in) {
  if (failed()) return;
  start();  // the server's preface goes with its first answer, if start() was not called
  // Frames are taken from `in` where they lie whole; only a frame cut by the read waits here.
  std::span<const std::byte> data = in;
  const bool buffered = !_partial.empty();
  if (buffered) {
    _partial.insert(_partial.end(), in.begin(), in.end());
    data = _partial;
  }
  std::size_t used = 0;
  for (;;) {
    const std::span<const std::byte> rest = data.subspan(used);
    if (_phase == phase::preface) {
      const std::size_t n = std::min(rest.size(), client_preface.size());
      if (n != 0 && std::memcmp(rest.data(), client_preface.data(), n) != 0) {
        connection_error(e_protocol, "not the client preface");
        break;
      }
      if (n < client_preface.size()) break;
      used += n;
      _phase = phase::first_settings;
      continue;
    }
    if (rest.size() < frame_header_bytes) break;
    const std::uint32_t length = read24(rest.data());
    const auto type = static_cast<std::uint8_t>(rest[3]);
    const auto flags = static_cast<std::uint8_t>(rest[4]);
    const std::uint32_t id = read32(rest.data() + 5) & 0x7fffffffu;
    // Our SETTINGS_MAX_FRAME_SIZE is HTTP/2's default.
    if (length > default_max_frame) {
      connection_error(e_frame_size, "a frame larger than SETTINGS_MAX_FRAME_SIZE");
      break;
    }
    if (rest.size() < frame_header_bytes + length) break;
    if (_phase == phase::first_settings) {
      if (type != t_settings || (flags & f_ack) != 0) {
        connection_error(e_protocol, "the client's first frame is not SETTINGS");
        break;
      }
      _phase = phase::frames;
    }
    used += frame_header_bytes + length;
    if (!take_frame(type, flags, id, rest.subspan(frame_header_bytes, length))) break;
  }
  if (failed()) {
    std::vector<std::byte>().swap(_partial);
  } else if (buffered) {
    _partial.erase(_partial.begin(), _partial.begin() + static_cast<std::ptrdiff_t>(used));
  } else {
    _partial.assign(data.begin() + static_cast<std::ptrdiff_t>(used), data.end());
  }
  if (_partial.empty() && _partial.capacity() > 2 * default_max_frame) std::vector<std::byte>().swap(_partial);
}

bool h2_server::take_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p) {
  if (_in_block && type != t_continuation) return connection_error(e_protocol, "a header block cut by another frame");
  switch (type) {
    case t_data:
      return on_data(flags, id, p);
    case t_headers:
      return on_headers(flags, id, p);
    case t_continuation:
      return on_continuation(flags, id, p);
    case t_priority:
      // RFC 9113 §5.3.2: priorities are deprecated (our SETTINGS says so); the frame is checked
      // and let be.
      if (id == 0) return connection_error(e_protocol, "PRIORITY on stream 0");
      if (p.size() != 5) return connection_error(e_frame_size, "a PRIORITY frame not of 5 bytes");
      return true;
    case t_rst_stream:
      return on_rst_stream(id, p);
    case t_settings:
      return on_settings(flags, id, p);
    case t_push_promise:
      return connection_error(e_protocol, "PUSH_PROMISE from a client");
    case t_ping: {
      if (id != 0) return connection_error(e_protocol, "PING on a stream");
      if (p.size() != 8) return connection_error(e_frame_size, "a PING frame not of 8 bytes");
      if ((flags & f_ack) != 0) return true;
      _h.on_ping();
      if (failed()) return false;
      std::memcpy(put_frame(out(), 8, t_ping, f_ack, 0), p.data(), 8);
      return true;
    }
    case t_goaway:
      if (id != 0) return connection_error(e_protocol, "GOAWAY on a stream");
      if (p.size() < 8) return connection_error(e_frame_size, "a GOAWAY frame shorter than 8 bytes");
      _goaway_received = true;
      return true;
    case t_window_update:
      return on_window_update(id, p);
    default:
      return true;  // RFC 9113 §5.5: frames of unknown types are ignored
  }
}

// Strips a PADDED frame's padding: RFC 9113 §6.1.
bool h2_server::unpad(std::uint8_t flags, std::span<const std::byte>& p) {
  if ((flags & f_padded) == 0) return true;
  if (p.empty()) return connection_error(e_frame_size, "a PADDED frame without its pad length");
  const auto pad = static_cast<std::size_t>(p[0]);
  if (pad >= p.size()) return connection_error(e_protocol, "padding as long as the frame");
  p = p.subspan(1, p.size() - 1 - pad);
  return true;
}

bool h2_server::on_data(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p) {
  if (id == 0) return connection_error(e_protocol, "DATA on stream 0");
  const std::size_t flow = p.size();  // padding counts against the windows
  if (static_cast<std::int64_t>(flow) > _recv_window) return connection_error(e_flow_control, "DATA past the connection's window");
  // The connection's window goes back at once: each stream's own window paces the peer.
  _recv_window -= static_cast<std::int64_t>(flow);
  _recv_consumed += flow;
  if (_recv_consumed >= default_window / 2) {
    window_update(0, static_cast<std::uint32_t>(_recv_consumed));
    _recv_window += static_cast<std::int64_t>(_recv_consumed);
    _recv_consumed = 0;
  }
  if (!unpad(flags, p)) return false;
  // Frames that carry nothing and change nothing (CVE-2019-9518) are bounded like resets.
  if (p.empty() && (flags & f_end_stream) == 0 && !_empty_frames.take(coarse_now_ns())) {
    return connection_error(e_enhance_your_calm, "a flood of empty DATA frames");
  }
  h2_stream* s = find(static_cast<std::int32_t>(id));
  if (s == nullptr) {
    if (id > _highest_peer_stream) return connection_error(e_protocol, "DATA on a stream not opened");
    return true;  // a stream closed meanwhile (ended or reset): its bytes are no one's
  }
  if (s->remote_closed) return stream_error(*s, e_stream_closed);
  if (static_cast<std::int64_t>(flow) > s->recv_window) return stream_error(*s, e_flow_control);
  s->recv_window -= static_cast<std::int64_t>(flow);
  if (flow != p.size()) consume(*s, flow - p.size());  // the padding's window goes back now
  s->data_received += p.size();
  if (!p.empty()) _h.on_data(*s, p);
  if (failed()) return false;
  if (!s->closing && (flags & f_end_stream) != 0) end_remote(*s);
  return !failed();
}

bool h2_server::on_headers(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p) {
  if (id == 0) return connection_error(e_protocol, "HEADERS on stream 0");
  if ((id & 1) == 0) return connection_error(e_protocol, "HEADERS on a stream id of the server's (even)");
  const bool fresh_id = id > _highest_peer_stream;
  _highest_peer_stream = std::max(_highest_peer_stream, id);
  if (!unpad(flags, p)) return false;
  bool self_dependent = false;
  if ((flags & f_priority) != 0) {
    if (p.size() < 5) return connection_error(e_frame_size, "HEADERS too short for its priority");
    self_dependent = (read32(p.data()) & 0x7fffffffu) == id;
    p = p.subspan(5);
  }
  _in_block = true;
  _block_stream = id;
  _block_target = nullptr;
  _block_end_stream = (flags & f_end_stream) != 0;
  _block_trailers = false;
  _continuations = 0;
  if (h2_stream* s = find(static_cast<std::int32_t>(id)); s != nullptr) {
    // A second header block on a stream: the request's trailers.
    if (s->remote_closed) {
      stream_error(*s, e_stream_closed);
    } else {
      _block_target = s;
      _block_trailers = true;
      s->in_trailers = true;
    }
  } else if (!fresh_id || _goaway_sent) {
    // A stream closed meanwhile, or one past our GOAWAY: decoded only to keep HPACK's table in
    // step with the peer's.
  } else {
    _last_peer_stream = id;
    if (_streams.size() >= _limits.max_concurrent_streams) {
      // Before the peer has our SETTINGS it may not know the bound: the stream is refused (a
      // client may retry it). After, it is a protocol error (RFC 9113 §5.1.2).
      if (_settings_acked) return connection_error(e_protocol, "a stream past SETTINGS_MAX_CONCURRENT_STREAMS");
      if (!_resets.take(coarse_now_ns())) return connection_error(e_enhance_your_calm, "streams refused too fast");
      put_rst_stream(out(), id, e_refused_stream);
    } else {
      h2_stream& fresh = _h.on_open(static_cast<std::int32_t>(id));
      fresh.id = static_cast<std::int32_t>(id);
      fresh.send_window = _peer_initial_window;
      fresh.recv_window = default_window;
      fresh.malformed = self_dependent;
      _streams.push_back(&fresh);  // ids only grow: the table stays sorted
      _last_found = &fresh;
      _block_target = &fresh;
    }
  }
  const bool whole = (flags & f_end_headers) != 0;
  if (!take_block(p, true, whole)) return false;
  if (whole) end_block();
  return !failed();
}

bool h2_server::on_continuation(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p) {
  if (!_in_block || id != _block_stream) return connection_error(e_protocol, "CONTINUATION with no header block before it");
  if (++_continuations > _limits.max_continuations) {
    return connection_error(e_enhance_your_calm, "a CONTINUATION flood");
  }
  const bool whole = (flags & f_end_headers) != 0;
  if (p.empty() && !whole && !_empty_frames.take(coarse_now_ns())) {
    return connection_error(e_enhance_your_calm, "a flood of empty CONTINUATION frames");
  }
  if (!take_block(p, false, whole)) return false;
  if (whole) end_block();
  return !failed();
}

// A header block's fragment: a whole block sent before in the same bytes has its fields
// replayed (hpack_repeats.hpp); anything else goes through HPACK's decoder, and a whole block
// that leaves the decoder's table alone is kept for next time.
bool h2_server::take_block(std::span<const std::byte> fragment, bool first, bool final) {
  if (first && final) {
    if (const hpack_repeats::fields* kept = _repeats.find(fragment)) {
      ++_repeated_blocks;
      return replay_block(*kept);
    }
    _repeats.begin(fragment);
    const bool decoded = decode_block(fragment, final);
    _repeats.end(decoded);
    return decoded;
  }
  // A block in several frames is not kept, and may change the table.
  if (first) _repeats.forget();
  return decode_block(fragment, final);
}

// A kept block again. On a request's opening block (a fresh stream: §8.3's checks start from
// nothing, so they end where they ended the last time) what its fields meant is applied in one
// step once the handler has taken them one by one before; otherwise, and for trailers, each
// field is taken again.
bool h2_server::replay_block(const hpack_repeats::fields& kept) {
  h2_stream* const opening = _block_trailers || !to_target() ? nullptr : _block_target;
  known_block& known = _known[kept.slot];
  if (opening != nullptr && known.id == kept.id && _h.on_known_block(*opening, kept.id, kept.slot)) {
    opening->pseudo_seen = known.pseudo_seen;
    opening->regular_seen = known.regular_seen;
    opening->content_length = known.content_length;
    return true;
  }
  for (const hpack_repeats::field_at& f : kept.at) {
    if (!to_target()) break;
    take_field(*_block_target, kept.name(f), kept.value(f), true);
    if (failed()) return false;
  }
  if (opening != nullptr && to_target()) {
    known = {kept.id, opening->content_length, opening->pseudo_seen, opening->regular_seen};
    _h.remember_block(*opening, kept.id, kept.slot);
  }
  return true;
}

bool h2_server::to_target() const noexcept {
  return _block_target != nullptr && !_block_target->closing && !_block_target->malformed;
}

// A header block's fragment through HPACK's decoder; its fields go to the stream the block is
// for, if any (a refused or closed stream's are decoded and dropped).
bool h2_server::decode_block(std::span<const std::byte> fragment, bool final) {
  const auto* in = reinterpret_cast<const std::uint8_t*>(fragment.data());
  std::size_t left = fragment.size();
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t rv = nghttp2_hd_inflate_hd2(_inflater, &nv, &flags, in, left, final ? 1 : 0);
    if (rv < 0) {
      if (rv == NGHTTP2_ERR_NOMEM) return connection_error(e_internal, "out of memory decoding a header block");
      return connection_error(e_compression, "a header block that does not decode (HPACK)");
    }
    in += rv;
    left -= static_cast<std::size_t>(rv);
    if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
      const std::string_view name(reinterpret_cast<const char*>(nv.name), nv.namelen);
      const std::string_view value(reinterpret_cast<const char*>(nv.value), nv.valuelen);
      const bool valid = valid_name(name) && valid_value(value);
      _repeats.add(name, value, valid);
      if (to_target()) {
        take_field(*_block_target, name, value, valid);
        if (failed()) return false;
      }
    }
    if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
      nghttp2_hd_inflate_end_headers(_inflater);
      return true;
    }
    if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && (left == 0 || rv == 0)) {
      // The fragment is used up (the rest of the block comes in a CONTINUATION); at the
      // block's end the decoder must have said FINAL.
      if (final) return connection_error(e_compression, "a header block that ends inside a field (HPACK)");
      return true;
    }
  }
}

// RFC 9113 §8.2 and §8.3.1: what makes a request malformed (`valid`: the field's name and value
// passed §8.2's checks). A malformed request's stream is reset at the block's end (a stream
// error, not the connection's).
void h2_server::take_field(h2_stream& s, std::string_view name, std::string_view value, bool valid) {
  if (!valid) {
    s.malformed = true;
    return;
  }
  if (name[0] == ':') {
    const std::uint8_t bit = pseudo_bit(name);
    if (s.in_trailers || s.regular_seen || bit == 0 || (s.pseudo_seen & bit) != 0 || (bit == 4 && value.empty())) {
      s.malformed = true;
      return;
    }
    s.pseudo_seen |= bit;
  } else {
    s.regular_seen = true;
    if (connection_specific(name) || (name == "te" && value != "trailers")) {
      s.malformed = true;
      return;
    }
    if (name == "content-length") {
      std::uint64_t n = 0;
      bool ok = !value.empty() && value.size() <= 19;
      for (char c : value) {
        ok = ok && c >= '0' && c <= '9';
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (!ok || (s.content_length != ~std::uint64_t{0} && s.content_length != n)) {
        s.malformed = true;
        return;
      }
      s.content_length = n;
    }
  }
  _h.on_field(s, name, value, s.in_trailers);
}

void h2_server::end_block() {
  _in_block = false;
  h2_stream* s = _block_target;
  _block_target = nullptr;
  if (s == nullptr || s->closing) return;
  if (_block_trailers) {
    if (!_block_end_stream || s->malformed) {
      stream_error(*s, e_protocol);
      return;
    }
    end_remote(*s);
    return;
  }
  if (s->malformed || (s->pseudo_seen & required_pseudo) != required_pseudo) {
    stream_error(*s, e_protocol);
    return;
  }
  _h.on_headers(*s);
  if (!s->closing && !failed() && _block_end_stream) end_remote(*s);
}

void h2_server::end_remote(h2_stream& s) {
  if (s.content_length != ~std::uint64_t{0} && s.content_length != s.data_received) {
    stream_error(s, e_protocol);
    return;
  }
  s.remote_closed = true;
  _h.on_request_end(s);
  if (!s.closing && s.local_closed) close(s, false);
}

bool h2_server::on_settings(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p) {
  if (id != 0) return connection_error(e_protocol, "SETTINGS on a stream");
  if ((flags & f_ack) != 0) {
    if (!p.empty()) return connection_error(e_frame_size, "a SETTINGS acknowledgement with a payload");
    _settings_acked = true;
    return true;
  }
  if (p.size() % 6 != 0) return connection_error(e_frame_size, "a SETTINGS frame not a multiple of 6 bytes");
  if (p.size() / 6 > 32) return connection_error(e_enhance_your_calm, "a SETTINGS frame of over 32 entries");
  _h.on_settings();
  if (failed()) return false;
  bool window_grew = false;
  for (std::size_t at = 0; at < p.size(); at += 6) {
    const auto setting = static_cast<std::uint16_t>(static_cast<unsigned>(p[at]) << 8 | static_cast<unsigned>(p[at + 1]));
    const std::uint32_t v = read32(p.data() + at + 2);
    switch (setting) {
      case s_enable_push:
        if (v > 1) return connection_error(e_protocol, "SETTINGS_ENABLE_PUSH not 0 or 1");
        break;
      case s_initial_window_size: {
        if (v > max_window) return connection_error(e_flow_control, "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1");
        // RFC 9113 §6.9.2: every stream's window moves by the difference.
        const std::int64_t delta = static_cast<std::int64_t>(v) - _peer_initial_window;
        for (h2_stream* s : _streams) {
          s->send_window += delta;
          if (s->send_window > max_window) return connection_error(e_flow_control, "a stream's window over 2^31-1");
        }
        window_grew = window_grew || delta > 0;
        _peer_initial_window = v;
        break;
      }
      case s_header_table_size:
        // Our next header block tells its decoder if ours must shrink: to the smallest size
        // it allowed meanwhile, if it changed more than once (RFC 7541 §4.2).
        _peer_table_limit = v;
        _peer_table_least = std::min(_peer_table_least, v);
        break;
      case s_max_frame_size:
        if (v < default_max_frame || v > 0xffffffu) return connection_error(e_protocol, "SETTINGS_MAX_FRAME_SIZE out of range");
        _peer_max_frame = v;
        break;
      default:
        break;  // HEADER_TABLE_SIZE: our blocks use no dynamic table; the rest bind a client's sending
    }
  }
  put_frame(out(), 0, t_settings, f_ack, 0);
  if (window_grew) flush_blocked();
  return !failed();
}

bool h2_server::on_window_update(std::uint32_t id, std::span<const std::byte> p) {
  if (p.size() != 4) return connection_error(e_frame_size, "a WINDOW_UPDATE frame not of 4 bytes");
  const std::uint32_t increment = read32(p.data()) & 0x7fffffffu;
  if (id == 0) {
    if (increment == 0) return connection_error(e_protocol, "a connection WINDOW_UPDATE of 0");
    _send_window += increment;
    if (_send_window > max_window) return connection_error(e_flow_control, "the connection's window over 2^31-1");
    flush_blocked();
    return !failed();
  }
  h2_stream* s = find(static_cast<std::int32_t>(id));
  if (s == nullptr) {
    if (id > _highest_peer_stream) return connection_error(e_protocol, "WINDOW_UPDATE on a stream not opened");
    return true;
  }
  if (increment == 0) return stream_error(*s, e_protocol);
  s->send_window += increment;
  if (s->send_window > max_window) return stream_error(*s, e_flow_control);
  if (s->blocked) flush(*s);
  return !failed();
}

bool h2_server::on_rst_stream(std::uint32_t id, std::span<const std::byte> p) {
  if (id == 0) return connection_error(e_protocol, "RST_STREAM on stream 0");
  if (p.size() != 4) return connection_error(e_frame_size, "an RST_STREAM frame not of 4 bytes");
  // Rapid reset (CVE-2023-44487): a stream opened and reset at once costs the server its
  // set-up each time, with nothing left in flight to bound it.
  if (!_resets.take(coarse_now_ns())) return connection_error(e_enhance_your_calm, "an RST_STREAM flood (rapid reset)");
  h2_stream* s = find(static_cast<std::int32_t>(id));
  if (s == nullptr) {
    if (id > _highest_peer_stream) return connection_error(e_protocol, "RST_STREAM on a stream not opened");
    return true;
  }
  close(*s, true);
  return true;
}

void h2_server::fail(std::uint32_t code, std::string why, std::string_view debug) {
  if (failed()) return;
  _error = std::move(why);
  _in_block = false;
  write_goaway(code, debug);
}

void h2_server::shut_down(std::uint32_t code, std::string_view debug) {
  if (!_goaway_sent) write_goaway(code, debug);
}

void h2_server::write_goaway(std::uint32_t code, std::string_view debug) {
  std::byte* p = put_frame(out(), static_cast<std::uint32_t>(8 + debug.size()), t_goaway, 0, 0);
  write32(p, _last_peer_stream);
  write32(p + 4, code);
  if (!debug.empty()) std::memcpy(p + 8, debug.data(), debug.size());
  _goaway_sent = true;
}

bool h2_server::connection_error(std::uint32_t code, std::string why) {
  fail(code, "HTTP/2: " + why);
  return false;
}

// Resets the peer makes the server send (a malformed request, a window error: "MadeYouReset")
// cost what the peer's own cost, and draw on the same tokens.
bool h2_server::stream_error(h2_stream& s, std::uint32_t code) {
  if (!_resets.take(coarse_now_ns())) return connection_error(e_enhance_your_calm, "requests the server had to reset, too fast");
  reset(s, code);
  return !failed();
}

void h2_server::close(h2_stream& s, bool by_peer) noexcept {
  if (s.closing) return;
  const auto at = std::lower_bound(_streams.begin(), _streams.end(), s.id,
                                   [](const h2_stream* e, std::int32_t id) { return e->id < id; });
  if (at != _streams.end() && *at == &s) _streams.erase(at);
  if (_last_found == &s) _last_found = nullptr;
  if (s.blocked) unblock(s);
  _pending_bytes -= s.pending.size() - s.pending_sent + s.pending_trailers.size();
  s.closing = true;
  s.closed_by_reset = by_peer;
  s.closing_next = nullptr;
  if (_closing_tail != nullptr) _closing_tail->closing_next = &s;
  else _closing = &s;
  _closing_tail = &s;
}

void h2_server::settle() {
  while (_closing != nullptr) {
    h2_stream* s = _closing;
    _closing = s->closing_next;
    if (_closing == nullptr) _closing_tail = nullptr;
    _h.on_closed(*s, s->closed_by_reset);
  }
}

bool h2_server::done() const noexcept {
  return (_goaway_received || _goaway_sent) && _streams.empty() && _closing == nullptr;
}

h2_stream* h2_server::find(std::int32_t id) noexcept {
  if (_last_found != nullptr && _last_found->id == id) return _last_found;
  const auto at = std::lower_bound(_streams.begin(), _streams.end(), id,
                                   [](const h2_stream* e, std::int32_t v) { return e->id < v; });
  if (at == _streams.end() || (*at)->id != id) return nullptr;
  _last_found = *at;
  return *at;
}

}  // namespace ringrpc::detail::grpc

// The server's own side of HTTP/2 streams (h2_server.hpp): header blocks of literal fields,
// DATA as far as both windows allow (the rest held in the stream until WINDOW_UPDATEs free
// room), trailers behind it, resets and window updates. Written straight into the output the
// session lends.
#include "grpc/h2_server.hpp"

#include <algorithm>
#include <cstring>

namespace ringrpc::detail::grpc {

using namespace h2;

// The peer made its table smaller: the next block it reads says first what size ours now uses,
// the smallest it allowed since our last block (RFC 7541 §4.2, §6.3). The kept fields stay if
// they fit; if not, the table is emptied and every field goes as a literal from now on.
void h2_server::update_table_size(std::vector<std::byte>& block) {
  const bool due = table_update_due();
  const std::uint32_t least = _peer_table_least;
  _peer_table_least = _peer_table_limit;  // a new interval starts with this block
  if (!due) return;
  _table_max = least >= kept_fields_bytes ? least : 0;
  if (_table_max == 0) {
    _inserted = 0;
    std::fill(std::begin(_rank), std::end(_rank), std::uint8_t{0});
  }
  put_hpack_int(block, 0x20, 5, _table_max);
}

// `written_now`: the block goes out before any block encoded after it, so it may use the
// peer's dynamic table (the decoder reads blocks in the order they are written). A block held
// behind DATA does not: it could be overtaken.
void h2_server::encode_fields(std::span<const h2_field> fields, std::vector<std::byte>& block, bool written_now) {
  if (written_now) update_table_size(block);
  for (const h2_field& f : fields) {
    if (f.form == form_status_200 || (f.form == 0 && f.name == ":status" && f.value == "200")) {
      block.push_back(std::byte{hpack_status_200});
    } else if (written_now && put_kept(f.form >= form_kept ? std::size_t{f.form} - form_kept : kept_index(f), block)) {
      // Indexed, or inserted now.
    } else if (f.name == ":status") {
      put_indexed_name_field(block, hpack_name_status, f.value);
    } else if (f.name == "content-type") {
      put_indexed_name_field(block, hpack_name_content_type, f.value);
    } else {
      put_literal_field(block, f.name, f.value);
    }
  }
}

// Which of kept_fields `f` is, or kept_field_count: none.
std::size_t h2_server::kept_index(const h2_field& f) noexcept {
  std::size_t i = 0;
  while (i < kept_field_count && (f.name != kept_fields[i].name || f.value != kept_fields[i].value)) ++i;
  return i;
}

// kept_fields[i]: its index if the peer's table has it, else a literal that inserts it
// (§6.2.1) if the table has room. False: not one of them, or no room (the caller writes it).
bool h2_server::put_kept(std::size_t i, std::vector<std::byte>& block) {
  if (i >= kept_field_count) return false;
  if (_rank[i] != 0) {
    // The newest entry is 62; each inserted after this one pushes it one further.
    put_hpack_int(block, 0x80, 7, hpack_static_entries + 1 + _inserted - _rank[i]);
    return true;
  }
  if (_table_max < kept_fields_bytes) return false;
  const kept_field& k = kept_fields[i];
  if (k.name_index != 0) {
    put_hpack_int(block, 0x40, 6, k.name_index);
  } else {
    block.push_back(std::byte{0x40});
    put_hpack_string(block, k.name);
  }
  put_hpack_string(block, k.value);
  _rank[i] = ++_inserted;
  return true;
}

// A header block as HEADERS and, past the peer's frame size, CONTINUATIONs.
void h2_server::write_block(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> block) {
  std::uint8_t type = t_headers;
  do {
    const std::size_t n = std::min<std::size_t>(block.size(), _peer_max_frame);
    const bool last = n == block.size();
    std::byte* p = put_frame(out(), static_cast<std::uint32_t>(n), static_cast<frame_type>(type),
                             static_cast<std::uint8_t>(flags | (last ? f_end_headers : 0)), id);
    if (n != 0) std::memcpy(p, block.data(), n);
    block = block.subspan(n);
    type = t_continuation;
    flags = 0;
  } while (!block.empty());
}

void h2_server::send_headers(h2_stream& s, std::span<const h2_field> fields, bool end_stream) {
  thread_local std::vector<std::byte> block;
  block.clear();
  encode_fields(fields, block, true);
  write_block(end_stream ? f_end_stream : 0, static_cast<std::uint32_t>(s.id), block);
  if (!end_stream) return;
  s.local_closed = true;
  if (s.remote_closed) close(s, false);
}

void h2_server::send_data(h2_stream& s, std::span<const std::byte> a, std::span<const std::byte> b) {
  const std::size_t n = a.size() + b.size();
  std::size_t now = 0;
  if (!s.blocked) {
    const std::int64_t allowed = std::min(_send_window, s.send_window);
    now = allowed <= 0 ? 0 : std::min<std::size_t>(n, static_cast<std::size_t>(allowed));
    if (now != 0) write_data(s, now, a, b, 0);
    if (now == n) return;
  }
  // The rest waits for the peer's windows.
  if (now < a.size()) s.pending.insert(s.pending.end(), a.begin() + static_cast<std::ptrdiff_t>(now), a.end());
  const std::size_t from_b = now > a.size() ? now - a.size() : 0;
  s.pending.insert(s.pending.end(), b.begin() + static_cast<std::ptrdiff_t>(from_b), b.end());
  _pending_bytes += n - now;
  if (!s.blocked) {
    s.blocked = true;
    s.blocked_prev = _blocked_tail;
    s.blocked_next = nullptr;
    if (_blocked_tail != nullptr) _blocked_tail->blocked_next = &s;
    else _blocked = &s;
    _blocked_tail = &s;
  }
}

// `n` bytes of `a` then `b`, from `skip` on, as DATA frames no larger than the peer allows.
void h2_server::write_data(h2_stream& s, std::size_t n, std::span<const std::byte> a, std::span<const std::byte> b,
                           std::size_t skip) {
  std::vector<std::byte>& o = out();
  const std::size_t frames = (n + _peer_max_frame - 1) / _peer_max_frame;
  std::size_t at = o.size();
  o.resize(at + n + frames * frame_header_bytes);
  std::size_t left = n;
  while (left != 0) {
    const std::size_t len = std::min<std::size_t>(left, _peer_max_frame);
    std::byte* p = o.data() + at;
    p[0] = std::byte(len >> 16);
    p[1] = std::byte(len >> 8);
    p[2] = std::byte(len);
    p[3] = std::byte(t_data);
    p[4] = std::byte{0};
    write32(p + 5, static_cast<std::uint32_t>(s.id));
    p += frame_header_bytes;
    std::size_t want = len;
    if (skip < a.size()) {
      const std::size_t k = std::min(want, a.size() - skip);
      std::memcpy(p, a.data() + skip, k);
      p += k;
      want -= k;
      skip += k;
    }
    if (want != 0) {
      std::memcpy(p, b.data() + (skip - a.size()), want);
      skip += want;
    }
    at += frame_header_bytes + len;
    left -= len;
  }
  _send_window -= static_cast<std::int64_t>(n);
  s.send_window -= static_cast<std::int64_t>(n);
  _h.on_sent(s, n);
}

// A blocked stream's DATA, as far as the windows go now; its trailers once all is out.
void h2_server::flush(h2_stream& s) {
  const std::size_t waiting = s.pending.size() - s.pending_sent;
  const std::int64_t allowed = std::min(_send_window, s.send_window);
  const std::size_t now = allowed <= 0 ? 0 : std::min<std::size_t>(waiting, static_cast<std::size_t>(allowed));
  if (now != 0) {
    write_data(s, now, std::span<const std::byte>(s.pending).subspan(s.pending_sent, now), {}, 0);
    s.pending_sent += now;
    _pending_bytes -= now;
  }
  if (now != waiting) return;
  s.pending.clear();
  s.pending_sent = 0;
  if (s.pending.capacity() > 64 * 1024) std::vector<std::byte>().swap(s.pending);
  unblock(s);
  if (s.pending_trailers.empty()) return;
  _pending_bytes -= s.pending_trailers.size();
  if (table_update_due()) {
    // The first block the peer reads since its table shrank must say so first: this one.
    thread_local std::vector<std::byte> block;
    block.clear();
    update_table_size(block);
    block.insert(block.end(), s.pending_trailers.begin(), s.pending_trailers.end());
    write_block(f_end_stream, static_cast<std::uint32_t>(s.id), block);
  } else {
    write_block(f_end_stream, static_cast<std::uint32_t>(s.id), s.pending_trailers);
  }
  std::vector<std::byte>().swap(s.pending_trailers);
  s.local_closed = true;
  if (s.remote_closed) close(s, false);
}

// Out of the list of streams waiting for a window.
void h2_server::unblock(h2_stream& s) noexcept {
  if (s.blocked_prev != nullptr) s.blocked_prev->blocked_next = s.blocked_next;
  else _blocked = s.blocked_next;
  if (s.blocked_next != nullptr) s.blocked_next->blocked_prev = s.blocked_prev;
  else _blocked_tail = s.blocked_prev;
  s.blocked = false;
  s.blocked_prev = s.blocked_next = nullptr;
}

void h2_server::flush_blocked() {
  for (h2_stream* s = _blocked; s != nullptr && _send_window > 0;) {
    h2_stream* next = s->blocked_next;
    flush(*s);
    s = next;
  }
}

void h2_server::send_trailers(h2_stream& s, std::span<const h2_field> fields) {
  thread_local std::vector<std::byte> block;
  block.clear();
  encode_fields(fields, block, !s.blocked);
  if (s.blocked) {
    s.pending_trailers.assign(block.begin(), block.end());
    _pending_bytes += block.size();
    return;
  }
  write_block(f_end_stream, static_cast<std::uint32_t>(s.id), block);
  s.local_closed = true;
  if (s.remote_closed) close(s, false);
}

void h2_server::reset(h2_stream& s, std::uint32_t code) {
  if (s.closing) return;
  put_rst_stream(out(), static_cast<std::uint32_t>(s.id), code);
  close(s, false);
}

void h2_server::consume(h2_stream& s, std::size_t n) {
  if (s.closing || s.remote_closed) return;  // no more DATA comes: no window to give
  s.recv_consumed += n;
  if (s.recv_consumed < default_window / 2) return;
  window_update(static_cast<std::uint32_t>(s.id), static_cast<std::uint32_t>(s.recv_consumed));
  s.recv_window += static_cast<std::int64_t>(s.recv_consumed);
  s.recv_consumed = 0;
}

void h2_server::window_update(std::uint32_t id, std::uint32_t n) {
  put_window_update(out(), id, n);
}

}  // namespace ringrpc::detail::grpc

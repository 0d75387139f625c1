// Hostile HTTP/2 peers against an in-process server (docs/grpc.md, "Caps and hostile input"):
// hand-made frames over a raw socket, HPACK from nghttp2's deflater and inflater (nothing else
// of nghttp2 on this side), each flood and cap with what the peer must get back and the counter
// the server keeps for it. Every wait is bounded; nothing here asserts speed.

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringrpc/server.hpp"
#include "ringrpc/server_counters.hpp"
#include "server/builtin_methods.hpp"
#include "../test_support.hpp"

namespace ringrpc {
namespace {

using namespace std::chrono_literals;
using header = std::pair<std::string, std::string>;
using header_list = std::vector<header>;

constexpr std::string_view client_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types, flags and error codes (RFC 9113).
constexpr std::uint8_t t_data = 0x0, t_headers = 0x1, t_rst_stream = 0x3, t_settings = 0x4, t_ping = 0x6,
                       t_goaway = 0x7, t_window_update = 0x8, t_continuation = 0x9;
constexpr std::uint8_t fl_end_stream = 0x1, fl_ack = 0x1, fl_end_headers = 0x4, fl_padded = 0x8,
                       fl_priority = 0x20;
constexpr std::uint32_t e_protocol = 0x1, e_refused_stream = 0x7, e_cancel = 0x8,
                        e_enhance_your_calm = 0xb;
constexpr std::uint16_t s_max_concurrent_streams = 0x3, s_initial_window_size = 0x4, s_max_frame_size = 0x5;

constexpr auto reply_wait = 10s;  // bounds a failing test only

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
}
void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
  v.push_back(static_cast<std::uint8_t>(x >> 24));
  v.push_back(static_cast<std::uint8_t>(x >> 16));
  v.push_back(static_cast<std::uint8_t>(x >> 8));
  v.push_back(static_cast<std::uint8_t>(x));
}

/// A gRPC length-prefixed message: flag 0, u32 big-endian length, the bytes.
std::string grpc_message(std::string_view m) {
  std::string out(5, '\0');
  const auto n = static_cast<std::uint32_t>(m.size());
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
  out.append(m);
  return out;
}

header_list request_headers(std::string_view path, const header_list& extra = {}) {
  header_list h{{":method", "POST"},
                {":scheme", "http"},
                {":path", std::string(path)},
                {":authority", "x"},
                {"content-type", "application/grpc"},
                {"te", "trailers"}};
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

std::optional<std::string> value_of(const header_list* h, std::string_view name) {
  if (h == nullptr) return std::nullopt;
  for (const auto& [k, v] : *h) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::string describe(const header_list* h) {
  if (h == nullptr) return "(none)";
  std::string s;
  for (const auto& [k, v] : *h) s += k + ": " + (v.size() > 80 ? v.substr(0, 80) + "..." : v) + "\n";
  return s;
}

/// What the server sent on one stream.
struct stream_reply {
  std::vector<header_list> blocks;  // header blocks, in order
  std::string data;                 // DATA bytes, gRPC prefixes included
  bool ended = false;               // END_STREAM seen
  std::optional<std::uint32_t> reset;  // RST_STREAM's error code

  const header_list* headers() const { return blocks.empty() ? nullptr : &blocks.front(); }
  /// The trailers, or the only header block of a trailers-only response.
  const header_list* trailers() const {
    if (blocks.size() >= 2) return &blocks.back();
    if (ended && blocks.size() == 1) return &blocks.front();
    return nullptr;
  }
  bool trailers_only() const { return ended && blocks.size() == 1 && data.empty(); }
  std::optional<std::string> status() const { return value_of(trailers(), "grpc-status"); }
};

struct goaway_info {
  std::uint32_t last_stream = 0;
  std::uint32_t code = 0;
  std::string debug;
};

/// A raw HTTP/2 client: a blocking loopback socket, hand-made frames, nghttp2's HPACK. It reads
/// only when told (pump), answers the server's SETTINGS (auto_ack_settings) and keeps the
/// server's flow-control windows for what it sends.
class h2_peer {
 public:
  /// `rcvbuf`: the socket's receive buffer (0: the system's), small for a peer that reads nothing.
  explicit h2_peer(std::uint16_t port, int rcvbuf = 0) : _sock(port, rcvbuf, 5000ms) {
    if (nghttp2_hd_deflate_new(&_deflater, 4096) != 0 || nghttp2_hd_inflate_new(&_inflater) != 0) {
      throw std::runtime_error("nghttp2 HPACK");
    }
  }
  ~h2_peer() {
    if (_deflater != nullptr) nghttp2_hd_deflate_del(_deflater);
    if (_inflater != nullptr) nghttp2_hd_inflate_del(_inflater);
  }
  h2_peer(const h2_peer&) = delete;
  h2_peer& operator=(const h2_peer&) = delete;

  bool auto_ack_settings = true;

  // ---- sending ----
  bool send_bytes(std::span<const std::uint8_t> b) {
    return _sock.send_all({reinterpret_cast<const std::byte*>(b.data()), b.size()});
  }
  static std::vector<std::uint8_t> frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                                         std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> f;
    f.reserve(9 + payload.size());
    const auto n = static_cast<std::uint32_t>(payload.size());
    f.push_back(static_cast<std::uint8_t>(n >> 16));
    f.push_back(static_cast<std::uint8_t>(n >> 8));
    f.push_back(static_cast<std::uint8_t>(n));
    f.push_back(type);
    f.push_back(flags);
    put32(f, stream & 0x7fffffffu);
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
  }
  bool send_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::span<const std::uint8_t> payload = {}) {
    return send_bytes(frame(type, flags, stream, payload));
  }
  static std::vector<std::uint8_t> settings_payload(const std::vector<std::pair<std::uint16_t, std::uint32_t>>& s) {
    std::vector<std::uint8_t> p;
    for (const auto& [id, value] : s) {
      p.push_back(static_cast<std::uint8_t>(id >> 8));
      p.push_back(static_cast<std::uint8_t>(id));
      put32(p, value);
    }
    return p;
  }
  /// The client preface and its SETTINGS frame.
  bool send_preface(const std::vector<std::pair<std::uint16_t, std::uint32_t>>& settings = {}) {
    std::vector<std::uint8_t> b(client_preface.begin(), client_preface.end());
    const auto f = frame(t_settings, 0, 0, settings_payload(settings));
    b.insert(b.end(), f.begin(), f.end());
    return send_bytes(b);
  }
  bool send_ping(std::uint64_t opaque) {
    std::vector<std::uint8_t> p;
    put32(p, static_cast<std::uint32_t>(opaque >> 32));
    put32(p, static_cast<std::uint32_t>(opaque));
    return send_frame(t_ping, 0, 0, p);
  }
  static std::vector<std::uint8_t> rst_frame(std::uint32_t stream, std::uint32_t code) {
    std::vector<std::uint8_t> p;
    put32(p, code);
    return frame(t_rst_stream, 0, stream, p);
  }

  /// One header block, HPACK-encoded by this connection's deflater (blocks must be sent in the
  /// order they are encoded).
  std::vector<std::uint8_t> encode(const header_list& h) {
    std::vector<nghttp2_nv> nva;
    for (const auto& [k, v] : h) {
      nva.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(k.data())),
                     reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), k.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    std::vector<std::uint8_t> out(nghttp2_hd_deflate_bound(_deflater, nva.data(), nva.size()));
    const ssize_t n = nghttp2_hd_deflate_hd(_deflater, out.data(), out.size(), nva.data(), nva.size());
    if (n < 0) throw std::runtime_error("nghttp2_hd_deflate_hd failed");
    out.resize(static_cast<std::size_t>(n));
    return out;
  }
  /// HEADERS and as many CONTINUATIONs as `fragment`-byte pieces of the block need.
  static std::vector<std::uint8_t> header_frames(std::uint32_t stream, std::span<const std::uint8_t> block,
                                                 bool end_stream, std::size_t fragment = 16384) {
    std::vector<std::uint8_t> out;
    std::size_t at = 0;
    bool first = true;
    do {
      const std::size_t n = std::min(fragment, block.size() - at);
      const bool last = at + n == block.size();
      std::uint8_t flags = last ? fl_end_headers : 0;
      if (first && end_stream) flags |= fl_end_stream;
      const auto f = frame(first ? t_headers : t_continuation, flags, stream, block.subspan(at, n));
      out.insert(out.end(), f.begin(), f.end());
      at += n;
      first = false;
    } while (at < block.size());
    return out;
  }
  bool send_headers(std::uint32_t stream, const header_list& h, bool end_stream) {
    const auto block = encode(h);
    return send_bytes(header_frames(stream, block, end_stream));
  }
  /// `count` requests with headers `h` on streams first, first + 2, ..., ended, in one write.
  bool send_requests(std::uint32_t first, unsigned count, const header_list& h) {
    std::vector<std::uint8_t> all;
    for (unsigned i = 0; i < count; ++i) {
      const auto f = header_frames(first + 2 * i, encode(h), true);
      all.insert(all.end(), f.begin(), f.end());
    }
    return send_bytes(all);
  }
  /// DATA frames of at most `chunk` bytes within the server's windows, waiting (reading) for its
  /// WINDOW_UPDATEs as needed. False if the connection closed or the windows stayed shut.
  bool send_data(std::uint32_t stream, std::string_view bytes, bool end_stream, std::size_t chunk = 16384,
                 std::chrono::milliseconds limit = reply_wait) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::size_t at = 0;
    do {
      const auto open = [&] { return bytes.size() == at || (_conn_window > 0 && window_of(stream) > 0); };
      if (!open()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left <= 0ms || !pump(left, open)) return false;
      }
      const auto room = static_cast<std::size_t>(std::min<std::int64_t>(_conn_window, window_of(stream)));
      const std::size_t n = std::min({chunk, _max_frame, bytes.size() - at, room});
      const bool last = at + n == bytes.size();
      const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data()) + at;
      if (!send_frame(t_data, last && end_stream ? fl_end_stream : 0, stream, {p, n})) return false;
      _conn_window -= static_cast<std::int64_t>(n);
      _stream_windows[stream] -= static_cast<std::int64_t>(n);
      at += n;
    } while (at < bytes.size());
    return true;
  }
  /// A whole gRPC unary request: HEADERS, then the message in DATA with END_STREAM.
  bool send_call(std::uint32_t stream, std::string_view path, std::string_view message,
                 const header_list& extra = {}) {
    return send_headers(stream, request_headers(path, extra), false) &&
           send_data(stream, grpc_message(message), true);
  }

  // ---- receiving ----
  /// Reads and handles frames until pred() holds, the connection closes or `limit` passes:
  /// whether pred() holds.
  bool pump(std::chrono::milliseconds limit, const std::function<bool()>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      handle_buffered();
      if (pred()) return true;
      if (_closed) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left < 0ms) return false;
      pollfd p{_sock.fd(), POLLIN, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) {
        handle_buffered();
        return pred();
      }
      std::uint8_t buf[65536];
      const ssize_t n = ::recv(_sock.fd(), buf, sizeof buf, 0);
      if (n > 0) {
        _in.insert(_in.end(), buf, buf + n);
      } else if (n == 0) {
        _closed = true;
      } else if (errno != EINTR && errno != EAGAIN) {
        _closed = true;
        _reset_by_peer = errno == ECONNRESET;
      }
    }
  }
  /// Handles what has arrived without waiting.
  void poll_now() { pump(0ms, [] { return false; }); }
  /// Bytes sent that the server has not read yet (still in our send queue or its receive
  /// queue: loopback acknowledges at once, so SIOCOUTQ counts what is unacknowledged).
  long unsent_bytes() const {
    int n = -1;
    return ::ioctl(_sock.fd(), SIOCOUTQ, &n) == 0 ? n : -1;
  }
  /// The connection as TCP sees it, for a stall's report: the peer's retransmissions and
  /// zero-window probes (its data held back by the server's kernel), and the bytes the
  /// server's kernel holds that the server has not read (from /proc/net/tcp).
  std::string tcp_state() const {
    std::string s;
    tcp_info i{};
    socklen_t n = sizeof i;
    if (::getsockopt(_sock.fd(), IPPROTO_TCP, TCP_INFO, &i, &n) == 0) {
      s += "peer tcp: retransmits " + std::to_string(i.tcpi_retransmits) + ", probes " +
           std::to_string(i.tcpi_probes) + ", backoff " + std::to_string(i.tcpi_backoff) + ", rto " +
           std::to_string(i.tcpi_rto) + " us, unacked " + std::to_string(i.tcpi_unacked) + ", total retrans " +
           std::to_string(i.tcpi_total_retrans) + ", cwnd " + std::to_string(i.tcpi_snd_cwnd);
    }
    sockaddr_in self{};
    socklen_t len = sizeof self;
    if (::getsockname(_sock.fd(), reinterpret_cast<sockaddr*>(&self), &len) != 0) return s;
    // The server's end: its remote port is ours. Columns: sl local rem st tx_queue:rx_queue ...
    char want[16];
    std::snprintf(want, sizeof want, ":%04X", ntohs(self.sin_port));
    std::ifstream f("/proc/net/tcp");
    for (std::string line; std::getline(f, line);) {
      char local[64], remote[64], st[8], queues[32];
      if (std::sscanf(line.c_str(), "%*s %63s %63s %7s %31s", local, remote, st, queues) != 4) continue;
      if (!std::string_view(remote).ends_with(want)) continue;
      s += "; server socket " + std::string(local) + " state " + st + " tx:rx queues (hex) " + queues;
    }
    return s;
  }
  bool wait_reply(std::uint32_t stream, std::chrono::milliseconds limit = reply_wait) {
    return pump(limit, [&] {
      const auto it = _replies.find(stream);
      return it != _replies.end() && (it->second.ended || it->second.reset);
    });
  }
  bool wait_closed(std::chrono::milliseconds limit = reply_wait) {
    return pump(limit, [] { return false; }) || _closed;
  }
  bool wait_server_settings(std::chrono::milliseconds limit = reply_wait) {
    return pump(limit, [&] { return _settings_frames > 0; });
  }

  const stream_reply& reply(std::uint32_t stream) { return _replies[stream]; }
  const std::map<std::uint32_t, stream_reply>& replies() const { return _replies; }
  const std::optional<goaway_info>& goaway() const { return _goaway; }
  bool closed() const { return _closed; }
  bool reset_by_peer() const { return _reset_by_peer; }
  bool hpack_failed() const { return _hpack_failed; }
  int settings_frames() const { return _settings_frames; }
  int settings_acks() const { return _settings_acks; }
  int ping_acks() const { return _ping_acks; }
  std::size_t bytes_received() const { return _received; }
  std::optional<std::uint32_t> server_setting(std::uint16_t id) const {
    const auto it = _server_settings.find(id);
    if (it == _server_settings.end()) return std::nullopt;
    return it->second;
  }
  /// What the server said on the connection, for failure messages.
  std::string summary() const {
    std::string s = "frames received: " + std::to_string(_frames) + ", closed: " + (_closed ? "yes" : "no") +
                    (_reset_by_peer ? " (reset)" : "") + ", GOAWAYs: " + std::to_string(_goaways) + " (codes" + _goaway_codes + "), first: ";
    if (_goaway) {
      s += "code " + std::to_string(_goaway->code) + " last stream " + std::to_string(_goaway->last_stream) +
           " debug '" + _goaway->debug + "'";
    } else {
      s += "none";
    }
    return s;
  }
  int fd() const { return _sock.fd(); }

 private:
  std::int64_t window_of(std::uint32_t stream) {
    return _stream_windows.try_emplace(stream, _initial_window).first->second;
  }

  void handle_buffered() {
    std::size_t at = 0;
    while (_in.size() - at >= 9) {
      const std::uint8_t* h = _in.data() + at;
      const std::size_t len = std::size_t{h[0]} << 16 | std::size_t{h[1]} << 8 | h[2];
      if (_in.size() - at < 9 + len) break;
      handle(h[3], h[4], be32(h + 5) & 0x7fffffffu, {h + 9, len});
      at += 9 + len;
    }
    _received += at;
    _in.erase(_in.begin(), _in.begin() + static_cast<std::ptrdiff_t>(at));
  }

  void handle(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::span<const std::uint8_t> p) {
    ++_frames;
    switch (type) {
      case t_settings:
        if (flags & fl_ack) {
          ++_settings_acks;
          break;
        }
        ++_settings_frames;
        for (std::size_t i = 0; i + 6 <= p.size(); i += 6) {
          const auto id = static_cast<std::uint16_t>(p[i] << 8 | p[i + 1]);
          const std::uint32_t value = be32(p.data() + i + 2);
          _server_settings[id] = value;
          if (id == s_initial_window_size) {
            const std::int64_t delta = std::int64_t{value} - _initial_window;
            for (auto& entry : _stream_windows) entry.second += delta;
            _initial_window = value;
          } else if (id == s_max_frame_size) {
            _max_frame = value;
          }
        }
        if (auto_ack_settings) (void)send_frame(t_settings, fl_ack, 0);
        break;
      case t_ping:
        if (flags & fl_ack) {
          ++_ping_acks;
        } else {
          (void)send_frame(t_ping, fl_ack, 0, p);
        }
        break;
      case t_goaway:
        ++_goaways;
        if (p.size() >= 8) _goaway_codes += " " + std::to_string(be32(p.data() + 4));
        if (!_goaway && p.size() >= 8) {
          _goaway = goaway_info{be32(p.data()) & 0x7fffffffu, be32(p.data() + 4),
                                std::string(reinterpret_cast<const char*>(p.data()) + 8, p.size() - 8)};
        }
        break;
      case t_window_update:
        if (p.size() >= 4) {
          const std::uint32_t inc = be32(p.data()) & 0x7fffffffu;
          if (stream == 0) {
            _conn_window += inc;
          } else {
            window_of(stream);
            _stream_windows[stream] += inc;
          }
        }
        break;
      case t_rst_stream:
        if (p.size() >= 4) _replies[stream].reset = be32(p.data());
        break;
      case t_headers: {
        std::size_t pad = 0;
        if ((flags & fl_padded) && !p.empty()) {
          pad = p[0];
          p = p.subspan(1);
        }
        if ((flags & fl_priority) && p.size() >= 5) p = p.subspan(5);
        p = p.first(p.size() - std::min(pad, p.size()));
        _block.assign(p.begin(), p.end());
        _block_stream = stream;
        _block_end_stream = (flags & fl_end_stream) != 0;
        if (flags & fl_end_headers) finish_block();
        break;
      }
      case t_continuation:
        _block.insert(_block.end(), p.begin(), p.end());
        if (flags & fl_end_headers) finish_block();
        break;
      case t_data: {
        std::size_t pad = 0;
        const std::size_t whole = p.size();
        if ((flags & fl_padded) && !p.empty()) {
          pad = p[0];
          p = p.subspan(1);
        }
        p = p.first(p.size() - std::min(pad, p.size()));
        auto& r = _replies[stream];
        r.data.append(reinterpret_cast<const char*>(p.data()), p.size());
        if (flags & fl_end_stream) r.ended = true;
        if (whole > 0) {
          // Give the window back, as a client that reads its replies does.
          std::vector<std::uint8_t> inc;
          put32(inc, static_cast<std::uint32_t>(whole));
          (void)send_frame(t_window_update, 0, 0, inc);
          if (!r.ended) (void)send_frame(t_window_update, 0, stream, inc);
        }
        break;
      }
      default:
        break;
    }
  }

  // A whole header block: every one goes through the one inflater, in order.
  void finish_block() {
    header_list h;
    const std::uint8_t* in = _block.data();
    std::size_t left = _block.size();
    for (;;) {
      nghttp2_nv nv;
      int inflate_flags = 0;
      const ssize_t rv = nghttp2_hd_inflate_hd2(_inflater, &nv, &inflate_flags, in, left, 1);
      if (rv < 0) {
        _hpack_failed = true;
        break;
      }
      in += rv;
      left -= static_cast<std::size_t>(rv);
      if (inflate_flags & NGHTTP2_HD_INFLATE_EMIT) {
        h.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                       std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if (inflate_flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(_inflater);
        break;
      }
      if ((inflate_flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) break;
    }
    auto& r = _replies[_block_stream];
    r.blocks.push_back(std::move(h));
    if (_block_end_stream) r.ended = true;
    _block.clear();
  }

  test::raw_socket _sock;
  nghttp2_hd_deflater* _deflater = nullptr;
  nghttp2_hd_inflater* _inflater = nullptr;
  std::vector<std::uint8_t> _in;
  std::size_t _received = 0;
  int _frames = 0;
  bool _closed = false;
  bool _reset_by_peer = false;
  bool _hpack_failed = false;
  int _settings_frames = 0;
  int _settings_acks = 0;
  int _ping_acks = 0;
  int _goaways = 0;
  std::string _goaway_codes;  // every GOAWAY's error code, for failure messages
  std::map<std::uint16_t, std::uint32_t> _server_settings;
  std::map<std::uint32_t, stream_reply> _replies;
  std::optional<goaway_info> _goaway;
  std::vector<std::uint8_t> _block;  // a header block waiting for its CONTINUATIONs
  std::uint32_t _block_stream = 0;
  bool _block_end_stream = false;
  // The server's windows for what we send, and its largest frame.
  std::int64_t _conn_window = 65535;
  std::int64_t _initial_window = 65535;
  std::map<std::uint32_t, std::int64_t> _stream_windows;
  std::size_t _max_frame = 16384;
};

// ---- the server side ----

server_options base_options() { return test::threads(1, 2); }

std::uint64_t counter(const server& s, server_counter c) { return s.stats()[c]; }

/// Polls the counter (kept on the shard's thread) until pred(value) holds or 10 s pass; the
/// last value read either way.
std::uint64_t counter_when(const server& s, server_counter c, const std::function<bool(std::uint64_t)>& pred) {
  std::uint64_t v = 0;
  test::eventually([&] { return pred(v = counter(s, c)); });
  return v;
}
std::uint64_t counter_at_least(const server& s, server_counter c, std::uint64_t n) {
  return counter_when(s, c, [n](std::uint64_t v) { return v >= n; });
}

/// The handshake a well-behaved client makes: preface, SETTINGS, the server's SETTINGS (ACKed).
void handshake(h2_peer& p, const std::vector<std::pair<std::uint16_t, std::uint32_t>>& settings = {}) {
  ASSERT_TRUE(p.send_preface(settings));
  ASSERT_TRUE(p.wait_server_settings()) << p.summary();
}

/// A unary call to /echo on `stream` that must come back whole: :status 200, the message, OK.
void expect_echo(h2_peer& p, std::uint32_t stream, std::string_view message) {
  ASSERT_TRUE(p.send_call(stream, "/echo", message)) << p.summary();
  ASSERT_TRUE(p.wait_reply(stream)) << "stream " << stream << ": " << p.summary();
  const stream_reply& r = p.reply(stream);
  ASSERT_FALSE(r.reset) << "RST_STREAM " << *r.reset;
  EXPECT_EQ(value_of(r.headers(), ":status"), "200") << describe(r.headers());
  EXPECT_EQ(value_of(r.headers(), "content-type"), "application/grpc") << describe(r.headers());
  EXPECT_EQ(r.data, grpc_message(message));
  EXPECT_EQ(r.status(), "0") << describe(r.trailers());
  EXPECT_FALSE(p.hpack_failed());
}

// 1. The helper itself, against a request any gRPC client would make.
TEST(grpc_hostile, well_behaved_request_is_echoed) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  EXPECT_TRUE(p.server_setting(s_max_concurrent_streams).has_value());
  expect_echo(p, 1, "hello over h2");
  // Trailers-after-data: headers, the message, then grpc-status alone in its own block.
  const stream_reply& r = p.reply(1);
  EXPECT_EQ(r.blocks.size(), 2u);
  EXPECT_FALSE(r.trailers_only());
  // Our SETTINGS was acknowledged.
  EXPECT_TRUE(p.pump(reply_wait, [&] { return p.settings_acks() >= 1; }));
  expect_echo(p, 3, std::string(3000, 'q'));
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_FALSE(p.closed());
  EXPECT_EQ(counter_at_least(*srv, server_counter::grpc_connections, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_calls_refused), 0u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 2. PINGs with nothing of ours between them: the third strike ends the connection with
// gRPC's own "too_many_pings".
TEST(grpc_hostile, ping_flood_gets_too_many_pings) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  std::vector<std::uint8_t> pings;
  for (std::uint64_t i = 0; i < 10; ++i) {
    std::vector<std::uint8_t> opaque;
    put32(opaque, 0);
    put32(opaque, static_cast<std::uint32_t>(i + 1));
    const auto f = h2_peer::frame(t_ping, 0, 0, opaque);
    pings.insert(pings.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(p.send_bytes(pings));
  EXPECT_TRUE(p.wait_closed()) << p.summary();
  ASSERT_TRUE(p.goaway()) << p.summary();
  EXPECT_EQ(p.goaway()->code, e_enhance_your_calm) << p.summary();
  EXPECT_EQ(p.goaway()->debug, "too_many_pings");
  EXPECT_EQ(counter_at_least(*srv, server_counter::grpc_too_many_pings, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 2b. A PING after each answered call is no strike: our responses forgive.
TEST(grpc_hostile, pings_between_answered_calls_are_forgiven) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  std::uint32_t stream = 1;
  for (int i = 0; i < 10; ++i, stream += 2) {
    expect_echo(p, stream, "call " + std::to_string(i));
    ASSERT_TRUE(p.send_ping(static_cast<std::uint64_t>(i) + 100));
    ASSERT_TRUE(p.pump(reply_wait, [&] { return p.ping_acks() == i + 1; })) << "ping " << i << ": " << p.summary();
  }
  expect_echo(p, stream, "still here");
  p.poll_now();
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_FALSE(p.closed()) << p.summary();
  EXPECT_EQ(counter(*srv, server_counter::grpc_too_many_pings), 0u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 3. Each SETTINGS costs an acknowledgement: a burst of 16, then 2 a second.
TEST(grpc_hostile, settings_flood_gets_too_many_settings) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  std::vector<std::uint8_t> b(client_preface.begin(), client_preface.end());
  for (int i = 0; i < 100; ++i) {
    const auto f = h2_peer::frame(t_settings, 0, 0, {});
    b.insert(b.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(p.send_bytes(b));
  EXPECT_TRUE(p.wait_closed()) << p.summary();
  ASSERT_TRUE(p.goaway()) << p.summary();
  EXPECT_EQ(p.goaway()->code, e_enhance_your_calm) << p.summary();
  EXPECT_EQ(p.goaway()->debug, "too_many_settings");
  std::printf("settings flood: %d of 100 SETTINGS acknowledged; %s\n", p.settings_acks(), p.summary().c_str());
  EXPECT_GE(counter_at_least(*srv, server_counter::grpc_protocol_errors, 1), 1u);
}

// 4. "Rapid reset" (CVE-2023-44487): open a stream, reset it, again and again. nghttp2's token
// bucket (1,000, then 33 a second) ends it with GOAWAY long before 2,000.
TEST(grpc_hostile, rapid_reset_gets_goaway) {
  const auto srv = test::builtin_server(base_options());
  std::uint32_t sent_through = 0;  // the last stream id sent
  {
    h2_peer p(srv->port());
    handshake(p);
    constexpr int pairs = 2000, batch = 50;
    bool send_failed = false;
    for (int i = 0; i < pairs && !send_failed; i += batch) {
      std::vector<std::uint8_t> b;
      for (int j = i; j < i + batch; ++j) {
        const auto id = static_cast<std::uint32_t>(2 * j + 1);
        const auto block = p.encode(request_headers("/echo"));
        const auto h = h2_peer::header_frames(id, block, false);
        const auto rst = h2_peer::rst_frame(id, e_cancel);
        b.insert(b.end(), h.begin(), h.end());
        b.insert(b.end(), rst.begin(), rst.end());
      }
      if (!p.send_bytes(b)) {
        send_failed = true;  // the server closed: what it said is in the socket's buffer
      } else {
        sent_through = static_cast<std::uint32_t>(2 * (i + batch) - 1);
      }
      p.poll_now();
      if (p.goaway() || p.closed()) break;
    }
    EXPECT_TRUE(p.wait_closed()) << p.summary();
    ASSERT_TRUE(p.goaway()) << "sent through stream " << sent_through << ", " << p.summary();
    EXPECT_LT(p.goaway()->last_stream, 2u * pairs - 1) << p.summary();
    EXPECT_GE(p.goaway()->last_stream, 1u) << p.summary();
    // No call ran to an answer: every stream was reset before its request ended.
    for (const auto& [id, r] : p.replies()) EXPECT_TRUE(r.blocks.empty()) << "stream " << id << " was answered";
    std::printf("rapid reset: sent through stream %u; %s\n", sent_through, p.summary().c_str());
  }
  EXPECT_GE(counter_at_least(*srv, server_counter::grpc_protocol_errors, 1), 1u)
      << "the rapid-reset GOAWAY was not counted as a protocol close";
  // The server goes on.
  h2_peer fresh(srv->port());
  handshake(fresh);
  expect_echo(fresh, 1, "after the flood");
}

// 5. CONTINUATION flood (CVE-2024-27316 and kin): one HEADERS, then CONTINUATIONs without end;
// nghttp2 allows 8.
TEST(grpc_hostile, continuation_flood_gets_goaway) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  header_list extra;
  for (int i = 0; i < 40; ++i) extra.emplace_back("x-c-" + std::to_string(i), "v" + std::to_string(i));
  const auto block = p.encode(request_headers("/echo", extra));
  constexpr std::size_t continuations = 20;
  ASSERT_GT(block.size(), continuations + 1);
  const std::size_t piece = block.size() / (continuations + 1);
  std::vector<std::uint8_t> b;
  for (std::size_t i = 0, at = 0; i <= continuations; ++i) {
    const std::size_t n = i == continuations ? block.size() - at : piece;
    const std::uint8_t flags = i == continuations ? fl_end_headers : 0;  // a valid block, were it allowed
    const auto f = h2_peer::frame(i == 0 ? t_headers : t_continuation, flags, 1,
                                  std::span<const std::uint8_t>(block).subspan(at, n));
    b.insert(b.end(), f.begin(), f.end());
    at += n;
  }
  const std::string m = grpc_message("continued");
  const auto d = h2_peer::frame(t_data, fl_end_stream, 1, {reinterpret_cast<const std::uint8_t*>(m.data()), m.size()});
  b.insert(b.end(), d.begin(), d.end());
  ASSERT_TRUE(p.send_bytes(b));
  EXPECT_TRUE(p.wait_closed()) << p.summary();
  ASSERT_TRUE(p.goaway()) << p.summary();
  EXPECT_NE(p.goaway()->code, 0u) << p.summary();
  EXPECT_TRUE(p.reply(1).blocks.empty()) << "the flooded request was answered: " << describe(p.reply(1).headers());
  std::printf("continuation flood: %s\n", p.summary().c_str());
  EXPECT_GE(counter_at_least(*srv, server_counter::grpc_protocol_errors, 1), 1u);
}

// 6. A header list past max_metadata_bytes + 8 KiB: 431 / RESOURCE_EXHAUSTED, unrun, and the
// connection serves the next call.
TEST(grpc_hostile, huge_header_list_gets_431_and_connection_stays) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  header_list big;
  std::uint32_t seed = 12345;
  for (int i = 0; i < 10; ++i) {
    std::string v(4096, 'a');
    for (char& c : v) {
      seed = seed * 1103515245u + 12345u;
      c = static_cast<char>('a' + (seed >> 16) % 26);  // little for Huffman to shrink
    }
    big.emplace_back("x-big-" + std::to_string(i), std::move(v));
  }
  const auto block = p.encode(request_headers("/echo", big));
  ASSERT_GT(block.size(), 16384u) << "the block should need CONTINUATIONs";
  ASSERT_TRUE(p.send_bytes(h2_peer::header_frames(1, block, false)));
  ASSERT_TRUE(p.send_data(1, grpc_message("unrun"), true));
  ASSERT_TRUE(p.wait_reply(1)) << p.summary();
  const stream_reply& r = p.reply(1);
  EXPECT_TRUE(r.trailers_only()) << describe(r.headers());
  EXPECT_EQ(value_of(r.headers(), ":status"), "431") << describe(r.headers());
  EXPECT_EQ(r.status(), "8") << describe(r.headers());
  EXPECT_TRUE(value_of(r.headers(), "grpc-message").has_value()) << describe(r.headers());
  expect_echo(p, 3, "after the big headers");
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_EQ(counter_at_least(*srv, server_counter::grpc_calls_refused, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 7. A length prefix that claims more than the request carries: INTERNAL, unrun.
TEST(grpc_hostile, lying_length_prefix_gets_internal_and_connection_stays) {
  const auto srv = test::builtin_server(base_options());
  h2_peer p(srv->port());
  handshake(p);
  expect_echo(p, 1, "before");
  const auto before = counter(*srv, server_counter::grpc_calls_refused);
  ASSERT_TRUE(p.send_headers(3, request_headers("/echo"), false));
  const std::string lie{'\0', '\0', '\0', '\0', '\x10', 'x'};  // 16 bytes claimed, 1 sent
  ASSERT_TRUE(p.send_data(3, lie, true));
  ASSERT_TRUE(p.wait_reply(3)) << p.summary();
  const stream_reply& r = p.reply(3);
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(value_of(r.headers(), ":status"), "200") << describe(r.headers());
  EXPECT_EQ(r.status(), "13") << describe(r.trailers());
  EXPECT_TRUE(r.data.empty());
  expect_echo(p, 5, "after");
  EXPECT_EQ(counter_when(*srv, server_counter::grpc_calls_refused, [&](std::uint64_t v) { return v > before; }),
            before + 1);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 8. A message past max_frame_bytes: RESOURCE_EXHAUSTED, unrun; the connection stays.
TEST(grpc_hostile, message_past_max_frame_bytes_gets_resource_exhausted) {
  server_options o = base_options();
  o.max_frame_bytes = 4096;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  handshake(p);
  ASSERT_TRUE(p.send_headers(1, request_headers("/echo"), false));
  ASSERT_TRUE(p.send_data(1, grpc_message(std::string(10000, 'm')), true, 4096));  // 3 frames, in the window
  ASSERT_TRUE(p.wait_reply(1)) << p.summary();
  const stream_reply& r = p.reply(1);
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(r.status(), "8") << describe(r.trailers());
  EXPECT_NE(value_of(r.trailers(), "grpc-message").value_or("").find("max_frame_bytes"), std::string::npos)
      << describe(r.trailers());
  EXPECT_TRUE(r.data.empty());
  expect_echo(p, 3, "small enough");
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_EQ(counter_at_least(*srv, server_counter::grpc_calls_refused, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 8b. A message within max_frame_bytes whose frame (method, metadata, framing) is not: that one
// call is refused, as a message over the cap is; the connection is not closed by the frame
// assembler's answer to an oversized frame.
TEST(grpc_hostile, message_that_fits_but_whose_frame_does_not_is_refused_alone) {
  server_options o = base_options();
  o.max_frame_bytes = 4096;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  handshake(p);
  ASSERT_TRUE(p.send_call(1, "/echo", std::string(4090, 'f'))) << p.summary();
  ASSERT_TRUE(p.wait_reply(1)) << p.summary();
  const stream_reply& r = p.reply(1);
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(r.status(), "8") << describe(r.trailers());
  expect_echo(p, 3, "small enough");
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_FALSE(p.closed());
}

// 8c. A peer that sends requests the session answers itself (here: a path naming no method),
// HEADERS only, and reads none of the answers: what waits to be written would grow without
// bound; past max_queued_reply_bytes + max_inflight_bytes_per_connection the connection goes.
TEST(grpc_hostile, a_peer_that_reads_none_of_its_answers_is_closed) {
  server_options o = base_options();
  o.max_queued_reply_bytes = 16 * 1024;
  o.max_inflight_bytes_per_connection = 16 * 1024;
  o.socket_send_buffer_bytes = 4096;
  // Streams wait for their answers only within one receive: a cap this high keeps nghttp2's
  // concurrency check (a GOAWAY of its own) out of the way of the bound under test.
  o.max_inflight_per_connection = 1'000'000;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port(), 4096);
  handshake(p);
  // 16 requests a write. One 15-byte request per write made the test flaky under
  // ThreadSanitizer (2 CI runs in 3; 1 in 300 here): every request a segment of its own, each
  // costing the server's socket far more kernel memory than its bytes while the slowed server
  // fell behind; the kernel pruned that socket's receive queue and dropped the peer's data
  // (RcvPruned, TCPRcvQDrop), and the peer's retransmissions went on failing, the timeout
  // doubling to 13 s (its TCP_INFO: 6 retransmits, backoff 6, cwnd 1; the server's socket:
  // nothing unread). Why the retransmissions kept failing is not pinned down; the server had
  // read all that reached it. What the test checks needs the requests to arrive.
  std::uint32_t id = 1;
  constexpr unsigned per_write = 16;
  for (int i = 0; i < 200'000; i += per_write, id += 2 * per_write) {
    if (!p.send_requests(id, per_write, request_headers("/"))) break;  // closed, or the send timed out
  }
  const long unsent = p.unsent_bytes();
  // What the server did, for a failure's message: how much it read and answered, and whether
  // anything (a pause, the budget, memory) stopped its reading.
  const auto server_side = [&] {
    std::string s;
    for (const auto& [name, c] : {std::pair{"bytes_in", server_counter::bytes_in},
                                  {"bytes_out", server_counter::bytes_out},
                                  {"grpc_calls_refused", server_counter::grpc_calls_refused},
                                  {"reads_paused", server_counter::reads_paused},
                                  {"budget_pauses", server_counter::budget_pauses},
                                  {"out_of_memory", server_counter::out_of_memory},
                                  {"partial_writes", server_counter::partial_writes},
                                  {"connections_write_stalled", server_counter::connections_write_stalled},
                                  {"connections_frame_stalled", server_counter::connections_frame_stalled},
                                  {"connections_idle_closed", server_counter::connections_idle_closed},
                                  {"connections_dead_closed", server_counter::connections_dead_closed},
                                  {"bad_frames", server_counter::bad_frames},
                                  {"event_loop_stalls", server_counter::event_loop_stalls},
                                  {"buffered_bytes", server_counter::buffered_bytes},
                                  {"connections_open", server_counter::connections_open}}) {
      s += std::string(name) + "=" + std::to_string(counter(*srv, c)) + " ";
    }
    return s + "(peer's bytes unacknowledged after its sends: " + std::to_string(unsent) + "; " + p.tcp_state() + ")";
  };
  EXPECT_GE(counter_at_least(*srv, server_counter::grpc_protocol_errors, 1), 1u)
      << "requests sent: " << (id / 2) << ", " << p.summary() << "; server: " << server_side();
  // Closed while the peer was still sending: about 3,500 requests get in (a server without the
  // bound took all 200,000).
  EXPECT_LT(id / 2, 100'000u) << p.summary();
  EXPECT_TRUE(p.wait_closed()) << p.summary() << "; server: " << server_side();
  std::printf("reads none: requests sent %u; %s; server: %s\n", id / 2, p.summary().c_str(), server_side().c_str());
}

// 9. SETTINGS_MAX_CONCURRENT_STREAMS = max_inflight_per_connection; streams past it are refused.
// This peer opens them before acknowledging the server's SETTINGS (as a client that pipelines
// its first requests does).
TEST(grpc_hostile, streams_past_max_concurrent_are_refused) {
  server_options o = base_options();
  o.max_inflight_per_connection = 4;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  p.auto_ack_settings = false;
  handshake(p);
  EXPECT_EQ(p.server_setting(s_max_concurrent_streams), 4u);
  for (std::uint32_t id = 1; id <= 11; id += 2) ASSERT_TRUE(p.send_headers(id, request_headers("/echo"), false));
  EXPECT_TRUE(p.pump(reply_wait, [&] { return p.reply(9).reset && p.reply(11).reset; })) << p.summary();
  for (std::uint32_t id : {9u, 11u}) {
    ASSERT_TRUE(p.reply(id).reset) << "stream " << id << ": " << p.summary();
    EXPECT_EQ(*p.reply(id).reset, e_refused_stream) << "stream " << id;
  }
  // The four streams within the cap are calls like any other.
  for (std::uint32_t id = 1; id <= 7; id += 2) {
    EXPECT_FALSE(p.reply(id).reset) << "stream " << id;
    ASSERT_TRUE(p.send_data(id, grpc_message("stream " + std::to_string(id)), true));
  }
  for (std::uint32_t id = 1; id <= 7; id += 2) {
    ASSERT_TRUE(p.wait_reply(id)) << "stream " << id << ": " << p.summary();
    EXPECT_EQ(p.reply(id).data, grpc_message("stream " + std::to_string(id)));
    EXPECT_EQ(p.reply(id).status(), "0");
  }
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_FALSE(p.closed());
  EXPECT_EQ(counter_at_least(*srv, server_counter::grpc_connections, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_calls_refused), 0u);
}

// 9b. The same past the client's acknowledgement of the server's SETTINGS.
TEST(grpc_hostile, streams_past_acknowledged_max_concurrent_close_the_connection) {
  // Once the client has acknowledged MAX_CONCURRENT_STREAMS, a stream past it is a protocol
  // violation (gRPC's clients queue their calls instead): nghttp2 closes the connection with
  // GOAWAY PROTOCOL_ERROR, and the server counts it (docs/grpc.md, "Caps and hostile input").
  server_options o = base_options();
  o.max_inflight_per_connection = 4;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  handshake(p);  // ACKs the server's SETTINGS
  EXPECT_EQ(p.server_setting(s_max_concurrent_streams), 4u);
  ASSERT_TRUE(p.send_ping(7));  // answered after the ACK is read: the server has applied it
  ASSERT_TRUE(p.pump(reply_wait, [&] { return p.ping_acks() == 1; })) << p.summary();
  for (std::uint32_t id = 1; id <= 11; id += 2) ASSERT_TRUE(p.send_headers(id, request_headers("/echo"), false));
  p.pump(reply_wait, [&] { return p.goaway().has_value(); });
  ASSERT_TRUE(p.goaway()) << p.summary();
  EXPECT_EQ(p.goaway()->code, e_protocol) << p.summary();
  EXPECT_TRUE(p.wait_closed()) << p.summary();
  EXPECT_GE(counter_at_least(*srv, server_counter::grpc_protocol_errors, 1), 1u)
      << "a connection closed with GOAWAY PROTOCOL_ERROR was not counted";
  std::printf("past the acknowledged stream cap: %s\n", p.summary().c_str());
  EXPECT_EQ(counter(*srv, server_counter::grpc_calls_refused), 0u);
}

// 10. A client that opens no window for replies: the session holds them up to the
// per-connection cap, the rest wait in the server's reply queue (no GOAWAY: a slow client is
// not a hostile one), and the write-stall timeout sheds a client that never reads.
TEST(grpc_hostile, replies_held_by_a_shut_window_wait_then_the_write_stall_sheds) {
  server_options o = base_options();
  o.max_inflight_bytes_per_connection = 1u << 20;
  o.write_stall_timeout = 500ms;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  handshake(p, {{s_initial_window_size, 0}});
  const std::string message(300 * 1024, 'w');
  std::uint32_t id = 1;
  int sent = 0;
  for (; sent < 8 && !p.goaway() && !p.closed(); ++sent, id += 2) {
    if (!p.send_headers(id, request_headers("/echo"), false)) break;
    if (!p.send_data(id, grpc_message(message), true)) break;  // reads WINDOW_UPDATEs meanwhile
    p.poll_now();
  }
  EXPECT_EQ(sent, 8) << "every request goes in: " << p.summary();
  EXPECT_TRUE(p.wait_closed(5000ms)) << "requests sent: " << sent << ", " << p.summary();
  std::printf("shut window: requests sent: %d; %s\n", sent, p.summary().c_str());
  EXPECT_FALSE(p.goaway()) << "a shut window is the write stall's business: " << p.summary();
  EXPECT_GE(counter_at_least(*srv, server_counter::connections_write_stalled, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
  // Nothing of a reply's message could have come: the window was 0 throughout.
  for (const auto& [sid, r] : p.replies()) EXPECT_TRUE(r.data.empty()) << "stream " << sid;
}

// 10b. The same shut window, opened later: every reply comes, whole, though together they are
// far past the session's cap on held replies (back-pressure, not an error).
TEST(grpc_hostile, replies_past_the_held_cap_all_come_once_the_window_opens) {
  server_options o = base_options();
  o.max_inflight_bytes_per_connection = 1u << 20;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  handshake(p, {{s_initial_window_size, 0}});
  const std::string message(300 * 1024, 'w');
  constexpr int calls = 8;  // 2.4 MB of replies against a 1 MiB cap
  for (int i = 0; i < calls; ++i) {
    const auto sid = static_cast<std::uint32_t>(1 + 2 * i);
    ASSERT_TRUE(p.send_headers(sid, request_headers("/echo"), false)) << p.summary();
    ASSERT_TRUE(p.send_data(sid, grpc_message(message), true)) << p.summary();
    p.poll_now();
  }
  p.pump(300ms, [] { return false; });  // the server answers into the shut window meanwhile
  ASSERT_FALSE(p.closed()) << p.summary();
  // Open every stream's window and the connection's: from here on the peer gives back what it
  // reads (pump's DATA handling), as a client that reads does.
  std::vector<std::uint8_t> inc;
  put32(inc, 8u << 20);
  ASSERT_TRUE(p.send_frame(t_window_update, 0, 0, inc));
  for (int i = 0; i < calls; ++i) ASSERT_TRUE(p.send_frame(t_window_update, 0, static_cast<std::uint32_t>(1 + 2 * i), inc));
  const auto all_done = [&] {
    int done = 0;
    for (const auto& [sid, r] : p.replies()) done += r.ended ? 1 : 0;
    return done == calls;
  };
  ASSERT_TRUE(p.pump(reply_wait, all_done)) << p.summary();
  for (const auto& [sid, r] : p.replies()) {
    EXPECT_EQ(r.status(), "0") << "stream " << sid << ": " << describe(r.trailers());
    EXPECT_EQ(r.data, grpc_message(message)) << "stream " << sid << ": " << r.data.size() << " bytes";
  }
  EXPECT_FALSE(p.goaway()) << p.summary();
  EXPECT_EQ(counter(*srv, server_counter::grpc_protocol_errors), 0u);
}

// 10d. The same shut window, then the client goes away: the replies held for it are let go
// (no WINDOW_UPDATE can come), its connection is freed long before the write-stall timeout,
// and the server stops at once.
TEST(grpc_hostile, replies_held_for_a_client_that_leaves_are_let_go) {
  server_options o = base_options();
  o.max_inflight_bytes_per_connection = 1u << 20;
  o.write_stall_timeout = 60s;
  const auto srv = test::builtin_server(o);
  {
    h2_peer p(srv->port());
    handshake(p, {{s_initial_window_size, 0}});
    const std::string message(300 * 1024, 'w');
    for (std::uint32_t i = 0; i < 8; ++i) {
      ASSERT_TRUE(p.send_headers(1 + 2 * i, request_headers("/echo"), false)) << p.summary();
      ASSERT_TRUE(p.send_data(1 + 2 * i, grpc_message(message), true)) << p.summary();
      p.poll_now();
    }
    p.pump(300ms, [] { return false; });
    ASSERT_FALSE(p.closed()) << p.summary();
  }  // the peer's socket closes here, its replies unread
  // Within the write-stall timeout's 60 s: only letting the replies go frees it.
  EXPECT_TRUE(test::eventually([&] { return counter(*srv, server_counter::connections_open) == 0; }, 20s))
      << "the connection of a client that left is still open";
  srv->stop();  // hung before: its held replies kept the connection, and the shard, alive
}

// 10c. A request cut inside its message, then silence: shed by the frame-stall timeout as a
// partial frame is; a stream whose client just waits for answers (its messages whole) is not.
TEST(grpc_hostile, a_request_cut_short_then_silence_is_shed_but_a_waiting_stream_is_not) {
  server_options o = base_options();
  o.frame_stall_timeout = 300ms;
  auto srv = std::make_unique<server>(o);
  detail::add_stream_methods(*srv);  // echo_stream
  test::start_with_builtins(*srv);
  h2_peer waiting(srv->port());
  handshake(waiting);
  ASSERT_TRUE(waiting.send_headers(1, request_headers("/echo_stream"), false));
  ASSERT_TRUE(waiting.send_data(1, grpc_message("hi"), false));  // one whole message, no END_STREAM
  h2_peer cut(srv->port());
  handshake(cut);
  ASSERT_TRUE(cut.send_headers(1, request_headers("/echo"), false));
  const std::string m = grpc_message(std::string(100, 'c'));
  ASSERT_TRUE(cut.send_data(1, m.substr(0, 40), false));
  EXPECT_TRUE(cut.wait_closed(5000ms)) << cut.summary();
  EXPECT_GE(counter_at_least(*srv, server_counter::connections_frame_stalled, 1), 1u);
  // The waiting client, silent as long: its stream is open and its message came back.
  waiting.pump(300ms, [] { return false; });
  EXPECT_FALSE(waiting.closed()) << waiting.summary();
  EXPECT_EQ(counter(*srv, server_counter::connections_frame_stalled), 1u);
  ASSERT_EQ(waiting.replies().count(1), 1u) << waiting.summary();
  EXPECT_EQ(waiting.replies().at(1).data, grpc_message("hi"));
}

// 11. Part of the preface, then silence: shed as a partial frame is.
TEST(grpc_hostile, partial_preface_then_silence_is_closed) {
  server_options o = base_options();
  o.frame_stall_timeout = 300ms;
  const auto srv = test::builtin_server(o);
  h2_peer p(srv->port());
  const auto part = client_preface.substr(0, 16);  // "PRI * HTTP/2.0\r\n"
  ASSERT_TRUE(p.send_bytes({reinterpret_cast<const std::uint8_t*>(part.data()), part.size()}));
  EXPECT_TRUE(p.wait_closed(5000ms)) << p.summary();
  EXPECT_EQ(p.bytes_received(), 0u) << "a connection not yet HTTP/2 got bytes: " << p.summary();
  EXPECT_GE(counter_at_least(*srv, server_counter::connections_frame_stalled, 1), 1u);
  EXPECT_EQ(counter(*srv, server_counter::grpc_connections), 0u);
}

}  // namespace
}  // namespace ringrpc

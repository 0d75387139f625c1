// http:// — HTTP/1.1 with keep-alive and pipelining. Responses come in request order; each one
// is delimited by Content-Length or chunked encoding, since reading to EOF cannot be pipelined.
#include "protocol.hpp"
#include "trim.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_http_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

constexpr std::size_t max_head_bytes = 64 * 1024;  ///< status line + headers (and trailers)
constexpr std::size_t max_chunk_line_bytes = 4096;

void append_http(std::vector<std::byte>& out, std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

// ASCII only, as header names are; std::tolower consults the locale through a call per byte,
// which showed up in profiles of every response's header scan.
constexpr unsigned char ascii_lower(unsigned char c) noexcept { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return ascii_lower(x) == ascii_lower(y);
         });
}

// Whether the last coding of a Transfer-Encoding list is chunked, case-insensitively; only then
// is the body's end known without reading to EOF.
bool ends_chunked(std::string_view value) {
  const auto comma = value.rfind(',');
  return iequals(trim_blanks(comma == std::string_view::npos ? value : value.substr(comma + 1)), "chunked");
}

enum class http_step { done, incomplete, bad };

struct http_pending {
  std::uint64_t seq;
  bool head;  ///< a HEAD response has headers only, whatever Content-Length says
};

// The last header section a connection parsed and what it said. A server answering the same
// request sends the same header bytes every time but for its Date line, so a reply that starts
// with exactly these bytes is known without a parse; the scan it saves was 4 % of the load
// tool's CPU against nginx (one memcmp instead of some 25 short memchr calls per reply).
struct head_memo {
  static constexpr std::size_t max_bytes = 1024;  ///< longer sections are parsed every time
  std::string bytes;  ///< status line to blank line inclusive; empty: nothing memoised
  int code = 0;
  bool has_length = false, chunked = false, close = false;
  std::uint64_t length = 0;
};

// Parses one response from scratch on every call (but for a memoised header section); bodies
// are skipped by length, not scanned.
class response_parser final {
 public:
  response_parser(std::span<const std::byte> in, std::uint64_t max_body) : _in(in), _max_body(max_body) {}

  http_step parse(bool head_request, head_memo& memo) {
    int code = 0;
    const auto* at = reinterpret_cast<const char*>(_in.data()) + _pos;
    if (!memo.bytes.empty() && _in.size() - _pos >= memo.bytes.size() &&
        std::memcmp(at, memo.bytes.data(), memo.bytes.size()) == 0) {
      _pos += memo.bytes.size();
      code = memo.code;
      _has_length = memo.has_length;
      _chunked = memo.chunked;
      _close = memo.close;
      _length = memo.length;
    } else {
      const std::size_t start = _pos;
      bool interim = false;
      do {  // 1xx responses are interim: skip them, the real answer follows
        if (const auto s = head(code); s != http_step::done) return s;
        if (code == 101) return fail("unexpected 101 Switching Protocols");
        interim = interim || code < 200;
      } while (code < 200);
      if (!interim && _pos - start <= head_memo::max_bytes) {
        memo.bytes.assign(at, _pos - start);
        memo.code = code;
        memo.has_length = _has_length;
        memo.chunked = _chunked;
        memo.close = _close;
        memo.length = _length;
      }
    }
    _code = code;
    if (head_request || code == 204 || code == 304) return http_step::done;
    if (_chunked) return chunked_body();
    if (!_has_length) return fail("response has neither Content-Length nor chunked encoding");
    if (_length > _max_body) return over_limit("Content-Length " + std::to_string(_length));
    if (_in.size() - _pos < _length) return http_step::incomplete;
    _pos += static_cast<std::size_t>(_length);
    return http_step::done;
  }

  std::size_t position() const noexcept { return _pos; }
  int code() const noexcept { return _code; }
  bool closes() const noexcept { return _close; }
  const std::string& error() const noexcept { return _error; }
  bool too_large() const noexcept { return _too_large; }

 private:
  // One line ending in LF (a preceding CR is dropped), with at most `cap` bytes before the end.
  http_step line(std::string_view& out, std::size_t cap, const char* what) {
    const std::size_t end = std::min(_in.size(), _pos + cap + 2);
    const auto* base = reinterpret_cast<const char*>(_in.data());
    const auto* lf = static_cast<const char*>(std::memchr(base + _pos, '\n', end - _pos));
    if (lf == nullptr) {
      return end - _pos >= cap + 2 ? fail(std::string(what) + " too long") : http_step::incomplete;
    }
    out = {base + _pos, static_cast<std::size_t>(lf - (base + _pos))};
    if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
    if (out.find('\r') != std::string_view::npos) return fail("bare CR in " + std::string(what));
    _pos = static_cast<std::size_t>(lf - base) + 1;
    return http_step::done;
  }

  http_step head(int& code) {
    // Reject garbage from its first bytes instead of waiting for a whole header section.
    constexpr std::string_view prefix = "HTTP/1.";
    const std::size_t n = std::min(prefix.size(), _in.size() - _pos);
    if (std::string_view(reinterpret_cast<const char*>(_in.data()) + _pos, n) != prefix.substr(0, n)) {
      return fail("response does not start with HTTP/1.x");
    }
    _has_length = false;
    _chunked = false;
    _close = false;
    if (_pos >= max_head_bytes) return fail("header section too long");
    std::string_view l;
    if (const auto s = line(l, max_head_bytes - _pos, "header section"); s != http_step::done) return s;
    if (l.size() < 12 || !std::isdigit(static_cast<unsigned char>(l[7])) || l[8] != ' ' ||
        (l.size() > 12 && l[12] != ' ') ||
        !std::all_of(l.begin() + 9, l.begin() + 12, [](unsigned char c) { return std::isdigit(c); })) {
      return fail("bad status line");
    }
    code = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (code < 100 || code > 599) return fail("status code " + std::to_string(code));
    while (true) {
      if (_pos >= max_head_bytes) return fail("header section too long");
      if (const auto s = line(l, max_head_bytes - _pos, "header section"); s != http_step::done) return s;
      if (l.empty()) return http_step::done;
      if (l.front() == ' ' || l.front() == '\t') return fail("obsolete header line folding");
      const auto colon = l.find(':');
      if (colon == 0 || colon == std::string_view::npos) return fail("header line without a name");
      const auto name = l.substr(0, colon);
      if (name.find_first_of(" \t") != std::string_view::npos) return fail("space in a header name");
      const auto value = trim_blanks(l.substr(colon + 1));
      if (iequals(name, "content-length")) {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc{} || end != value.data() + value.size()) {
          return fail("bad Content-Length");
        }
        if (_has_length && v != _length) return fail("conflicting Content-Length headers");
        _has_length = true;
        _length = v;
      } else if (iequals(name, "connection")) {
        _close = iequals(trim_blanks(value), "close");
      } else if (iequals(name, "transfer-encoding")) {
        if (!ends_chunked(value)) return fail("unsupported Transfer-Encoding '" + std::string(value) + "'");
        _chunked = true;
      }
    }
  }

  // The wire size of a chunked body is capped at twice the body limit, so that a peer sending
  // one-byte chunks cannot make a reply unboundedly large.
  http_step chunked_body() {
    const std::size_t start = _pos;
    std::uint64_t data = 0;
    std::string_view l;
    while (true) {
      if (_pos - start > 2 * _max_body) return over_limit("chunk framing of the body");
      if (const auto s = line(l, max_chunk_line_bytes, "chunk size line"); s != http_step::done) return s;
      const auto digits = trim_blanks(l.substr(0, l.find(';')));
      std::uint64_t size = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
      if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
        return fail("bad chunk size");
      }
      if (size > _max_body - data) return over_limit("chunked body");
      data += size;
      if (size == 0) break;
      if (_in.size() - _pos < size + 2) return http_step::incomplete;
      _pos += static_cast<std::size_t>(size);
      if (_in[_pos] != std::byte{'\r'} || _in[_pos + 1] != std::byte{'\n'}) return fail("chunk not followed by CRLF");
      _pos += 2;
    }
    const std::size_t trailers = _pos;
    while (true) {
      if (_pos - trailers >= max_head_bytes) return fail("trailer section too long");
      if (const auto s = line(l, max_head_bytes - (_pos - trailers), "trailer section"); s != http_step::done) return s;
      if (l.empty()) return http_step::done;
      if (l.find(':') == std::string_view::npos || l.front() == ':') return fail("bad trailer line");
    }
  }

  http_step fail(std::string what) {
    _error = std::move(what);
    return http_step::bad;
  }
  // A reply that is HTTP but larger than --max-body: its connection's calls fail by that name.
  http_step over_limit(const std::string& what) {
    _too_large = true;
    return fail(what + " exceeds --max-body " + std::to_string(_max_body));
  }

  std::span<const std::byte> _in;
  std::uint64_t _max_body;
  std::size_t _pos = 0;
  int _code = 0;
  bool _has_length = false;
  bool _chunked = false;
  bool _close = false;  // Connection: close
  bool _too_large = false;
  std::uint64_t _length = 0;
  std::string _error;
};

struct http_settings {
  std::string host_header;
  std::string extra_headers;  ///< -H lines, each ending in CRLF
  std::string default_path;
  codec_options options;
};

class http_codec final : public connection_codec {
 public:
  explicit http_codec(std::shared_ptr<const http_settings> settings)
      : _settings(std::move(settings)), _renderer(_settings->options.templates->data) {}

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    // A kind's request without placeholders is the same bytes every time: made once per
    // connection, then copied.
    const prepared* p = nullptr;
    for (const prepared& k : _prepared) {
      if (k.kind == &kind) p = &k;
    }
    if (p == nullptr) p = &prepare(kind);
    if (p->templated) {
      write_templated(out, *p);
    } else {
      out.insert(out.end(), p->bytes.begin(), p->bytes.end());
    }
    if (_pending_count == _pending.size()) grow_pending();
    _pending[(_pending_head + _pending_count) & (_pending.size() - 1)] = {seq, p->head};
    ++_pending_count;
  }

 private:
  struct prepared {
    const request_kind* kind;
    bool head;
    std::vector<std::byte> bytes;  ///< the whole request; templated: what precedes the path
    // A request with placeholders in its path or body (--template) is rendered per call:
    // bytes, the path, after_path (to the headers' end but for Content-Length), the body.
    bool templated = false;
    bool with_body = false;
    request_template path;
    std::vector<std::byte> after_path;
  };

  void write_templated(std::vector<std::byte>& out, const prepared& p) {
    const request_templates& t = *_settings->options.templates;
    const bool body = p.with_body && t.has_payload;
    const bool counted = p.path.uses_seq() || p.path.uses_line() ||
                         (body && (t.payload.uses_seq() || t.payload.uses_line()));
    const template_call call = _renderer.begin_call(counted);
    out.insert(out.end(), p.bytes.begin(), p.bytes.end());
    _renderer.render(p.path, call, out);
    out.insert(out.end(), p.after_path.begin(), p.after_path.end());
    if (!p.with_body) {
      append_http(out, "\r\n");
      return;
    }
    // The length of this call's body goes before it: render it aside, in a buffer kept.
    _body.clear();
    if (body) {
      _renderer.render(t.payload, call, _body);
    } else {
      _body.insert(_body.end(), _settings->options.payload.begin(), _settings->options.payload.end());
    }
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof(digits), _body.size()).ptr;
    append_http(out, "Content-Length: ");
    append_http(out, std::string_view(digits, static_cast<std::size_t>(end - digits)));
    append_http(out, "\r\n\r\n");
    out.insert(out.end(), _body.begin(), _body.end());
  }

  const prepared& prepare(const request_kind& kind) {
    std::vector<std::byte> out;
    const std::string_view method = kind.method.empty() ? std::string_view("GET") : std::string_view(kind.method);
    const std::string_view path = kind.path.empty() ? std::string_view(_settings->default_path) : std::string_view(kind.path);
    const bool with_body = method == "POST" || method == "PUT" || method == "PATCH";
    append_http(out, method);
    append_http(out, path.front() == '/' || path == "*" ? " " : " /");
    if (request_template::has_braces(path) || (with_body && _settings->options.templates->has_payload)) {
      // Compiled (and checked) at start-up by check_path_templates: this cannot throw.
      prepared p{&kind, method == "HEAD", std::move(out), true, with_body,
                 request_template::compile(path, "path"), {}};
      append_http(p.after_path, " HTTP/1.1\r\nHost: ");
      append_http(p.after_path, _settings->host_header);
      append_http(p.after_path, "\r\nConnection: keep-alive\r\n");
      append_http(p.after_path, _settings->extra_headers);
      _prepared.push_back(std::move(p));
      return _prepared.back();
    }
    append_http(out, path);
    append_http(out, " HTTP/1.1\r\nHost: ");
    append_http(out, _settings->host_header);
    append_http(out, "\r\nConnection: keep-alive\r\n");
    append_http(out, _settings->extra_headers);
    if (with_body) {
      append_http(out, "Content-Length: ");
      append_http(out, std::to_string(_settings->options.payload.size()));
      append_http(out, "\r\n");
    }
    append_http(out, "\r\n");
    if (with_body) out.insert(out.end(), _settings->options.payload.begin(), _settings->options.payload.end());
    _prepared.push_back({&kind, method == "HEAD", std::move(out), false, with_body, {}, {}});
    return _prepared.back();
  }

  // The calls in flight in a ring whose size is a power of two, grown (rarely: to the depth)
  // rather than a deque that allocates and frees a block every few dozen calls.
  void grow_pending() {
    std::vector<http_pending> bigger(std::max<std::size_t>(16, _pending.size() * 2));
    for (std::size_t i = 0; i < _pending_count; ++i) bigger[i] = _pending[(_pending_head + i) & (_pending.size() - 1)];
    _pending = std::move(bigger);
    _pending_head = 0;
  }

 public:
  reply parse_reply(std::span<const std::byte> in) override {
    reply r;
    if (in.empty()) return r;
    if (_pending_count == 0) {
      r.status = reply_status::protocol_error;
      r.error = "bytes received with no request outstanding";
      return r;
    }
    response_parser p(in, _settings->options.max_reply_bytes);
    const http_pending& front = _pending[_pending_head];
    const auto s = p.parse(front.head, _memo);
    if (s == http_step::incomplete) return r;
    if (s == http_step::bad) {
      r.status = reply_status::protocol_error;
      r.error = (p.too_large() ? "HTTP response: " : "malformed HTTP response: ") + p.error();
      if (p.too_large()) r.lost_as = "reply_too_large";
      return r;
    }
    r.consumed = p.position();
    r.close_after = p.closes();
    r.seq = front.seq;
    _pending_head = (_pending_head + 1) & (_pending.size() - 1);
    --_pending_count;
    if (p.code() < 400) {
      r.status = reply_status::ok;
    } else {
      r.status = reply_status::error_reply;
      r.error = "http_" + std::to_string(p.code());
      if (p.code() == 400) {
        // Only a 400 is read: the reply's text says whether the port wanted TLS.
        constexpr std::string_view hint = "plain HTTP request was sent to HTTPS port";
        const std::string_view text(reinterpret_cast<const char*>(in.data()), r.consumed);
        r.tls_port = text.find(hint) != std::string_view::npos;
      }
    }
    return r;
  }

 private:
  std::shared_ptr<const http_settings> _settings;
  template_renderer _renderer;
  std::vector<std::byte> _body;  ///< a templated body, rendered before its length is written
  std::vector<prepared> _prepared;
  std::vector<http_pending> _pending;  ///< requests written and not yet answered, oldest first
  head_memo _memo;
  std::size_t _pending_head = 0;
  std::size_t _pending_count = 0;
};

class http_protocol final : public protocol {
 public:
  explicit http_protocol(std::shared_ptr<const http_settings> settings) : _settings(std::move(settings)) {}

  std::unique_ptr<connection_codec> new_connection() const override {
    return std::make_unique<http_codec>(_settings);
  }

  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.name = "GET " + _settings->default_path;
    k.method = "GET";
    k.path = _settings->default_path;
    return {k};
  }

 private:
  std::shared_ptr<const http_settings> _settings;
};

}  // namespace

std::unique_ptr<protocol> codecs::make_http_protocol(const target& t, const codec_options& options) {
  auto settings = std::make_shared<http_settings>();
  settings->host_header = options.host_header.empty() ? t.host + ":" + std::to_string(t.port) : options.host_header;
  for (const std::string& h : options.headers) {
    const auto colon = h.find(':');
    const std::string_view name = colon == std::string::npos ? std::string_view{} : std::string_view(h).substr(0, colon);
    if (name.empty() || name.find_first_of(" \t") != std::string_view::npos ||
        h.find_first_of("\r\n") != std::string::npos) {
      throw std::invalid_argument("bad header '" + h + "': expected 'Name: value' on one line");
    }
    const std::string_view value = trim_blanks(std::string_view(h).substr(colon + 1));
    // One Host only: the user's replaces ours; Connection is ours, since pipelining needs keep-alive.
    if (iequals(name, "host")) {
      settings->host_header = std::string(value);
    } else if (iequals(name, "connection") || iequals(name, "content-length")) {
      throw std::invalid_argument("header '" + std::string(name) + "' is set by ringrpc-load itself");
    } else {
      settings->extra_headers.append(name).append(": ").append(value).append("\r\n");
    }
  }
  settings->default_path = t.path.empty() ? "/" : t.path;
  settings->options = options;
  return std::make_unique<http_protocol>(std::move(settings));
}

}  // namespace ringrpc::load

// redis:// — RESP2 over one pipelined connection. Redis answers in request order, so the codec
// remembers what it sent, oldest first.
#include "protocol.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_redis_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

// Bounds that keep a hostile or broken server from making the parser recurse or scan without end.
constexpr int max_depth = 16;
constexpr std::int64_t max_elements = 1 << 20;
constexpr std::size_t max_line_bytes = 64 * 1024;

void append_resp(std::vector<std::byte>& out, std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

void append_bulk(std::vector<std::byte>& out, std::span<const std::byte> data) {
  char header[32] = {'$'};
  const auto end = std::to_chars(header + 1, header + sizeof(header) - 2, data.size()).ptr;
  end[0] = '\r';
  end[1] = '\n';
  append_resp(out, std::string_view(header, static_cast<std::size_t>(end + 2 - header)));
  out.insert(out.end(), data.begin(), data.end());
  append_resp(out, "\r\n");
}

void append_bulk(std::vector<std::byte>& out, std::string_view s) {
  append_bulk(out, std::span(reinterpret_cast<const std::byte*>(s.data()), s.size()));
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

enum class resp_step { done, incomplete, bad };

// One RESP2 value, parsed from scratch on every call: replies to PING/SET/GET are small, and
// big bulk strings are skipped by length without scanning their bytes.
class resp_parser final {
 public:
  resp_parser(std::span<const std::byte> in, std::size_t limit) : _in(in), _limit(limit) {}

  resp_step value(int depth) {
    if (depth > max_depth) return fail("arrays nested deeper than " + std::to_string(max_depth));
    if (_pos >= _in.size()) return _in.size() >= _limit ? fail("reply exceeds the reply limit") : resp_step::incomplete;
    const char type = static_cast<char>(_in[_pos++]);
    if (depth == 0) _top_type = type;
    std::string_view line;
    if (const auto s = read_line(line); s != resp_step::done) return s;
    switch (type) {
      case '+':
      case '-':
        if (depth == 0) _top_line = line;
        return resp_step::done;
      case ':': {
        std::int64_t v = 0;
        return number(line, v) ? resp_step::done : fail("bad integer");
      }
      case '$': {
        std::int64_t len = 0;
        if (!number(line, len) || len < -1) return fail("bad bulk string length");
        if (len == -1) return resp_step::done;
        const auto need = static_cast<std::uint64_t>(_pos) + static_cast<std::uint64_t>(len) + 2;
        if (need > _limit) return fail("bulk string of " + std::to_string(len) + " bytes exceeds the reply limit");
        if (need > _in.size()) return resp_step::incomplete;
        _pos += static_cast<std::size_t>(len);
        if (_in[_pos] != std::byte{'\r'} || _in[_pos + 1] != std::byte{'\n'}) {
          return fail("bulk string not followed by CRLF");
        }
        _pos += 2;
        return resp_step::done;
      }
      case '*': {
        std::int64_t count = 0;
        if (!number(line, count) || count < -1) return fail("bad array length");
        if (count > max_elements) return fail("array of " + std::to_string(count) + " elements");
        for (std::int64_t i = 0; i < count; ++i) {
          if (const auto s = value(depth + 1); s != resp_step::done) return s;
        }
        return resp_step::done;
      }
      default:
        return fail("bad RESP type byte " + std::to_string(static_cast<unsigned char>(type)));
    }
  }

  std::size_t position() const noexcept { return _pos; }
  char top_type() const noexcept { return _top_type; }
  std::string_view top_line() const noexcept { return _top_line; }
  const std::string& error() const noexcept { return _error; }

 private:
  // A line ends at CRLF; CR or LF alone inside it can never be valid RESP.
  resp_step read_line(std::string_view& line) {
    const std::size_t cap = std::min(_in.size(), _pos + max_line_bytes + 2);
    for (std::size_t i = _pos; i < cap; ++i) {
      const auto c = _in[i];
      if (c == std::byte{'\n'}) return fail("LF without CR");
      if (c != std::byte{'\r'}) continue;
      if (i + 1 >= _in.size()) return resp_step::incomplete;
      if (_in[i + 1] != std::byte{'\n'}) return fail("CR without LF");
      line = {reinterpret_cast<const char*>(_in.data()) + _pos, i - _pos};
      _pos = i + 2;
      return _pos > _limit ? fail("reply exceeds the reply limit") : resp_step::done;
    }
    if (cap - _pos > max_line_bytes) return fail("line longer than " + std::to_string(max_line_bytes) + " bytes");
    if (_in.size() >= _limit) return fail("reply exceeds the reply limit");
    return resp_step::incomplete;
  }

  static bool number(std::string_view s, std::int64_t& v) {
    const bool neg = !s.empty() && s.front() == '-';
    if (neg) s.remove_prefix(1);
    if (s.empty() || s.size() > 18) return false;
    v = 0;
    for (const char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    if (neg) v = -v;
    return true;
  }

  resp_step fail(std::string what) {
    _error = std::move(what);
    return resp_step::bad;
  }

  std::span<const std::byte> _in;
  std::size_t _limit;
  std::size_t _pos = 0;
  char _top_type = 0;
  std::string_view _top_line;
  std::string _error;
};

struct redis_pending {
  std::uint64_t seq;
  bool expects_pong;
};

class redis_codec final : public connection_codec {
 public:
  explicit redis_codec(std::shared_ptr<const codec_options> options)
      : _options(std::move(options)), _templates(*_options->templates), _renderer(_templates.data) {}

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    const std::string command = kind.method.empty() ? "PING" : upper(kind.method);
    if (command == "SET" || command == "GET") render_key(seq, command == "SET");
    if (command == "SET") {
      append_resp(out, "*3\r\n$3\r\nSET\r\n");
      append_bulk(out, _key);
      append_bulk(out, _templates.has_payload ? std::span<const std::byte>(_value)
                                              : std::span<const std::byte>(_options->payload));
    } else if (command == "GET") {
      append_resp(out, "*2\r\n$3\r\nGET\r\n");
      append_bulk(out, _key);
    } else {
      // PING, or any other argument-less command (e.g. DBSIZE), sent as the user wrote it.
      append_resp(out, "*1\r\n");
      append_bulk(out, command == "PING" ? std::string_view("PING") : std::string_view(kind.method));
    }
    _pending.push_back({seq, command == "PING"});
  }

  reply parse_reply(std::span<const std::byte> in) override {
    reply r;
    if (in.empty()) return r;
    if (_pending.empty()) {
      r.status = reply_status::protocol_error;
      r.error = "bytes received with no request outstanding";
      return r;
    }
    resp_parser p(in, _options->max_reply_bytes);
    const auto s = p.value(0);
    if (s == resp_step::incomplete) return r;
    if (s == resp_step::bad) {
      r.status = reply_status::protocol_error;
      r.error = "malformed RESP reply: " + p.error();
      // The parser names its limit so: the reply is RESP, only too large for --max-body.
      if (p.error().find("reply limit") != std::string::npos) r.lost_as = "reply_too_large";
      return r;
    }
    const auto call = _pending.front();
    r.consumed = p.position();
    r.seq = call.seq;
    if (p.top_type() == '-') {
      r.status = reply_status::error_reply;
      r.error = "resp_err";
    } else if (call.expects_pong && (p.top_type() != '+' || p.top_line() != "PONG")) {
      r.status = reply_status::protocol_error;
      r.error = "PING answered with something other than +PONG";
      r.consumed = 0;
      return r;
    } else {
      r.status = reply_status::ok;
    }
    _pending.pop_front();
    return r;
  }

 private:
  // The key (--redis-key, else key:<seq mod --key-space>) and a templated SET value, rendered
  // for one call into buffers the connection reuses.
  void render_key(std::uint64_t seq, bool with_value) {
    _key.clear();
    const bool counted = (_templates.has_key && (_templates.key.uses_seq() || _templates.key.uses_line())) ||
                         (with_value && _templates.has_payload &&
                          (_templates.payload.uses_seq() || _templates.payload.uses_line()));
    const template_call call = _renderer.begin_call(counted);
    if (_templates.has_key) {
      _renderer.render(_templates.key, call, _key);
    } else {
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof(digits), seq % _options->key_space).ptr;
      _key.append("key:").append(digits, end);
    }
    if (with_value && _templates.has_payload) {
      _value.clear();
      _renderer.render(_templates.payload, call, _value);
    }
  }

  std::shared_ptr<const codec_options> _options;
  const request_templates& _templates;  // owned through _options
  template_renderer _renderer;
  std::string _key;
  std::vector<std::byte> _value;
  std::deque<redis_pending> _pending;  ///< requests written and not yet answered, oldest first
};

class redis_protocol final : public protocol {
 public:
  explicit redis_protocol(const codec_options& options)
      : _options(std::make_shared<const codec_options>(options)) {}

  std::unique_ptr<connection_codec> new_connection() const override {
    return std::make_unique<redis_codec>(_options);
  }

  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.name = "PING";
    k.method = "PING";
    return {k};
  }

 private:
  std::shared_ptr<const codec_options> _options;
};

}  // namespace

std::unique_ptr<protocol> codecs::make_redis_protocol(const target&, const codec_options& options) {
  if (options.key_space == 0) throw std::invalid_argument("redis key space must be at least 1");
  return std::make_unique<redis_protocol>(options);
}

}  // namespace ringrpc::load

// ringrpc:// — the project's own framing. Replies come in completion order, so every reply
// names its request through call_id instead of by position.
#include "protocol.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "proto_ringrpc.hpp"
#include "wire/frame_codec.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_ringrpc_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

using ringrpc::detail::frame_view;
using ringrpc_detail::ringrpc_settings;

// call_id 0 means "connection-level" to the server (docs/protocol.md §1), so ids are offset by
// one from the engine's sequence numbers: an engine counting from 0 stays correct.
constexpr std::uint64_t call_id_of(std::uint64_t seq) noexcept { return seq + 1; }
constexpr std::uint64_t seq_of(std::uint64_t call_id) noexcept { return call_id - 1; }

class ringrpc_codec final : public connection_codec {
 public:
  explicit ringrpc_codec(std::shared_ptr<const ringrpc_settings> settings)
      : _settings(std::move(settings)), _options(&_settings->options), _payload(*_options) {
    _metadata.pairs = _settings->metadata;
  }

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    frame_view f;
    f.call_id = call_id_of(seq);
    f.kind = wire::Kind::Request;
    f.method = kind.method;
    f.timeout_us = _options->timeout_us;
    f.payload = _payload.next();
    if (!_metadata.pairs.empty()) f.metadata_out = &_metadata;
    const auto bytes = _encoder.encode(f);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }

  reply parse_reply(std::span<const std::byte> in) override {
    reply r;
    frame_view v;
    if (!ringrpc_detail::read_frame(in, _options->max_reply_bytes, _scratch, v, r)) return r;  // incomplete, or not a frame we can read
    if (v.call_id == 0) return protocol_error("reply with call id 0");
    r.seq = seq_of(v.call_id);
    if (v.kind == wire::Kind::Reply) {
      r.status = reply_status::ok;
      if (_options->verify_echo && !std::ranges::equal(v.payload, _options->payload)) {
        r.status = reply_status::error_reply;
        r.error = "payload_mismatch";
      }
    } else if (v.kind == wire::Kind::Error) {
      r.status = reply_status::error_reply;
      // An Error that claims ok is still a failed call; name it as the client library does.
      r.error = std::string(to_string(v.code == status::ok ? status::internal : v.code));
    } else {
      return protocol_error("unexpected frame kind " + std::to_string(static_cast<int>(v.kind)));
    }
    return r;
  }

 private:
  // Shared, not copied: the payload may be large and there is one codec per connection.
  std::shared_ptr<const ringrpc_settings> _settings;
  const codec_options* _options;
  ringrpc_detail::payload_source _payload;
  ringrpc::detail::metadata_to_send _metadata;
  ringrpc::detail::frame_encoder _encoder;
  std::vector<std::uint64_t> _scratch;
};

class ringrpc_protocol final : public protocol {
 public:
  ringrpc_protocol(const target& t, std::shared_ptr<const ringrpc_settings> settings)
      : _method(t.path), _settings(std::move(settings)), _stream(_settings->options.stream) {}

  // Chosen once per connection: a --stream connection's codec carries a stream, every other's
  // a call per frame.
  std::unique_ptr<connection_codec> new_connection() const override {
    if (_stream) return ringrpc_detail::make_stream_codec(_settings);
    return std::make_unique<ringrpc_codec>(_settings);
  }

  // --stream: grants, and messages held for credit, go out after the receive that allowed them.
  bool talks_unasked() const override { return _stream; }

  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.name = _method;
    k.method = _method;
    return {k};
  }

 private:
  std::string _method;
  std::shared_ptr<const ringrpc_settings> _settings;
  bool _stream;
};

std::string lowered(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  return out;
}

}  // namespace

// -H 'Name: value' (as for HTTP, the name lowercased) or 'key=value' (as ringrpc-call takes it),
// checked against what a server accepts by default, so that a bad pair is one error up front and
// not a bad_request per call. The values are never echoed: one may be a token.
std::vector<metadata_entry> ringrpc_call_metadata(const codec_options& options) {
  std::vector<metadata_entry> out;
  std::size_t bytes = 0;
  for (const std::string& h : options.headers) {
    const auto colon = h.find(':');
    const auto eq = h.find('=');
    const bool http_form = colon != std::string::npos && (eq == std::string::npos || colon < eq);
    const auto sep = http_form ? colon : eq;
    const std::string key = sep == std::string::npos ? std::string() : lowered(std::string_view(h).substr(0, sep));
    if (!valid_metadata_key(key)) {
      throw std::invalid_argument("bad -H for ringrpc: expected 'key: value' or key=value with a key of a-z 0-9 - _ ., got '" +
                                  key + "'");
    }
    std::string value = h.substr(sep + 1);
    if (http_form) {  // as in HTTP, blanks around the value are not part of it
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t") + 1);
    }
    for (const metadata_entry& e : out) {
      if (e.key == key) throw std::invalid_argument("-H gives metadata key '" + key + "' twice");
    }
    bytes += key.size() + value.size();
    out.push_back({key, std::move(value)});
  }
  if (!options.bearer_token.empty() &&
      std::none_of(out.begin(), out.end(), [](const metadata_entry& e) { return e.key == "authorization"; })) {
    std::string value = "Bearer " + options.bearer_token;
    if (!parse_bearer(value)) {
      throw std::invalid_argument("RINGRPC_TOKEN holds characters a bearer token cannot have");
    }
    bytes += std::string_view("authorization").size() + value.size();
    out.push_back({"authorization", std::move(value)});
  }
  if (out.size() > default_max_metadata_entries || bytes > default_max_metadata_bytes) {
    throw std::invalid_argument("-H gives " + std::to_string(out.size()) + " metadata pairs of " +
                                std::to_string(bytes) + " bytes; a server takes at most " +
                                std::to_string(default_max_metadata_entries) + " pairs of " +
                                std::to_string(default_max_metadata_bytes) + " bytes by default");
  }
  return out;
}

std::unique_ptr<protocol> codecs::make_ringrpc_protocol(const target& t, const codec_options& options) {
  if (t.path.empty()) throw std::invalid_argument("ringrpc targets need a method");
  if (options.max_reply_bytes < ringrpc::detail::frame_prefix_bytes + 8) {
    throw std::invalid_argument("max reply bytes is too small for any ringrpc frame");
  }
  if (options.verify_echo && (options.templates->has_payload || options.templates->message)) {
    throw std::invalid_argument("--verify compares every reply with one payload; it cannot go with --template "
                                "or placeholders in --data");
  }
  auto settings = std::make_shared<ringrpc_settings>();
  settings->options = options;
  settings->metadata = ringrpc_call_metadata(options);
  return std::make_unique<ringrpc_protocol>(t, std::move(settings));
}

}  // namespace ringrpc::load

// ringrpc:// — the project's own framing. Replies come in completion order, so every reply
// names its request through call_id instead of by position.
#include "protocol.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "wire/frame_codec.hpp"
#include "ringrpc/status.hpp"

namespace ringrpc::load {
namespace detail {
std::unique_ptr<protocol> make_ringrpc_protocol(const target& t, const codec_options& options);
}  // namespace detail

namespace {

using ringrpc::detail::decode_frame;
using ringrpc::detail::decode_outcome;
using ringrpc::detail::frame_prefix_bytes;
using ringrpc::detail::frame_view;
using ringrpc::detail::read_frame_length;

// call_id 0 means "connection-level" to the server (docs/protocol.md §1), so ids are offset by
// one from the engine's sequence numbers: an engine counting from 0 stays correct.
constexpr std::uint64_t call_id_of(std::uint64_t seq) noexcept { return seq + 1; }
constexpr std::uint64_t seq_of(std::uint64_t call_id) noexcept { return call_id - 1; }

reply protocol_error(std::string what) {
  reply r;
  r.status = reply_status::protocol_error;
  r.error = std::move(what);
  return r;
}

class ringrpc_codec final : public connection_codec {
 public:
  explicit ringrpc_codec(std::shared_ptr<const codec_options> options) : _options(std::move(options)) {}

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind& kind) override {
    frame_view f;
    f.call_id = call_id_of(seq);
    f.kind = wire::Kind::Request;
    f.method = kind.method;
    f.timeout_us = _options->timeout_us;
    f.payload = _options->payload;
    const auto bytes = _encoder.encode(f);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }

  reply parse_reply(std::span<const std::byte> in) override {
    if (in.size() < frame_prefix_bytes) return {};
    const std::uint64_t body = read_frame_length(in.data());
    // Refuse on the prefix alone: waiting for a body this large is what a hostile peer wants.
    if (body + frame_prefix_bytes > _options->max_reply_bytes) {
      return protocol_error("reply frame of " + std::to_string(body) + " bytes exceeds the limit of " +
                            std::to_string(_options->max_reply_bytes));
    }
    const std::size_t total = frame_prefix_bytes + static_cast<std::size_t>(body);
    if (in.size() < total) return {};

    // FlatBuffers reads scalars relative to the frame start; u64 storage gives 8-byte alignment.
    _scratch.resize((total + 7) / 8);
    std::memcpy(_scratch.data(), in.data(), total);
    frame_view v;
    if (decode_frame({reinterpret_cast<const std::byte*>(_scratch.data()), total}, v) !=
        decode_outcome::ok) {
      return protocol_error("reply frame failed verification");
    }
    reply r;
    r.consumed = total;
    if (v.kind == wire::Kind::Error && v.call_id == 0) {
      return protocol_error("server closed the connection: " + std::string(to_string(v.code)) +
                            (v.message.empty() ? "" : ": " + std::string(v.message)));
    }
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
  std::shared_ptr<const codec_options> _options;
  ringrpc::detail::frame_encoder _encoder;
  std::vector<std::uint64_t> _scratch;
};

class ringrpc_protocol final : public protocol {
 public:
  ringrpc_protocol(const target& t, const codec_options& options)
      : _method(t.path), _options(std::make_shared<const codec_options>(options)) {}

  std::unique_ptr<connection_codec> new_connection() const override {
    return std::make_unique<ringrpc_codec>(_options);
  }

  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.name = _method;
    k.method = _method;
    return {k};
  }

 private:
  std::string _method;
  std::shared_ptr<const codec_options> _options;
};

}  // namespace

std::unique_ptr<protocol> detail::make_ringrpc_protocol(const target& t, const codec_options& options) {
  if (t.path.empty()) throw std::invalid_argument("ringrpc targets need a method");
  if (options.max_reply_bytes < frame_prefix_bytes + 8) {
    throw std::invalid_argument("max reply bytes is too small for any ringrpc frame");
  }
  return std::make_unique<ringrpc_protocol>(t, options);
}

}  // namespace ringrpc::load

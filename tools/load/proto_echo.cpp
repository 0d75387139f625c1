// echo:// — raw TCP echo: the payload goes out, the same bytes come back. There is no framing,
// so a reply is "the next payload-size bytes", answered strictly in request order.
#include "protocol.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>

namespace ringrpc::load {
namespace codecs {
std::unique_ptr<protocol> make_echo_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

class echo_codec final : public connection_codec {
 public:
  explicit echo_codec(std::shared_ptr<const codec_options> options) : _options(std::move(options)) {}

  void write_request(std::vector<std::byte>& out, std::uint64_t seq, const request_kind&) override {
    out.insert(out.end(), _options->payload.begin(), _options->payload.end());
    _pending.push_back(seq);
  }

  reply parse_reply(std::span<const std::byte> in) override {
    const auto& want = _options->payload;
    if (in.empty()) return {};
    if (_pending.empty()) return protocol_error("bytes received with no request outstanding");
    // Checking the partial prefix too reports a broken peer as soon as it shows, not only once a
    // full payload's worth of wrong bytes has arrived.
    const std::size_t n = std::min(in.size(), want.size());
    if (std::memcmp(in.data(), want.data(), n) != 0) return protocol_error("echo mismatch");
    if (n < want.size()) return {};
    reply r;
    r.status = reply_status::ok;
    r.consumed = want.size();
    r.seq = _pending.front();
    _pending.pop_front();
    return r;
  }

 private:
  std::shared_ptr<const codec_options> _options;
  std::deque<std::uint64_t> _pending;  ///< seqs written and not yet answered, oldest first
};

class echo_protocol final : public protocol {
 public:
  explicit echo_protocol(const codec_options& options)
      : _options(std::make_shared<const codec_options>(options)) {}

  std::unique_ptr<connection_codec> new_connection() const override {
    return std::make_unique<echo_codec>(_options);
  }

  std::vector<request_kind> default_kinds() const override {
    request_kind k;
    k.name = "echo";
    return {k};
  }

 private:
  std::shared_ptr<const codec_options> _options;
};

}  // namespace

std::unique_ptr<protocol> codecs::make_echo_protocol(const target&, const codec_options& options) {
  if (options.templates->has_payload) {
    // Without framing, a reply is known only by its bytes being the request's: one fixed payload.
    throw std::invalid_argument("echo:// compares every reply with one fixed payload; --template goes with "
                                "ringrpc, http, h2c and redis targets");
  }
  // An empty reply would "arrive" before any byte does; there would be nothing to measure.
  if (options.payload.empty()) throw std::invalid_argument("echo needs a payload of at least 1 byte");
  if (options.payload.size() > options.max_reply_bytes) {
    throw std::invalid_argument("echo payload of " + std::to_string(options.payload.size()) +
                                " bytes exceeds the max reply size of " +
                                std::to_string(options.max_reply_bytes));
  }
  return std::make_unique<echo_protocol>(options);
}

}  // namespace ringrpc::load

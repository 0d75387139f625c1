#pragma once
// What ringrpc://'s two codecs share: the unary one (proto_ringrpc.cpp, a call per frame) and the
// streaming one (proto_ringrpc_stream.cpp, --stream: a call per message of one bidi stream).
// Internal to those two files.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "message_template.hpp"
#include "peer_sniff.hpp"
#include "protocol.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::load::ringrpc_detail {

// What every call of a run sends: the options, and the metadata made of -H and RINGRPC_TOKEN.
struct ringrpc_settings {
  codec_options options;
  std::vector<metadata_entry> metadata;
};

/// --stream's codec (proto_ringrpc_stream.cpp): one bidi stream per connection.
std::unique_ptr<connection_codec> make_stream_codec(std::shared_ptr<const ringrpc_settings> settings);

/// Reads the frame at the front of `in` into `v`. True: a whole frame, `v` filled and
/// `r.consumed` set, for the codec to decide what it answers (and to set `r.status`). False: `r`
/// is the answer as it stands, incomplete (nothing consumed) or a protocol_error (too large for
/// --max-body, failing verification, or the server's Error for the whole connection, call id 0).
/// `r` is the caller's, so the unary path keeps one reply object per reply, as before the
/// stream codec shared this. `scratch` is the connection's: FlatBuffers reads scalars relative
/// to the frame start, so the frame is copied to 8-byte aligned storage. Inline: it runs once
/// per reply of the unary hot path.
inline bool read_frame(std::span<const std::byte> in, std::uint32_t max_reply_bytes, std::vector<std::uint64_t>& scratch,
                       ringrpc::detail::frame_view& v, reply& r) {
  using ringrpc::detail::frame_prefix_bytes;
  using ringrpc::detail::read_frame_length;
  if (in.size() < frame_prefix_bytes) return false;
  const std::uint64_t body = read_frame_length(in.data());
  // Refuse on the prefix alone: waiting for a body this large is what a hostile peer wants.
  if (body + frame_prefix_bytes > max_reply_bytes) {
    r = protocol_error("reply frame of " + std::to_string(body) + " bytes exceeds --max-body " +
                       std::to_string(max_reply_bytes));
    // Named only when the bytes look like a large ringrpc frame (a FlatBuffers root offset
    // inside the body, no other protocol's text): another protocol's first bytes read as a
    // huge length too, and those are diagnosed as that protocol instead.
    const auto looks = in.size() >= frame_prefix_bytes + 4
                           ? tools::sniff_protocol(in.first(std::min<std::size_t>(in.size(), 64)))
                           : std::string_view("short");
    if (looks.empty() || looks == "ringrpc") {
      const std::uint32_t root = read_frame_length(in.data() + frame_prefix_bytes);
      if (root >= 4 && root < body) r.lost_as = "reply_too_large";
    }
    return false;
  }
  const std::size_t total = frame_prefix_bytes + static_cast<std::size_t>(body);
  if (in.size() < total) return false;
  scratch.resize((total + 7) / 8);
  std::memcpy(scratch.data(), in.data(), total);
  if (ringrpc::detail::decode_frame({reinterpret_cast<const std::byte*>(scratch.data()), total}, v) !=
      ringrpc::detail::decode_outcome::ok) {
    r = protocol_error("reply frame failed verification");
    return false;
  }
  if (v.kind == wire::Kind::Error && v.call_id == 0) {
    r = protocol_error("server closed the connection: " + std::string(to_string(v.code)) +
                       (v.message.empty() ? "" : ": " + std::string(v.message)));
    return false;
  }
  r.consumed = total;
  return true;
}

/// Each call's payload: options.payload, or --template (or --method's --data with placeholders)
/// rendered into a buffer the connection
/// keeps (its capacity outlives the call).
class payload_source {
 public:
  explicit payload_source(const codec_options& options)
      : _options(&options),
        _templates(options.templates->has_payload || options.templates->message ? options.templates.get() : nullptr),
        _renderer(options.templates->data) {}

  std::span<const std::byte> next() {
    if (_templates == nullptr) return _options->payload;
    _rendered.clear();
    if (const message_template* m = _templates->message.get()) {
      m->render(_renderer, _renderer.begin_call(m->counted()), _rendered);
      return _rendered;
    }
    const request_template& t = _templates->payload;
    _renderer.render(t, _renderer.begin_call(t.uses_seq() || t.uses_line()), _rendered);
    return _rendered;
  }

 private:
  const codec_options* _options;
  const request_templates* _templates;  // null: every call sends options.payload
  template_renderer _renderer;
  std::vector<std::byte> _rendered;
};

}  // namespace ringrpc::load::ringrpc_detail

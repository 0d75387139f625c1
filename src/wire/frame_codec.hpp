#pragma once
// Encoding and verified decoding of ringrpc frames (u32 LE length prefix + FlatBuffers body).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "wire/frame_generated.h"
#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"

namespace ringrpc::detail {

/// Bytes of the length prefix in front of every frame body.
inline constexpr std::size_t frame_prefix_bytes = 4;

/// Reads the little-endian body length at the start of a frame. `p` needs 4 readable bytes.
inline std::uint32_t read_frame_length(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

/// The fields of one frame, as views. Views point into the buffer they were decoded from.
struct frame_view {
  std::uint64_t call_id = 0;
  wire::Kind kind = wire::Kind::Request;
  std::string_view method;
  std::uint64_t timeout_us = 0;
  std::span<const std::byte> payload;
  status code = status::ok;
  std::string_view message;
  std::uint32_t retry_after_ms = 0;
  /// Decoded: the frame's metadata, verified as FlatBuffers but not yet against any caps or
  /// key rules (wire/metadata_check.hpp); null when the frame has none, as every frame of
  /// before had.
  const flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>* metadata = nullptr;
  /// Encoded: pairs to send, or null (the decoder leaves it null). One pointer, not the spans
  /// themselves: every frame_view is built per call, and frames without metadata are the many.
  const struct metadata_to_send* metadata_out = nullptr;
  // Response metadata and error details (Reply / Error; docs/protocol.md 3.2, 3.3).
  /// Decoded: the frame's trailers as `metadata` above (unchecked); null when absent.
  const flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>* trailers = nullptr;
  /// Encoded: trailers to send (its `pairs`; `metadata_out` carries the headers), or null.
  const struct metadata_to_send* trailers_out = nullptr;
  /// Error details: opaque bytes, both ways; empty when absent.
  std::span<const std::byte> details;
  // Streams (docs/design/streams.md): zero on every other frame.
  std::uint8_t stream_kind = 0;      ///< StreamOpen: 1 server, 2 client, 3 bidirectional
  std::uint32_t credit_messages = 0;  ///< StreamOpen: initial window; StreamCredit: increment
  std::uint64_t credit_bytes = 0;     ///< the same, in payload bytes
};

/// What frame_encoder sends as metadata: `defaults` first, but those whose key `pairs` also
/// has, then `pairs`.
struct metadata_to_send {
  std::span<const metadata_entry> defaults;
  std::span<const metadata_entry> pairs;
};

/// Encodes a Reply frame (status Ok) for `call_id` carrying `payload` into `out` (replacing its
/// contents, reusing its capacity), without a FlatBuffers builder: the one frame every
/// successful call sends, laid out by hand in one pass (a third of the builder's cost). The
/// bytes are a valid size-prefixed Frame (the tests decode it with the generated verifier and
/// compare with frame_encoder's); a schema change to Frame must keep this in step. Throws
/// std::bad_alloc.
void encode_reply_frame(std::uint64_t call_id, std::span<const std::byte> payload,
                        std::vector<std::byte>& out);
/// The same layout for another kind whose frame is only an id and a payload: a StreamMessage
/// without response headers (docs/protocol.md 4.3), the one frame every stream message sends.
void encode_payload_frame(std::uint64_t call_id, wire::Kind kind, std::span<const std::byte> payload,
                          std::vector<std::byte>& out);

/// Builds frames. Not thread-safe: keep one per thread. The returned span stays valid until the
/// next encode on the same encoder.
class frame_encoder {
 public:
  frame_encoder() : _fbb(256) {}

  /// Encodes `f` as one complete frame, length prefix included.
  std::span<const std::byte> encode(const frame_view& f);

  /// Encodes into `out` (replacing its contents), reusing its capacity.
  void encode_into(const frame_view& f, std::vector<std::byte>& out) {
    auto bytes = encode(f);
    out.assign(bytes.begin(), bytes.end());
    // Each thread keeps one encoder for its life: one huge frame must not pin its builder.
    if (bytes.size() > keep_bytes) _fbb.Reset();
  }

  static constexpr std::size_t keep_bytes = 64 * 1024;

 private:
  // Defined in metadata.cpp, out of encode()'s way: frames without metadata are the many.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>> encode_metadata(
      const metadata_to_send& m);
  flatbuffers::FlatBufferBuilder _fbb;
  std::vector<flatbuffers::Offset<wire::Metadata>> _entries;  // reused between frames
};

/// What decoding a complete frame gave.
enum class decode_outcome {
  ok,                 ///< `view` holds every field
  malformed_with_id,  ///< verification failed (or unknown kind) but `view.call_id` is readable
  malformed,          ///< verification failed and nothing can be trusted
};

/// Verifies and decodes one complete frame: `frame` starts at the length prefix and holds exactly
/// 4 + length bytes. It must be 8-byte aligned, because FlatBuffers aligns scalars relative to
/// the start of a size-prefixed buffer and reading them unaligned is undefined behaviour.
decode_outcome decode_frame(std::span<const std::byte> frame, frame_view& view) noexcept;

/// A decoded frame, and how the decoding went.
struct decoded_frame {
  decode_outcome outcome;
  frame_view view;
};
/// The same, as a value built in the caller's variable: each field is written once, with no
/// clearing of a default-initialised view before (a `rep stos` of its 152 bytes cost the
/// server's frame handling 2% of its CPU at depth 16). The form every per-call decode uses (the
/// server's, the client's, the downstreams', the gRPC session's); the one above, which copies
/// the value into `view`, is for tests, benchmarks and fuzz targets.
decoded_frame decode_frame(std::span<const std::byte> frame) noexcept;

}  // namespace ringrpc::detail

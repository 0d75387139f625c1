#pragma once
// Encoding a frame on a calling thread (a call's request, a one-way message, a stream's frames):
// the thread keeps one encoder and its buffer between frames.

#include <cstddef>
#include <vector>

#include "wire/frame_codec.hpp"

namespace ringrpc::detail {

/// Encodes `f` into `out`. The calling thread's encoder keeps its buffer between frames; a frame
/// with a big payload gets an encoder of its own, so that the thread does not keep that size.
inline void encode_request(const frame_view& f, std::vector<std::byte>& out) {
  constexpr std::size_t keep_bytes = 64 * 1024;
  if (f.payload.size() > keep_bytes) {
    frame_encoder once;
    once.encode_into(f, out);
    return;
  }
  thread_local frame_encoder encoder;
  encoder.encode_into(f, out);
}

}  // namespace ringrpc::detail

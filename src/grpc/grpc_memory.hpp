#pragma once
// nghttp2's memory for one session: its HPACK decoder's (docs/grpc.md, "Caps and hostile
// input"). Every block is counted against the session's cap, and small blocks come from a
// per-thread cache of recently freed ones: the decoder allocates a block per field its
// dynamic table takes in, and a peer that indexes a new value per request (a changing
// grpc-timeout) makes one per call.

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace ringrpc::detail::grpc {

/// What an nghttp2_mem's callbacks need: the count of the session's blocks and its cap.
struct library_memory {
  std::size_t bytes = 0;  ///< asked for by nghttp2 and not yet freed
  std::size_t cap = 0;
};

/// An nghttp2_mem whose `mem_user_data` is `m`.
nghttp2_mem counting_allocator(library_memory& m) noexcept;

}  // namespace ringrpc::detail::grpc

#pragma once
// Response metadata a handler adds to its answer (call_context::add_header / add_trailer, and
// the same on deferred_reply): kept beside the call only once a handler adds a pair, so a call
// without any allocates nothing and its reply keeps the hand-laid fast encoding (answer.hpp).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ringrpc/metadata.hpp"

namespace ringrpc::detail {

struct response_metadata {
  std::vector<metadata_entry> headers;
  std::vector<metadata_entry> trailers;
  std::size_t entries = 0;  // headers and trailers together, against the server's caps
  std::size_t bytes = 0;    // keys plus values of both

  /// Adds one pair to the headers (or trailers). False, and nothing added, when `key` is not a
  /// lowercase token, that list has the key already, or the pair would take headers and
  /// trailers together past `max_entries` pairs or `max_bytes` of keys plus values (the caps
  /// a ringrpc server puts on request metadata, so a ringrpc client with default caps takes
  /// whatever a ringrpc server with default caps sends).
  bool add(bool trailer, std::string_view key, std::string_view value, std::uint32_t max_entries,
           std::uint32_t max_bytes);
};

}  // namespace ringrpc::detail

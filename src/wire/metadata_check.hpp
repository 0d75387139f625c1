#pragma once
// Per-call metadata on the wire: checking a received frame's pairs against the receiver's caps
// and key rules (the server, on the reader thread, before anything runs), and reading them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "wire/frame_generated.h"

namespace ringrpc::detail {

using wire_metadata = flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>;

struct metadata_limits {
  std::uint32_t max_entries = 32;
  std::uint32_t max_bytes = 8 * 1024;  // keys plus values, summed
  // The options a refused caller is pointed to in describe(): the server's request caps by
  // default; a client checking a response names its own.
  std::string_view entries_option = "the server's max_metadata_entries";
  std::string_view bytes_option = "the server's max_metadata_bytes";
};

enum class metadata_fault : std::uint8_t {
  none,
  too_many_entries,
  too_many_bytes,
  missing_key,
  bad_key,
  duplicate_key,
};

struct metadata_check {
  metadata_fault fault = metadata_fault::none;
  std::uint32_t index = 0;   // the entry at fault (bad, missing or duplicate key)
  std::size_t entries = 0;   // how many the frame has
  std::size_t bytes = 0;     // too_many_bytes: counted up to and including the entry past the cap
  bool ok() const noexcept { return fault == metadata_fault::none; }
};

/// Checks a verified metadata vector. Stops at the first fault; looks at no entry at all when
/// there are more than max_entries, and sums no further than the byte cap.
metadata_check check_metadata(const wire_metadata& md, metadata_limits limits) noexcept;

/// The error message a caller gets for a fault (`md` is the vector that was checked).
std::string describe(const metadata_check& c, const wire_metadata& md, metadata_limits limits);

}  // namespace ringrpc::detail

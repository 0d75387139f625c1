#pragma once
/// \file Per-call metadata: key/value pairs a caller sends with a call (docs/protocol.md, 3.1).
///
/// Keys are lowercase ASCII tokens: 1 or more of `a-z 0-9 - _ .`, unique within a call. Values
/// are opaque bytes (they may be empty). A server accepts at most max_metadata_entries pairs and
/// max_metadata_bytes of keys plus values per call (server_options; defaults 32 and 8 KiB);
/// beyond that, or with a malformed key, the call is answered `bad_request` and does not run,
/// and the connection stays open. Two keys mean something to ringrpc itself:
///
///   authorization  "Bearer <token>" — checked by a server configured with bearer tokens
///                  (docs/security.md); the token becomes peer_identity::token_subject.
///   traceparent    W3C Trace Context, "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>";
///                  call_context::trace() gives it parsed when it is valid (an invalid one is
///                  ignored, as the W3C recommendation says, and the call still runs).

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

inline constexpr std::uint32_t default_max_metadata_entries = 32;
inline constexpr std::uint32_t default_max_metadata_bytes = 8 * 1024;

/// One pair as a caller sets it (call_options::metadata).
struct metadata_entry {
  std::string key;
  std::string value;
};

/// One received pair, as views into the call's request bytes.
struct metadata_item {
  std::string_view key;
  std::string_view value;  ///< bytes; not necessarily text
};

/// True for a well-formed key: 1 or more of `a-z 0-9 - _ .`.
bool valid_metadata_key(std::string_view key) noexcept;

/// The metadata a call carried, verified and within the server's caps. Cheap to copy (a
/// pointer); valid as long as the call's payload is.
class metadata_view {
 public:
  metadata_view() noexcept = default;
  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }
  /// Pair `i` (< size()) in the order the caller sent them.
  metadata_item operator[](std::size_t i) const noexcept;
  /// The value under `key`, or nullopt when the call has no such key.
  std::optional<std::string_view> find(std::string_view key) const noexcept;

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = metadata_item;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = metadata_item;
    iterator() noexcept = default;
    metadata_item operator*() const noexcept { return (*_view)[_i]; }
    iterator& operator++() noexcept {
      ++_i;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++_i;
      return old;
    }
    bool operator==(const iterator& o) const noexcept { return _i == o._i; }
    bool operator!=(const iterator& o) const noexcept { return _i != o._i; }

   private:
    friend class metadata_view;
    iterator(const metadata_view* v, std::size_t i) noexcept : _view(v), _i(i) {}
    const metadata_view* _view = nullptr;
    std::size_t _i = 0;
  };
  iterator begin() const noexcept { return {this, 0}; }
  iterator end() const noexcept { return {this, size()}; }

  /// For the library: wraps a verified FlatBuffers vector of wire Metadata tables (or null).
  explicit metadata_view(const void* verified_vector) noexcept : _vector(verified_vector) {}

 private:
  const void* _vector = nullptr;
};

/// A W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/), parsed.
struct trace_context {
  std::uint8_t version = 0;
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> parent_id{};  ///< the caller's span id
  std::uint8_t flags = 0;
  bool sampled() const noexcept { return (flags & 0x01) != 0; }
  /// Lowercase hex, as on the wire: 32 and 16 digits.
  std::string trace_id_hex() const;
  std::string parent_id_hex() const;
};

/// Parses a traceparent value. False (and `out` unspecified) unless it is well formed: version
/// two lowercase hex digits other than ff; trace id 32 and parent id 16 lowercase hex digits,
/// neither all zeros; flags two hex digits; version 00 exactly 55 characters, a later version
/// at least that, followed by '-' if longer.
bool parse_traceparent(std::string_view value, trace_context& out) noexcept;

/// The token of an `authorization` value "Bearer <token>" (scheme case-insensitive, one space,
/// token of RFC 6750 b64token characters); nullopt when the value is not of that form.
std::optional<std::string_view> parse_bearer(std::string_view authorization) noexcept;

}  // namespace ringrpc

RINGRPC_API_END

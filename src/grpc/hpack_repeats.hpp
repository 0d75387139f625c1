#pragma once
// Header blocks a client sends again byte for byte. A gRPC client's encoder reaches a steady
// state after its first request on a connection: every field of the next requests for the same
// method is a reference into HPACK's dynamic table, so each request's header block is the same
// dozen bytes. Such a block decodes to the same fields as long as the dynamic table is as it was,
// and it is when no block between changed it. So a whole block that leaves the table alone is
// kept with its fields, and when the same bytes come again its fields are replayed without the
// decoder (which costs about 250 ns for a gRPC request's six fields) and without checking each
// name and value again (each passed when the block was kept). Any block that may change the
// table (a literal with incremental indexing, a table size update, one this cannot read) makes
// it forget everything kept.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringrpc::detail::grpc {

/// True if decoding `block` (one whole header block) leaves HPACK's dynamic table as it is:
/// every field in it is an indexed field or a literal not indexed (RFC 7541 §6.1, §6.2.2,
/// §6.2.3). False for an insertion (§6.2.1), a table size update (§6.3) or anything that does
/// not parse (the decoder says what is wrong with it).
bool leaves_table_alone(std::span<const std::byte> block) noexcept;

class hpack_repeats {
 public:
  static constexpr std::size_t kept = 4;  // blocks: a client calling a few methods
  // Longer blocks are not kept, nor those of more fields or more text: a gRPC request's block
  // is a dozen bytes of references to six to ten fields of 150-300 bytes in all.
  static constexpr std::size_t max_block_bytes = 256;
  static constexpr std::size_t max_fields = 32;
  static constexpr std::size_t max_text_bytes = 1024;

  /// A kept block's fields: offsets into its text, 8 bytes a field (two views would be 32).
  struct field_at {
    std::uint16_t name, name_size, value, value_size;
  };
  struct fields {
    std::string text;  // the names and values, back to back
    std::vector<field_at> at;
    // Names this block apart from every other kept on the connection, before or after (what
    // its fields meant to a request can be remembered under it: h2_server's `_known`),
    // and its place among the `kept` (a slot such memories can be indexed by).
    std::uint64_t id = 0;
    std::uint8_t slot = 0;
    std::string_view name(const field_at& f) const noexcept { return std::string_view(text).substr(f.name, f.name_size); }
    std::string_view value(const field_at& f) const noexcept {
      return std::string_view(text).substr(f.value, f.value_size);
    }
  };

  /// The fields `block` decoded to when it was kept, or null.
  const fields* find(std::span<const std::byte> block) const noexcept;

  /// About to decode the whole block `block`. If it may change the table, everything kept is
  /// forgotten; if not, what was kept stays true, and the block is recorded if it is short
  /// enough (its fields go to add(), then end()).
  void begin(std::span<const std::byte> block) noexcept;
  /// A field of the block being recorded, and whether it passed the checks of RFC 9113 §8.2.
  void add(std::string_view name, std::string_view value, bool valid) noexcept;
  /// The block decoded whole (`decoded`): it is kept if every field was valid.
  void end(bool decoded) noexcept;
  /// A block the table may change with is being decoded (one in several frames, say).
  void forget() noexcept;

  /// The memory kept (the connection's memory, charged with it).
  std::size_t held_bytes() const noexcept;

 private:
  struct entry {
    std::vector<std::byte> block;
    fields kept;
    bool used = false;
  };

  std::vector<entry> _entries;  // made as blocks are kept: a connection with no request holds none
  std::size_t _next = 0;        // the entry the next block is recorded into
  std::uint64_t _last_id = 0;
  bool _recording = false;
};

}  // namespace ringrpc::detail::grpc

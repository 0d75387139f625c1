// Header blocks sent again byte for byte (hpack_repeats.hpp).
#include "grpc/hpack_repeats.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace ringrpc::detail::grpc {

namespace {

// RFC 7541 §5.1: an integer with an N-bit prefix. Values past 2^28 are no field's here: false,
// as for one cut short (the decoder judges the block).
bool skip_integer(std::span<const std::byte> b, std::size_t& at, unsigned prefix_bits, std::uint64_t& v) noexcept {
  const std::uint8_t mask = static_cast<std::uint8_t>((1u << prefix_bits) - 1);
  v = static_cast<std::uint8_t>(b[at++]) & mask;
  if (v < mask) return true;
  for (unsigned shift = 0; shift <= 21; shift += 7) {
    if (at == b.size()) return false;
    const auto c = static_cast<std::uint8_t>(b[at++]);
    v += static_cast<std::uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return true;
  }
  return false;
}

// §5.2: a string literal (Huffman-coded or not: only its length matters here).
bool skip_string(std::span<const std::byte> b, std::size_t& at) noexcept {
  std::uint64_t n = 0;
  if (at == b.size() || !skip_integer(b, at, 7, n)) return false;
  if (n > b.size() - at) return false;
  at += static_cast<std::size_t>(n);
  return true;
}

}  // namespace

bool leaves_table_alone(std::span<const std::byte> block) noexcept {
  std::size_t at = 0;
  while (at < block.size()) {
    const auto first = static_cast<std::uint8_t>(block[at]);
    std::uint64_t index = 0;
    if ((first & 0x80) != 0) {  // §6.1 indexed field: 1xxxxxxx
      if (!skip_integer(block, at, 7, index) || index == 0) return false;
      continue;
    }
    // 01xxxxxx inserts into the table, 001xxxxx resizes it; 0000xxxx and 0001xxxx are
    // literals without indexing and never indexed.
    if ((first & 0xe0) != 0) return false;
    if (!skip_integer(block, at, 4, index)) return false;
    if (index == 0 && !skip_string(block, at)) return false;  // a literal name
    if (!skip_string(block, at)) return false;                // the value
  }
  return true;
}

const hpack_repeats::fields* hpack_repeats::find(std::span<const std::byte> block) const noexcept {
  for (const entry& e : _entries) {
    if (e.used && e.block.size() == block.size() && std::memcmp(e.block.data(), block.data(), block.size()) == 0) {
      return &e.kept;
    }
  }
  return nullptr;
}

void hpack_repeats::begin(std::span<const std::byte> block) noexcept {
  _recording = false;
  if (!leaves_table_alone(block)) {
    forget();
    return;
  }
  if (block.size() > max_block_bytes) return;
  try {
    if (_next == _entries.size()) _entries.emplace_back();
    entry& e = _entries[_next];
    e.used = false;
    e.block.assign(block.begin(), block.end());
    e.kept.text.clear();
    e.kept.at.clear();
    _recording = true;
  } catch (const std::bad_alloc&) {
    // Not kept: the block is decoded as any other.
  }
}

void hpack_repeats::add(std::string_view name, std::string_view value, bool valid) noexcept {
  if (!_recording) return;
  fields& f = _entries[_next].kept;
  if (!valid || f.at.size() == max_fields || f.text.size() + name.size() + value.size() > max_text_bytes) {
    _recording = false;
    return;
  }
  try {
    const auto at = static_cast<std::uint16_t>(f.text.size());
    f.text.append(name).append(value);
    f.at.push_back({at, static_cast<std::uint16_t>(name.size()), static_cast<std::uint16_t>(at + name.size()),
                    static_cast<std::uint16_t>(value.size())});
  } catch (const std::bad_alloc&) {
    _recording = false;
  }
}

void hpack_repeats::end(bool decoded) noexcept {
  if (!_recording) return;
  _recording = false;
  if (!decoded) return;
  entry& e = _entries[_next];
  e.used = true;
  e.kept.id = ++_last_id;
  e.kept.slot = static_cast<std::uint8_t>(_next);
  _next = (_next + 1) % kept;
}

void hpack_repeats::forget() noexcept {
  _recording = false;
  for (entry& e : _entries) e.used = false;
}

std::size_t hpack_repeats::held_bytes() const noexcept {
  std::size_t n = _entries.capacity() * sizeof(entry);
  for (const entry& e : _entries) {
    n += e.block.capacity() + e.kept.text.capacity() + e.kept.at.capacity() * sizeof(field_at);
  }
  return n;
}

}  // namespace ringrpc::detail::grpc

#include <algorithm>
#include <string>

#include "ringrpc/metadata.hpp"
#include "wire/frame_codec.hpp"
#include "wire/metadata_check.hpp"

namespace ringrpc {

namespace {

std::string_view key_of(const wire::Metadata* e) noexcept {
  const auto* k = e != nullptr ? e->key() : nullptr;
  return k != nullptr ? std::string_view(k->data(), k->size()) : std::string_view();
}

std::string_view value_of(const wire::Metadata* e) noexcept {
  const auto* v = e != nullptr ? e->value() : nullptr;
  return v != nullptr ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size())
                      : std::string_view();
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is not allowed by the recommendation
}

template <std::size_t N>
bool parse_hex(std::string_view s, std::array<std::uint8_t, N>& out) noexcept {
  bool any = false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    any |= out[i] != 0;
  }
  return any;  // all zeros is invalid for both ids
}

template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& a) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(2 * N, '0');
  for (std::size_t i = 0; i < N; ++i) {
    s[2 * i] = digits[a[i] >> 4];
    s[2 * i + 1] = digits[a[i] & 0xf];
  }
  return s;
}

bool b64token_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

}  // namespace

bool valid_metadata_key(std::string_view key) noexcept {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

std::size_t metadata_view::size() const noexcept {
  return _vector != nullptr ? static_cast<const detail::wire_metadata*>(_vector)->size() : 0;
}

metadata_item metadata_view::operator[](std::size_t i) const noexcept {
  const auto* e = static_cast<const detail::wire_metadata*>(_vector)->Get(static_cast<flatbuffers::uoffset_t>(i));
  return {key_of(e), value_of(e)};
}

std::optional<std::string_view> metadata_view::find(std::string_view key) const noexcept {
  if (_vector == nullptr) return std::nullopt;
  for (const auto* e : *static_cast<const detail::wire_metadata*>(_vector)) {
    if (key_of(e) == key) return value_of(e);
  }
  return std::nullopt;
}

std::string trace_context::trace_id_hex() const { return to_hex(trace_id); }
std::string trace_context::parent_id_hex() const { return to_hex(parent_id); }

bool parse_traceparent(std::string_view v, trace_context& out) noexcept {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55
  constexpr std::size_t length = 55;
  if (v.size() < length || v[2] != '-' || v[35] != '-' || v[52] != '-') return false;
  const int vh = hex_digit(v[0]), vl = hex_digit(v[1]);
  if (vh < 0 || vl < 0) return false;
  out.version = static_cast<std::uint8_t>(vh << 4 | vl);
  if (out.version == 0xff) return false;
  // Version 00 is exactly this long; a later version may append fields after a '-'.
  if (out.version == 0 ? v.size() != length : v.size() > length && v[length] != '-') return false;
  if (!parse_hex(v.substr(3, 32), out.trace_id) || !parse_hex(v.substr(36, 16), out.parent_id)) {
    return false;
  }
  const int fh = hex_digit(v[53]), fl = hex_digit(v[54]);
  if (fh < 0 || fl < 0) return false;
  out.flags = static_cast<std::uint8_t>(fh << 4 | fl);
  return true;
}

std::optional<std::string_view> parse_bearer(std::string_view a) noexcept {
  constexpr std::string_view scheme = "bearer ";
  if (a.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    const char c = a[i];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != scheme[i]) return std::nullopt;
  }
  std::string_view token = a.substr(scheme.size());
  // b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
  std::size_t i = 0;
  while (i < token.size() && b64token_char(token[i])) ++i;
  if (i == 0) return std::nullopt;
  while (i < token.size() && token[i] == '=') ++i;
  if (i != token.size()) return std::nullopt;
  return token;
}

}  // namespace ringrpc

namespace ringrpc::detail {

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::Metadata>>> frame_encoder::encode_metadata(
    const metadata_to_send& m) {
  const auto defaults = m.defaults;
  const auto pairs = m.pairs;
  _entries.clear();
  auto add = [this](const metadata_entry& pair) {
    const auto key = _fbb.CreateString(pair.key.data(), pair.key.size());
    // An empty value is still written (not left absent): the pair's presence is the point.
    const auto value = _fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(pair.value.data()), pair.value.size());
    wire::MetadataBuilder e(_fbb);
    e.add_key(key);
    e.add_value(value);
    _entries.push_back(e.Finish());
  };
  for (const metadata_entry& d : defaults) {
    const bool replaced = std::any_of(pairs.begin(), pairs.end(),
                                      [&](const metadata_entry& p) { return p.key == d.key; });
    if (!replaced) add(d);
  }
  for (const metadata_entry& pair : pairs) add(pair);
  return _fbb.CreateVector(_entries);
}

metadata_check check_metadata(const wire_metadata& md, metadata_limits limits) noexcept {
  metadata_check c;
  c.entries = md.size();
  if (c.entries > limits.max_entries) {
    c.fault = metadata_fault::too_many_entries;
    return c;
  }
  for (flatbuffers::uoffset_t i = 0; i < md.size(); ++i) {
    const wire::Metadata* e = md.Get(i);
    c.index = i;
    if (e == nullptr || e->key() == nullptr) {
      c.fault = metadata_fault::missing_key;
      return c;
    }
    const std::string_view key = key_of(e);
    c.bytes += key.size() + value_of(e).size();
    if (c.bytes > limits.max_bytes) {
      c.fault = metadata_fault::too_many_bytes;
      return c;
    }
    if (!valid_metadata_key(key)) {
      c.fault = metadata_fault::bad_key;
      return c;
    }
    for (flatbuffers::uoffset_t j = 0; j < i; ++j) {
      if (key_of(md.Get(j)) == key) {
        c.fault = metadata_fault::duplicate_key;
        return c;
      }
    }
  }
  return c;
}

std::string describe(const metadata_check& c, const wire_metadata& md, metadata_limits limits) {
  std::string s("metadata: ");
  switch (c.fault) {
    case metadata_fault::none: return {};
    case metadata_fault::too_many_entries:
      return s.append(std::to_string(c.entries))
          .append(" entries exceed ")
          .append(limits.entries_option)
          .append(" (")
          .append(std::to_string(limits.max_entries))
          .append(")");
    case metadata_fault::too_many_bytes:
      return s.append("keys and values exceed ")
          .append(limits.bytes_option)
          .append(" (")
          .append(std::to_string(limits.max_bytes))
          .append(") at entry ")
          .append(std::to_string(c.index));
    case metadata_fault::missing_key:
      return s.append("entry ").append(std::to_string(c.index)).append(" has no key");
    case metadata_fault::bad_key:
    case metadata_fault::duplicate_key: {
      // The key is the caller's bytes: quote only what is printable, and not much of it.
      std::string shown;
      for (char ch : key_of(md.Get(c.index)).substr(0, 64)) {
        shown.push_back(ch >= 0x20 && ch < 0x7f ? ch : '?');
      }
      s.append("entry ").append(std::to_string(c.index)).append(": key '").append(shown);
      return s.append(c.fault == metadata_fault::bad_key
                          ? "' is not a lowercase token (1 or more of a-z 0-9 - _ .)"
                          : "' appears twice");
    }
  }
  return s;
}

}  // namespace ringrpc::detail

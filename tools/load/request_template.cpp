#include "request_template.hpp"

#include <algorithm>

#include <charconv>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace ringrpc::load {

namespace {

[[noreturn]] void bad(std::string_view where, std::string_view text, const std::string& why) {
  throw std::invalid_argument("bad " + std::string(where) + " '" + std::string(text) + "': " + why +
                              " (placeholders: {seq} {random:N} {line}; {{ and }} for braces)");
}

// splitmix64's output function: the seeds of connections are its outputs over one sequence, so
// two connections never share a stream, whatever the seed.
std::uint64_t mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One placeholder's name, between its braces.
template_segment placeholder(std::string_view name, std::string_view where, std::string_view text) {
  template_segment s;
  if (name == "seq") {
    s.what = template_segment::kind::seq;
  } else if (name == "line") {
    s.what = template_segment::kind::line;
  } else if (name.starts_with("random:")) {
    const std::string_view n = name.substr(7);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), s.bound);
    if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || s.bound == 0) {
      // Appended, not "{" + ...: GCC 12 warns (-Wrestrict) on that operator+ wrongly.
      bad(where, text, std::string("{").append(name).append("} needs N from 1 to 2^64-1 (a number below N is drawn)"));
    }
    s.what = template_segment::kind::random;
  } else {
    bad(where, text, std::string("unknown placeholder {").append(name).append("}"));
  }
  return s;
}

}  // namespace

bool request_template::has_braces(std::string_view text) noexcept {
  return text.find_first_of("{}") != std::string_view::npos;
}

request_template request_template::compile(std::string_view text, std::string_view where) {
  if (text.size() > template_data::max_file_bytes) bad(where, text.substr(0, 32), "longer than 64 MiB");
  request_template t;
  const auto literal = [&](std::string_view bytes) {
    if (bytes.empty()) return;
    auto& segs = t._segments;
    if (!segs.empty() && segs.back().what == template_segment::kind::literal) {
      segs.back().length += static_cast<std::uint32_t>(bytes.size());  // "a{{b" is one literal
    } else {
      segs.push_back({template_segment::kind::literal, static_cast<std::uint32_t>(t._literals.size()),
                      static_cast<std::uint32_t>(bytes.size()), 0});
    }
    t._literals.append(bytes);
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t brace = text.find_first_of("{}", i);
    literal(text.substr(i, brace == std::string_view::npos ? std::string_view::npos : brace - i));
    if (brace == std::string_view::npos) break;
    const char c = text[brace];
    if (brace + 1 < text.size() && text[brace + 1] == c) {  // {{ or }}
      literal(text.substr(brace, 1));
      i = brace + 2;
      continue;
    }
    if (c == '}') bad(where, text, "a lone '}' (write }} for a brace)");
    const std::size_t close = text.find('}', brace + 1);
    const std::size_t open = text.find('{', brace + 1);
    if (close == std::string_view::npos || open < close) bad(where, text, "a '{' without its '}' (write {{ for a brace)");
    const template_segment s = placeholder(text.substr(brace + 1, close - brace - 1), where, text);
    t._uses_seq = t._uses_seq || s.what == template_segment::kind::seq;
    t._uses_line = t._uses_line || s.what == template_segment::kind::line;
    t._uses_random = t._uses_random || s.what == template_segment::kind::random;
    t._segments.push_back(s);
    i = close + 1;
  }
  return t;
}

std::shared_ptr<template_data> template_data::from_file(const std::string& path, std::uint64_t seed) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::invalid_argument("cannot read --data-file " + path);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (size > max_file_bytes) {
    throw std::invalid_argument("--data-file " + path + " has " + std::to_string(size) +
                                " bytes; the limit is 64 MiB (it is held in memory for the run)");
  }
  if (size == 0) throw std::invalid_argument("--data-file " + path + " is empty: {line} would have no line to send");
  std::string text(size, '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(size))) throw std::invalid_argument("cannot read --data-file " + path);
  auto d = std::make_shared<template_data>(seed);
  d->set_text(std::move(text));
  return d;
}

void template_data::set_text(std::string text) {
  _text = std::move(text);
  _lines.clear();
  _longest_line = 0;
  std::string_view rest = _text;
  while (!rest.empty()) {
    const std::size_t lf = rest.find('\n');
    std::string_view l = rest.substr(0, lf);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    _lines.push_back(l);
    _longest_line = std::max(_longest_line, l.size());
    rest = lf == std::string_view::npos ? std::string_view{} : rest.substr(lf + 1);
  }
}

std::size_t request_template::max_rendered_size(std::size_t longest_line) const noexcept {
  std::size_t n = _literals.size();
  for (const template_segment& s : _segments) {
    if (s.what == template_segment::kind::line) n += longest_line;
    if (s.what == template_segment::kind::seq || s.what == template_segment::kind::random) n += 20;  // a uint64
  }
  return n;
}

void template_data::check(const request_template& t, std::string_view where, bool one_line_token) const {
  if (!t.uses_line()) return;
  if (_lines.empty()) throw std::invalid_argument(std::string(where) + " uses {line}: give the lines with --data-file FILE");
  if (!one_line_token) return;
  for (std::size_t i = 0; i < _lines.size(); ++i) {
    for (const unsigned char c : _lines[i]) {
      if (c <= 0x20 || c == 0x7f) {
        throw std::invalid_argument(std::string(where) + " uses {line}, and line " + std::to_string(i + 1) +
                                    " of --data-file has a space or control character (percent-encode it)");
      }
    }
  }
}

std::string_view template_data::line(std::uint64_t call) const noexcept {
  return _lines.empty() ? std::string_view{} : _lines[call % _lines.size()];
}

std::uint64_t template_data::next_connection_seed() noexcept {
  const std::uint64_t n = _connections.fetch_add(1, std::memory_order_relaxed);
  return mix(_seed + 0x9E3779B97F4A7C15ull * (n + 1));
}

template_renderer::template_renderer(std::shared_ptr<template_data> data)
    : _data(std::move(data)), _state(_data->next_connection_seed()) {}

std::uint64_t template_renderer::draw(std::uint64_t bound) noexcept {
  _state += 0x9E3779B97F4A7C15ull;
  // Lemire's multiply-shift: a number below bound without a division, its bias below 2^-64 * bound.
  __extension__ using u128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<u128>(mix(_state)) * bound) >> 64);
}

template <typename Buffer>
void template_renderer::render_into(const request_template& t, const template_call& call, Buffer& out) {
  using value_type = typename Buffer::value_type;
  const auto append = [&out](std::string_view s) {
    const auto* p = reinterpret_cast<const value_type*>(s.data());
    out.insert(out.end(), p, p + s.size());
  };
  const std::string_view literals = t.literal_text();
  char digits[24];
  for (const template_segment& s : t.segments()) {
    std::uint64_t number = 0;
    switch (s.what) {
      case template_segment::kind::literal:
        append(literals.substr(s.offset, s.length));
        continue;
      case template_segment::kind::line:
        append(_data->line(call.seq));
        continue;
      case template_segment::kind::seq:
        number = call.seq;
        break;
      case template_segment::kind::random:
        number = draw(s.bound);
        break;
    }
    const auto end = std::to_chars(digits, digits + sizeof(digits), number).ptr;
    append(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }
}

void template_renderer::render(const request_template& t, const template_call& call, std::vector<std::byte>& out) {
  render_into(t, call, out);
}

void template_renderer::render(const request_template& t, const template_call& call, std::string& out) {
  render_into(t, call, out);
}

}  // namespace ringrpc::load

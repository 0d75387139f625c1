#include "message_template.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace ringrpc::load {

namespace {

// The length of the placeholder at json[i] ('{'), or 0 when none starts there.
std::size_t placeholder_length(std::string_view json, std::size_t i) noexcept {
  const std::size_t close = json.find('}', i);
  if (close == std::string_view::npos) return 0;
  const std::string_view name = json.substr(i + 1, close - i - 1);
  bool ok = name == "seq" || name == "line";
  if (name.starts_with("random:") && name.size() > 7) {
    ok = name.substr(7).find_first_not_of("0123456789") == std::string_view::npos;
  }
  return ok ? close - i + 1 : 0;
}

// Sentinels below 2^24 stay exact in a float field; the first base whose numbers the text does
// not already hold is taken, so a literal number is never mistaken for a placeholder.
std::uint64_t pick_base(std::string_view json, std::size_t count, std::string_view where) {
  for (std::uint64_t base = 10'101'000; base + count < (1u << 24); base += 1'010'101) {
    bool clash = false;
    for (std::size_t i = 0; i < count && !clash; ++i) {
      clash = json.find(std::to_string(base + i)) != std::string_view::npos;
    }
    if (!clash) return base;
  }
  throw std::invalid_argument(std::string(where) + " has too many placeholders, or numbers that look like them");
}

}  // namespace

bool json_placeholders::present(std::string_view json) noexcept {
  for (std::size_t i = json.find('{'); i != std::string_view::npos; i = json.find('{', i + 1)) {
    if (placeholder_length(json, i) != 0) return true;
  }
  return false;
}

json_placeholders json_placeholders::scan(std::string_view json, std::string_view where, bool lenient) {
  json_placeholders p;
  p._where = where;
  const char* unknown_syntax = nullptr;  // lenient: the first single quote or comment outside quotes
  // Two passes: the sentinels' base depends on the whole text.
  for (int pass = 0; pass < 2; ++pass) {
    bool in_string = false;
    std::size_t count = 0;
    for (std::size_t i = 0; i < json.size(); ++i) {
      const char c = json[i];
      const std::size_t n = c == '{' ? placeholder_length(json, i) : 0;
      if (n == 0) {
        if (pass == 1) p._json += c;
        if (in_string && c == '\\' && i + 1 < json.size()) {
          if (pass == 1) p._json += json[i + 1];
          ++i;
        } else if (c == '"') {
          in_string = !in_string;
        } else if (lenient && !in_string && unknown_syntax == nullptr) {
          if (c == '\'') unknown_syntax = "a single-quoted string";
          if (c == '/' && i + 1 < json.size() && (json[i + 1] == '/' || json[i + 1] == '*')) unknown_syntax = "a comment";
        }
        continue;
      }
      const std::string text(json.substr(i, n));
      if (pass == 0) {
        const request_template t = request_template::compile(text, where);  // checks N
        if (!in_string && t.uses_line()) {
          throw std::invalid_argument(std::string(where) + ": {line} is text, so it goes inside quotes (\"{line}\")");
        }
        p._list.push_back({t.segments()[0], text, in_string, false});
      } else if (in_string) {
        p._json += "\\u0001" + std::to_string(count) + "\\u0002";
      } else {
        p._json += std::to_string(p._base + count);
      }
      ++count;
      i += n - 1;
    }
    if (pass == 0 && unknown_syntax != nullptr && !p._list.empty()) {
      // A quote or brace inside it would be read as JSON's, and placeholders found or missed.
      throw std::invalid_argument(std::string(where) + " has placeholders and " + unknown_syntax +
                                  ": with placeholders, use double-quoted strings and no comments");
    }
    if (pass == 0) p._base = pick_base(json, p._list.size(), where);
  }
  return p;
}

int json_placeholders::number_index(std::uint64_t value) const noexcept {
  if (value < _base || value - _base >= _list.size() || _list[value - _base].in_string) return -1;
  return static_cast<int>(value - _base);
}

int json_placeholders::number_index(double value) const noexcept {
  if (!(value >= 0 && value < 1e19) || std::floor(value) != value) return -1;
  return number_index(static_cast<std::uint64_t>(value));
}

std::string json_placeholders::template_text(std::string_view value) {
  std::string t;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '{' || c == '}') {
      t.append(2, c);
    } else if (c != '\x01') {
      t += c;
    } else {
      std::size_t index = 0;
      const auto [end, ec] = std::from_chars(value.data() + i + 1, value.data() + value.size(), index);
      if (ec != std::errc{} || end == value.data() + value.size() || *end != '\x02' || index >= _list.size()) {
        throw std::invalid_argument(_where + " has a \\u0001 of its own: it marks placeholders here");
      }
      t += _list[index].text;
      _list[index].found = true;
      i = static_cast<std::size_t>(end - value.data());
    }
  }
  return t;
}

void json_placeholders::found_number(int i, std::string_view field, std::uint64_t max) {
  placeholder& p = _list[static_cast<std::size_t>(i)];
  if (p.segment.what == template_segment::kind::random && p.segment.bound - 1 > max) {
    throw std::invalid_argument(_where + ": " + p.text + " draws up to " + std::to_string(p.segment.bound - 1) +
                                ", and field '" + std::string(field) + "' holds up to " + std::to_string(max));
  }
  p.found = true;
}

std::string json_placeholders::parse_hint() const {
  return " (the placeholders were converted as the numbers from " + std::to_string(_base) +
         " outside quotes, so each must be the value of a 32- or 64-bit integer, float or double field; inside "
         "quotes they are text of a string field)";
}

void json_placeholders::check_all_found() const {
  for (const placeholder& p : _list) {
    if (p.found) continue;
    throw std::invalid_argument(
        _where + ": " + p.text + (p.in_string ? " is inside quotes, and the value is not a string field"
                                              : " is not the value of a number field") +
        " outside an array (outside quotes a placeholder is the whole value of an integer, float or double "
        "field; inside quotes it is text in a string field; bools, enums, bytes and arrays take none)");
  }
}

bool json_placeholders::uses_seq_or_line() const noexcept {
  for (const placeholder& p : _list) {
    if (p.segment.what != template_segment::kind::random) return true;
  }
  return false;
}

bool json_placeholders::uses_random() const noexcept {
  for (const placeholder& p : _list) {
    if (p.segment.what == template_segment::kind::random) return true;
  }
  return false;
}

bool json_placeholders::uses_line() const noexcept {
  for (const placeholder& p : _list) {
    if (p.segment.what == template_segment::kind::line) return true;
  }
  return false;
}

}  // namespace ringrpc::load

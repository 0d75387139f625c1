// The TOML side of the configuration: spelling keys and strings as TOML does, describing a
// value in an error, and turning toml++'s parse errors into config_error.

#include "ops/config_toml.hpp"
#include "base/escape.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <utility>
#include <vector>

namespace ringrpc::config_detail {

namespace {
// Edits between two keys: inserting, deleting or changing one character, or swapping two
// neighbours (optimal string alignment distance), each counts one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t w = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * w);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t v = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1, d[(i - 1) * w + j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) v = std::min(v, d[(i - 2) * w + j - 2] + 1);
      d[i * w + j] = v;
    }
  }
  return d[a.size() * w + b.size()];
}
}  // namespace

std::string_view nearest_key(std::string_view key, const std::vector<std::string_view>& known) {
  const std::size_t limit = std::max<std::size_t>(1, key.size() / 3);
  std::string_view best;
  std::size_t best_distance = limit + 1;
  for (const std::string_view k : known) {
    const std::size_t d = edit_distance(key, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

std::string toml_quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) detail::append_escaped_ascii(out, c, "\\u00");
  out += '"';
  return out;
}

bool is_bare_key(std::string_view k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string key_text(std::string_view k) { return is_bare_key(k) ? std::string(k) : toml_quoted(k); }

std::string join_key(std::string_view path, std::string_view key) {
  return path.empty() ? key_text(key) : std::string(path) + "." + key_text(key);
}

namespace {

std::string_view type_phrase(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

}  // namespace

std::string show(const toml::node& n) {
  if (const auto* s = n.as_string()) return std::string(type_phrase(n.type())) + " (" + toml_quoted(s->get()) + ")";
  if (const auto* i = n.as_integer()) return std::string(type_phrase(n.type())) + " (" + std::to_string(i->get()) + ")";
  if (const auto* b = n.as_boolean()) return std::string(type_phrase(n.type())) + " (" + (b->get() ? "true" : "false") + ")";
  if (const auto* f = n.as_floating_point()) {
    std::ostringstream o;
    o << f->get();
    return std::string(type_phrase(n.type())) + " (" + o.str() + ")";
  }
  return std::string(type_phrase(n.type()));
}
[[noreturn]] void fail(const context& ctx, unsigned line, std::string key, const std::string& problem) {
  throw config_error(ctx.source, ctx.lenient ? 0 : line, std::move(key), problem);
}

std::int64_t integer_of(const context& ctx, const toml::node& n, const std::string& key, std::int64_t min,
                        std::int64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  std::int64_t v = 0;
  if (const auto* i = n.as_integer()) {
    v = i->get();
  } else if (const auto* s = n.as_string(); s != nullptr && ctx.lenient) {
    const std::string& text = s->get();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(ctx, line_of(n), key, toml_quoted(text) + " is not an integer; allowed: " + range);
    }
  } else {
    fail(ctx, line_of(n), key, "expected an integer in " + range + ", got " + show(n));
  }
  if (v < min || v > max) fail(ctx, line_of(n), key, std::to_string(v) + " is out of range; allowed: " + range);
  return v;
}

toml::table parse_toml(const context& ctx, std::string_view text) {
  try {
    return toml::parse(text, ctx.source);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw config_error(ctx.source, at.line, "",
                       "column " + std::to_string(at.column) + ": not valid TOML: " + std::string(e.description()));
  }
}
}  // namespace ringrpc::config_detail

#pragma once
// Reading TOML with toml++: every value is checked where it is read, so an error can name its
// line and full key, and a key nobody asked for is an error rather than a silent default.
// Internal to src/ops.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "ops/config_internal.hpp"

namespace ringrpc::config_detail {

// How a value looks in "got ..." (short; tables and arrays are not spelled out).
std::string show(const toml::node& n);

inline unsigned line_of(const toml::node& n) { return n.source().begin.line; }

// An integer in [min, max]; on the command line also its decimal spelling.
std::int64_t integer_of(const context& ctx, const toml::node& n, const std::string& key, std::int64_t min,
                        std::int64_t max);

// The one of `known` a typo of `key` most likely meant (fewest single-letter edits, at most a
// third of the key's length, at least one), or empty when none is that close.
std::string_view nearest_key(std::string_view key, const std::vector<std::string_view>& known);

// Reads one table: every getter names a key the table may have; finish() rejects the others.
class table_reader {
 public:
  table_reader(context& ctx, const toml::table& t, std::string path, std::string what)
      : _ctx(ctx), _t(t), _path(std::move(path)), _what(std::move(what)) {}

  template <class T>
  void integer(std::string_view key, T& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    out = static_cast<T>(integer_of(_ctx, *n, full(key), min, max));
  }

  void millis(std::string_view key, std::chrono::milliseconds& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    out = std::chrono::milliseconds(integer_of(_ctx, *n, full(key), min, max));
  }

  void boolean(std::string_view key, bool& out) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    if (const auto* b = n->as_boolean()) {
      out = b->get();
      return;
    }
    if (const auto* s = n->as_string(); s != nullptr && _ctx.lenient) {
      if (s->get() == "true") {
        out = true;
        return;
      }
      if (s->get() == "false") {
        out = false;
        return;
      }
      fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " is not a boolean; allowed: true, false");
    }
    fail(_ctx, line_of(*n), full(key), "expected a boolean (true or false), got " + show(*n));
  }

  /// `check` returns an empty string when the value is acceptable, else why not.
  void string(std::string_view key, std::string& out,
              const std::function<std::string(std::string_view)>& check = {}) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    const auto* s = n->as_string();
    if (s == nullptr) fail(_ctx, line_of(*n), full(key), "expected a string, got " + show(*n));
    if (check) {
      if (std::string why = check(s->get()); !why.empty()) {
        fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " " + why);
      }
    }
    out = s->get();
  }

  template <class E, std::size_t N>
  void enumeration(std::string_view key, E& out, const enum_name<E> (&names)[N]) {
    const toml::node* n = take(key);
    if (n == nullptr) return;
    const auto* s = n->as_string();
    if (s == nullptr) {
      fail(_ctx, line_of(*n), full(key),
           "expected a string, one of " + list_names(names) + "; got " + show(*n));
    }
    if (!value_of(names, std::string_view(s->get()), out)) {
      fail(_ctx, line_of(*n), full(key), toml_quoted(s->get()) + " is not one of " + list_names(names));
    }
  }

  /// A sub-table, or nullptr when the key is absent.
  const toml::table* table(std::string_view key) {
    const toml::node* n = take(key);
    if (n == nullptr) return nullptr;
    const auto* t = n->as_table();
    if (t == nullptr) fail(_ctx, line_of(*n), full(key), "expected a table, got " + show(*n));
    return t;
  }

  /// Rejects every key no getter asked for, naming the ones that are allowed.
  void finish() const {
    for (const auto& [k, v] : _t) {
      if (std::find(_known.begin(), _known.end(), k.str()) != _known.end()) continue;
      std::string allowed;
      for (const auto known : _known) {
        if (!allowed.empty()) allowed += ", ";
        allowed += known;
      }
      unsigned line = k.source().begin.line;
      if (line == 0) line = line_of(v);
      const std::string_view near = nearest_key(k.str(), _known);
      const std::string hint = near.empty() ? std::string() : "did you mean " + std::string(near) + "? ";
      fail(_ctx, line, full(k.str()), "unknown key; " + hint + _what + " takes " + allowed);
    }
  }

  std::string full(std::string_view key) const { return join_key(_path, key); }

 private:
  const toml::node* take(std::string_view key) {
    _known.push_back(key);
    const toml::node* n = _t.get(key);
    if (n != nullptr) _ctx.lines.insert_or_assign(full(key), line_of(*n));
    return n;
  }

  context& _ctx;
  const toml::table& _t;
  std::string _path;
  std::string _what;
  std::vector<std::string_view> _known;
};

// The whole text as one table; a syntax error becomes a config_error with line and column.
toml::table parse_toml(const context& ctx, std::string_view text);

// Every section of `root` into `cfg` (config_sections.cpp); keys absent keep what cfg had.
void read_all(context& ctx, const toml::table& root, server_config& cfg, event_queue_names known);

}  // namespace ringrpc::config_detail

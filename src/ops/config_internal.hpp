#pragma once
// What the configuration's files share (config.cpp, config_toml.cpp, config_sections.cpp,
// config_validate.cpp, config_describe.cpp): the names of enumerated values, how keys and
// strings are spelled, and the context errors are reported in. Internal to src/ops.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "ringrpc/config.hpp"

namespace ringrpc::config_detail {

template <class E>
struct enum_name {
  std::string_view name;
  E value;
};

inline constexpr enum_name<pool_kind> pool_kinds[] = {
    {"fixed", pool_kind::fixed},
    {"cached", pool_kind::cached},
    {"limited", pool_kind::limited},
    {"eager", pool_kind::eager},
};
inline constexpr enum_name<dispatch_policy> policies[] = {
    {"all", dispatch_policy::all},
    {"direct", dispatch_policy::direct},
    {"message", dispatch_policy::message},
    {"execution", dispatch_policy::execution},
    {"connection", dispatch_policy::connection},
};
inline constexpr enum_name<fair_share_caller> fair_share_callers[] = {
    {"connection", fair_share_caller::connection},
    {"address", fair_share_caller::address},
};
inline constexpr enum_name<endpoint_concurrency> concurrencies[] = {
    {"concurrent", endpoint_concurrency::concurrent},
    {"serial", endpoint_concurrency::serial},
};
inline constexpr enum_name<log_level> log_levels[] = {
    {"trace", log_level::trace}, {"debug", log_level::debug}, {"info", log_level::info},
    {"warn", log_level::warn},   {"error", log_level::error}, {"critical", log_level::critical},
    {"off", log_level::off},
};
inline constexpr enum_name<log_format> log_formats[] = {
    {"text", log_format::text},
    {"json", log_format::json},
};

template <class E, std::size_t N>
std::string_view name_of(const enum_name<E> (&names)[N], E value) noexcept {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "unknown";
}

template <class E, std::size_t N>
bool value_of(const enum_name<E> (&names)[N], std::string_view name, E& out) noexcept {
  for (const auto& n : names) {
    if (n.name == name) {
      out = n.value;
      return true;
    }
  }
  return false;
}

template <class E, std::size_t N>
std::string list_names(const enum_name<E> (&names)[N]) {
  std::string s;
  for (const auto& n : names) {
    if (!s.empty()) s += ", ";
    s += n.name;
  }
  return s;
}

// Limits shared by the file and validate(). Where the server or the kernel has a hard limit the
// range is that limit; elsewhere it is generous, only there to catch a misplaced digit.
inline constexpr std::int64_t k_day_ms = 86'400'000;
// event_bus::add_queue takes up to 2^30, but the ring is allocated whole at start: 2^24 cells
// are 384 MiB, and 2^30 would fail later as a bare std::bad_alloc.
inline constexpr std::int64_t k_max_event_queue = std::int64_t{1} << 24;

// A TOML basic string: what a value looks like in an error message and in describe().
std::string toml_quoted(std::string_view s);
bool is_bare_key(std::string_view k);
// A key as TOML needs it written: bare when it can be, quoted otherwise.
std::string key_text(std::string_view k);
std::string join_key(std::string_view path, std::string_view key);

// Where the values come from, and what errors call it.
struct context {
  std::string source;
  // Command-line values arrive as strings; they may then stand for integers and booleans.
  bool lenient = false;
  // Full key -> line, for checks made after the whole text was read (pool references).
  std::map<std::string, unsigned, std::less<>> lines;

  unsigned line_of(std::string_view key) const {
    const auto it = lines.find(key);
    return it == lines.end() ? 0 : it->second;
  }
};

// Throws config_error. Each command-line override is parsed as a one-line document, so in
// lenient mode its "line 1" means nothing and is dropped.
[[noreturn]] void fail(const context& ctx, unsigned line, std::string key, const std::string& problem);

// Shared by the readers of [server], [admin], [pools] and [endpoints] and by cross_check.
std::string check_host(std::string_view h);
std::string check_pool_name(std::string_view name);

// Checks that need the whole config: references between sections, products of knobs.
void cross_check(const context& ctx, const server_config& cfg, event_queue_names known);

}  // namespace ringrpc::config_detail

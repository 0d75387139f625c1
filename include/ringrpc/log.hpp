#pragma once
/// \file The vocabulary of ringrpc's structured log: levels, formats and where lines go
/// (`[logging]` in the configuration file, docs/operations.md). The server logs little by
/// design: start, stop, exhausted pools and limits hit at info and above, nothing per call.

#include <cstdint>
#include <string>
#include <string_view>

#include "ringrpc/cxx20.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

enum class log_level : std::uint8_t { trace, debug, info, warn, error, critical, off };
enum class log_format : std::uint8_t { text, json };

/// Stable lower-case names ("warn", "json"), and the reverse (false for an unknown name).
std::string_view to_string(log_level l) noexcept;
std::string_view to_string(log_format f) noexcept;
bool parse_log_level(std::string_view name, log_level& out) noexcept;
bool parse_log_format(std::string_view name, log_format& out) noexcept;

/// `[logging]`
struct log_options {
  log_level level = log_level::info;
  log_format format = log_format::text;  ///< one line per event: key=value text or JSON
  std::string file;                      ///< appended to; empty = stderr
};

}  // namespace ringrpc

RINGRPC_API_END

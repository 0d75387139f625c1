#include "ringrpc/log.hpp"

namespace ringrpc {

namespace {

struct level_name {
  log_level level;
  std::string_view name;
};
constexpr level_name level_names[] = {
    {log_level::trace, "trace"}, {log_level::debug, "debug"},       {log_level::info, "info"},
    {log_level::warn, "warn"},   {log_level::error, "error"},       {log_level::critical, "critical"},
    {log_level::off, "off"},
};

}  // namespace

std::string_view to_string(log_level l) noexcept {
  for (const auto& n : level_names) {
    if (n.level == l) return n.name;
  }
  return "unknown";
}

std::string_view to_string(log_format f) noexcept { return f == log_format::json ? "json" : "text"; }

bool parse_log_level(std::string_view name, log_level& out) noexcept {
  for (const auto& n : level_names) {
    if (n.name == name) {
      out = n.level;
      return true;
    }
  }
  return false;
}

bool parse_log_format(std::string_view name, log_format& out) noexcept {
  if (name == "text") out = log_format::text;
  else if (name == "json") out = log_format::json;
  else return false;
  return true;
}

}  // namespace ringrpc

#pragma once
// Trimming of the text the load tool parses: option values, threshold expressions and HTTP
// header fields. Two kinds, because HTTP allows only spaces and tabs around a field value.

#include <cctype>
#include <string_view>

namespace ringrpc::load {

/// `s` without the spaces and tabs at either end (HTTP's optional whitespace).
inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// `s` without any white space (std::isspace: also newlines) at either end.
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace ringrpc::load

// The admin server's request parser: strict about shape (RFC 9112) because the pages need
// nothing more than a method and a path, and everything else is a client to turn away early.

#include "ops/http_request.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace ringrpc::detail {

namespace {

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

struct request_line {
  std::string_view method;
  std::string_view target;
};

// "GET /path HTTP/1.1" with single spaces (RFC 9112 3); false when it is not.
bool parse_request_line(std::string_view line, request_line& out) {
  const auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return false;
  const auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) return false;
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(out.method)) return false;
  if (out.target.empty() || out.target.front() != '/') return false;
  for (const char c : out.target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  return version == "HTTP/1.1" || version == "HTTP/1.0";
}

http_parse_result rejected(int status, std::string message, bool allow_header = false) {
  http_parse_result r;
  r.state = http_parse_result::outcome::rejected;
  r.status = status;
  r.message = std::move(message);
  r.allow_header = allow_header;
  return r;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::string_view trim_ows(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// RFC 6750 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
bool is_b64token(std::string_view t) {
  std::size_t n = 0;
  while (n < t.size() && ((t[n] >= 'A' && t[n] <= 'Z') || (t[n] >= 'a' && t[n] <= 'z') ||
                          (t[n] >= '0' && t[n] <= '9') || std::string_view("-._~+/").find(t[n]) != std::string_view::npos)) {
    ++n;
  }
  if (n == 0) return false;
  while (n < t.size() && t[n] == '=') ++n;
  return n == t.size();
}

// "Bearer <token>" with one or more spaces between (RFC 9110 11.4 allows 1*SP); "" otherwise.
std::string_view bearer_of(std::string_view value) {
  constexpr std::string_view scheme = "bearer";
  if (value.size() <= scheme.size() || !iequals(value.substr(0, scheme.size()), scheme)) return {};
  std::string_view rest = value.substr(scheme.size());
  if (rest.front() != ' ') return {};
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return is_b64token(rest) ? rest : std::string_view{};
}

http_parse_result too_large(std::size_t max_request_bytes) {
  return rejected(431, "request head larger than " + std::to_string(max_request_bytes) + " bytes");
}

}  // namespace

http_parse_result parse_http_request(std::string_view in, std::size_t max_request_bytes) {
  const auto line_end = in.find("\r\n");
  request_line rl;
  if (line_end != std::string_view::npos && !parse_request_line(in.substr(0, line_end), rl)) {
    return rejected(400, "bad request line");
  }
  const auto head_end = in.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (in.size() >= max_request_bytes) return too_large(max_request_bytes);
    return {};
  }
  if (head_end + 4 > max_request_bytes) return too_large(max_request_bytes);
  // Header lines: "name: value"; a leading space would be obsolete line folding.
  std::string_view headers = in.substr(line_end + 2, head_end - line_end - 2 + 2);
  bool has_authorization = false;
  std::string_view bearer;
  while (!headers.empty()) {
    const auto eol = headers.find("\r\n");
    const std::string_view h = headers.substr(0, eol);
    headers.remove_prefix(eol + 2);
    const auto colon = h.find(':');
    if (colon == std::string_view::npos || !is_token(h.substr(0, colon))) {
      return rejected(400, "bad header line");
    }
    if (iequals(h.substr(0, colon), "authorization")) {
      // Two would leave it open which one a proxy in front checked and which one we do.
      if (has_authorization) return rejected(400, "more than one Authorization header");
      has_authorization = true;
      bearer = bearer_of(trim_ows(h.substr(colon + 1)));
    }
  }
  if (rl.method != "GET" && rl.method != "HEAD") return rejected(405, "only GET and HEAD are served", true);
  http_parse_result r;
  r.state = http_parse_result::outcome::complete;
  r.request.has_authorization = has_authorization;
  r.request.bearer_token = bearer;
  r.request.method = rl.method;
  const auto q = rl.target.find('?');
  r.request.path = rl.target.substr(0, q);
  if (q != std::string_view::npos) r.request.query = rl.target.substr(q + 1);
  return r;
}

}  // namespace ringrpc::detail

// libFuzzer target: arbitrary bytes as what a client sent the admin server, through
// parse_http_request as admin_server's poll loop calls it: on every prefix that a read could
// end at, with the buffer capped at max_request_bytes + 1.
//
// The first byte picks max_request_bytes (small ones reach the 431 paths); the rest is the
// stream. Invariants checked (abort on violation):
//  - once a prefix gets a verdict (rejected or complete), every longer prefix gets the same
//    kind of verdict and, when complete, the same request: how the bytes were split into reads
//    never changes whether a request is served or what it asks for. (The status of a rejection
//    may: a request line whose CRLF straddles max_request_bytes is 431 or 400 depending on
//    where the read ended, and either is a fair answer.)
//  - a rejection is 400, 405 (with the Allow header) or 431;
//  - a complete request is GET or HEAD, its path starts with '/' and holds neither '?' nor
//    bytes <= ' ', and path + '?' + query gives back the target;
//  - a bearer token comes only with an Authorization header, is a b64token (RFC 6750) and is
//    bytes of the head as received.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "ops/http_request.hpp"

namespace {

using ringrpc::detail::http_parse_result;
using ringrpc::detail::parse_http_request;

void check_result(const http_parse_result& r, std::string_view in) {
  using outcome = http_parse_result::outcome;
  if (r.state == outcome::rejected) {
    FUZZ_CHECK(r.status == 400 || r.status == 405 || r.status == 431);
    FUZZ_CHECK(r.allow_header == (r.status == 405));
    FUZZ_CHECK(!r.message.empty());
  } else if (r.state == outcome::complete) {
    FUZZ_CHECK(r.request.method == "GET" || r.request.method == "HEAD");
    FUZZ_CHECK(!r.request.path.empty() && r.request.path.front() == '/');
    for (const char c : r.request.path) FUZZ_CHECK(c != '?' && static_cast<unsigned char>(c) > ' ');
    std::string target = r.request.path;
    if (in.find('?') < in.find("\r\n")) target += "?" + r.request.query;
    const std::string line_start = r.request.method + " " + target + " HTTP/1.";
    FUZZ_CHECK(in.substr(0, line_start.size()) == line_start);
    const std::string& t = r.request.bearer_token;
    if (!t.empty()) {
      FUZZ_CHECK(r.request.has_authorization);
      FUZZ_CHECK(in.find(t) != std::string_view::npos);
      const auto body = t.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
      FUZZ_CHECK(body != 0);
      if (body != std::string::npos) FUZZ_CHECK(t.find_first_not_of('=', body) == std::string::npos);
    }
  }
}

bool same_verdict(const http_parse_result& a, const http_parse_result& b) {
  return a.state == b.state && a.request.method == b.request.method &&
         a.request.path == b.request.path && a.request.query == b.request.query &&
         a.request.has_authorization == b.request.has_authorization &&
         a.request.bearer_token == b.request.bearer_token;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr std::size_t limits[] = {8 * 1024, 16, 64, 256};
  const std::size_t max_bytes = limits[data[0] % 4];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  // admin_server keeps at most this much of what arrived.
  if (stream.size() > max_bytes + 1) stream = stream.substr(0, max_bytes + 1);

  const http_parse_result whole = parse_http_request(stream, max_bytes);
  check_result(whole, stream);
  // The first prefix with a verdict is where the server answers; every prefix after it (the
  // bytes a bigger read would have brought at once) must agree.
  bool decided = false;
  http_parse_result first;
  for (std::size_t n = 0; n <= stream.size(); ++n) {
    http_parse_result r = parse_http_request(stream.substr(0, n), max_bytes);
    if (!decided && r.state != http_parse_result::outcome::incomplete) {
      check_result(r, stream.substr(0, n));
      first = std::move(r);
      decided = true;
    } else if (decided) {
      FUZZ_CHECK(same_verdict(first, r));
    }
  }
  FUZZ_CHECK(decided == (whole.state != http_parse_result::outcome::incomplete));
  return 0;
}

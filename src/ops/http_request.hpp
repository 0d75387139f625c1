#pragma once
// Parsing the head of an HTTP/1.1 request as the admin server receives it, apart from the
// sockets so that it can be fuzzed: every byte of it comes from whoever can connect.

#include <cstddef>
#include <string>
#include <string_view>

namespace ringrpc::detail {

struct http_request {
  std::string method;  ///< "GET" or "HEAD"
  std::string path;    ///< without the query, e.g. "/metrics"
  std::string query;   ///< after '?', undecoded; empty when none
  /// An `Authorization` header was sent (whatever its value).
  bool has_authorization = false;
  /// Its token when the value is `Bearer <b64token>` (scheme case-insensitive, RFC 6750 2.1);
  /// empty when absent or of another form. A secret: never put it in a log line or a page.
  std::string bearer_token;
};

/// What the bytes received so far on a connection amount to.
struct http_parse_result {
  enum class outcome {
    incomplete,  ///< no verdict yet: wait for more bytes
    rejected,    ///< answer `status` with `message` and close
    complete,    ///< `request` is a GET or HEAD to route
  };
  outcome state = outcome::incomplete;
  int status = 0;             ///< rejected: 400, 405 or 431
  std::string message;        ///< rejected: the body's text (without the newline)
  bool allow_header = false;  ///< rejected with 405: send "Allow: GET, HEAD"
  http_request request;       ///< complete
};

/// Looks at `received`, everything read so far (the caller keeps at most max_request_bytes + 1
/// of it). A bad request line is rejected as soon as its CRLF has arrived; a head that is not
/// complete within max_request_bytes is rejected with 431. Only the shape of each header line
/// is checked, except `Authorization` (http_request::bearer_token); more than one of it is 400.
http_parse_result parse_http_request(std::string_view received, std::size_t max_request_bytes);

}  // namespace ringrpc::detail

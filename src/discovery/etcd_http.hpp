#pragma once
// HTTP to the etcd gateway with libcurl: one POST with a bounded reply, or one long-lived POST
// whose reply is a stream of JSON lines (watch). Each call uses its own easy handle: these
// requests are few (leases, listings), so reusing connections is not worth shared state.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace ringrpc::discovery::detail {

// The longest reply (or stream line) read from etcd; a longer one fails the request.
inline constexpr std::size_t max_etcd_reply_bytes = std::size_t{16} << 20;

struct http_reply {
  long status = 0;
  std::string body;
  std::string error;  // empty on success (any HTTP status); else what failed, e.g. "connection refused"
};

http_reply http_post(const std::string& url, const std::string& body, std::chrono::milliseconds timeout);

// POSTs `body` and hands each line of the reply to `on_line` until it returns false, the
// stream ends or fails, or `stop` becomes true (noticed within 100 ms). Returns why it ended:
// empty when on_line or stop ended it, else the failure ("stream ended" for a clean end).
std::string http_post_stream(const std::string& url, const std::string& body,
                             const std::function<bool(std::string_view)>& on_line,
                             const std::atomic<bool>& stop, std::chrono::milliseconds connect_timeout);

}  // namespace ringrpc::discovery::detail

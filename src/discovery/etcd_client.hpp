#pragma once
// The few etcd v3 calls discovery makes, over the JSON gateway. Each returns its value or an
// error text; none throws, so callers decide how to retry.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "discovery/etcd_json.hpp"

namespace ringrpc::discovery::detail {

class etcd_client {
 public:
  /// `base_url`: "http://HOST:PORT" (a trailing '/' is ignored).
  explicit etcd_client(std::string base_url, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  parsed<lease_grant_result> grant(std::int64_t ttl_seconds) const;
  parsed<std::int64_t> keepalive(std::int64_t lease) const;  // TTL left; 0: lease gone
  parsed<std::int64_t> revoke(std::int64_t lease) const;
  parsed<std::int64_t> put(std::string_view key, std::string_view value, std::int64_t lease) const;
  parsed<std::int64_t> remove(std::string_view key) const;
  parsed<range_result> range_prefix(std::string_view prefix) const;
  /// Watches `prefix` from `start_revision`, handing each parsed message to `on_message`
  /// until it returns false, the stream fails or `stop` is set. Returns why it ended (empty
  /// when on_message or stop ended it).
  std::string watch(std::string_view prefix, std::int64_t start_revision,
                    const std::function<bool(const parsed<watch_message>&)>& on_message,
                    const std::atomic<bool>& stop) const;

  const std::string& base_url() const noexcept { return _base; }

 private:
  template <class T, class Parse>
  parsed<T> post(const char* path, const std::string& body, Parse parse) const;
  std::string _base;
  std::chrono::milliseconds _timeout;
};

}  // namespace ringrpc::discovery::detail

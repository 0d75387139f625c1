#include "discovery/etcd_client.hpp"

#include "discovery/etcd_http.hpp"

namespace ringrpc::discovery::detail {

etcd_client::etcd_client(std::string base_url, std::chrono::milliseconds timeout)
    : _base(std::move(base_url)), _timeout(timeout) {
  while (!_base.empty() && _base.back() == '/') _base.pop_back();
}

template <class T, class Parse>
parsed<T> etcd_client::post(const char* path, const std::string& body, Parse parse) const {
  const http_reply r = http_post(std::string(_base).append(path), body, _timeout);
  if (!r.error.empty()) {
    parsed<T> p;
    p.error = std::string("etcd at ").append(_base).append(": ").append(r.error);
    return p;
  }
  parsed<T> p = parse(r.body);
  if (!p && r.status != 200) p.error.append(" (HTTP ").append(std::to_string(r.status)).append(")");
  return p;
}

parsed<lease_grant_result> etcd_client::grant(std::int64_t ttl_seconds) const {
  return post<lease_grant_result>("/v3/lease/grant", lease_grant_request(ttl_seconds), parse_lease_grant);
}

parsed<std::int64_t> etcd_client::keepalive(std::int64_t lease) const {
  return post<std::int64_t>("/v3/lease/keepalive", lease_id_request(lease), parse_keepalive);
}

parsed<std::int64_t> etcd_client::revoke(std::int64_t lease) const {
  return post<std::int64_t>("/v3/lease/revoke", lease_id_request(lease), parse_header_revision);
}

parsed<std::int64_t> etcd_client::put(std::string_view key, std::string_view value, std::int64_t lease) const {
  return post<std::int64_t>("/v3/kv/put", put_request(key, value, lease), parse_header_revision);
}

parsed<std::int64_t> etcd_client::remove(std::string_view key) const {
  return post<std::int64_t>("/v3/kv/deleterange", delete_request(key), parse_header_revision);
}

parsed<range_result> etcd_client::range_prefix(std::string_view prefix) const {
  return post<range_result>("/v3/kv/range", range_request(prefix), parse_range);
}

std::string etcd_client::watch(std::string_view prefix, std::int64_t start_revision,
                               const std::function<bool(const parsed<watch_message>&)>& on_message,
                               const std::atomic<bool>& stop) const {
  const std::function<bool(std::string_view)> on_line = [&](std::string_view line) {
    return on_message(parse_watch_message(line));
  };
  std::string why = http_post_stream(std::string(_base).append("/v3/watch"), watch_request(prefix, start_revision),
                                     on_line, stop, _timeout);
  if (!why.empty()) why = std::string("etcd watch at ").append(_base).append(": ").append(why);
  return why;
}

}  // namespace ringrpc::discovery::detail

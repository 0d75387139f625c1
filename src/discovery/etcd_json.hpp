#pragma once
// The etcd v3 JSON gateway's messages: request bodies built, responses parsed. Pure functions
// (no I/O), so the parsers of outside bytes are fuzzed alone (tests/fuzz/etcd_json_fuzz.cpp).
// The gateway writes 64-bit integers as JSON strings ("revision":"12"); both spellings are
// accepted. Every parser returns an error text instead of throwing.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringrpc::discovery::detail {

struct etcd_kv {
  std::string key;    // decoded
  std::string value;  // decoded
  std::int64_t mod_revision = 0;
};

struct range_result {
  std::int64_t revision = 0;  // the store's revision the listing is of
  std::vector<etcd_kv> kvs;
};

struct watch_event {
  bool is_delete = false;
  etcd_kv kv;
};

struct watch_message {
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;  // > 0: the start revision was compacted away
  std::int64_t revision = 0;
  std::vector<watch_event> events;
  std::string cancel_reason;
};

struct lease_grant_result {
  std::int64_t id = 0;
  std::int64_t ttl = 0;
};

// Either a value or an error message (the gateway's own "error" text when it sent one).
template <class T>
struct parsed {
  std::optional<T> value;
  std::string error;
  explicit operator bool() const noexcept { return value.has_value(); }
};

// The smallest key greater than every key starting with `prefix` (etcd's range_end).
std::string prefix_range_end(std::string_view prefix);

std::string range_request(std::string_view prefix);
std::string put_request(std::string_view key, std::string_view value, std::int64_t lease);
std::string delete_request(std::string_view key);
std::string lease_grant_request(std::int64_t ttl_seconds);
std::string lease_id_request(std::int64_t lease);  // keepalive and revoke
std::string watch_request(std::string_view prefix, std::int64_t start_revision);

parsed<range_result> parse_range(std::string_view body);
parsed<lease_grant_result> parse_lease_grant(std::string_view body);
// The TTL the lease has left; 0 when etcd no longer knows the lease (expired or revoked).
parsed<std::int64_t> parse_keepalive(std::string_view body);
// A reply that carries only a header (put, delete, revoke): ok, or the gateway's error.
parsed<std::int64_t> parse_header_revision(std::string_view body);
// One line of the watch stream.
parsed<watch_message> parse_watch_message(std::string_view line);

}  // namespace ringrpc::discovery::detail

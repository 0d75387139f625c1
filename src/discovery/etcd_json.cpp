#include "discovery/etcd_json.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

#include "discovery/base64.hpp"

namespace ringrpc::discovery::detail {

namespace {

using nlohmann::json;

// An int64 the gateway wrote as a string ("12") or, from other writers, as a number. Missing
// fields are 0, as protobuf's JSON mapping omits zero values.
bool int64_field(const json& obj, const char* name, std::int64_t& out) {
  out = 0;
  const auto it = obj.find(name);
  if (it == obj.end()) return true;
  if (it->is_number_integer()) {
    out = it->get<std::int64_t>();
    return true;
  }
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  }
  return false;
}

bool bool_field(const json& obj, const char* name) {
  const auto it = obj.find(name);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

bool b64_field(const json& obj, const char* name, std::string& out) {
  out.clear();
  const auto it = obj.find(name);
  if (it == obj.end()) return true;
  if (!it->is_string()) return false;
  auto decoded = base64_decode(it->get_ref<const std::string&>());
  if (!decoded) return false;
  out = std::move(*decoded);
  return true;
}

template <class T>
parsed<T> fail(std::string why) {
  parsed<T> p;
  p.error = std::move(why);
  return p;
}

// Parses `body` as an object; a gateway error ({"error":...,"code":N}) becomes the error text.
template <class T>
bool open_object(std::string_view body, json& out, parsed<T>& result) {
  out = json::parse(body, nullptr, false);
  if (out.is_discarded() || !out.is_object()) {
    result.error = "etcd sent a reply that is not a JSON object";
    return false;
  }
  if (const auto e = out.find("error"); e != out.end()) {
    result.error = e->is_string() ? "etcd: " + e->get<std::string>() : "etcd sent an error";
    return false;
  }
  return true;
}

bool read_kv(const json& j, etcd_kv& kv) {
  if (!j.is_object()) return false;
  return b64_field(j, "key", kv.key) && b64_field(j, "value", kv.value) &&
         int64_field(j, "mod_revision", kv.mod_revision);
}

bool header_revision(const json& obj, std::int64_t& rev) {
  rev = 0;
  const auto h = obj.find("header");
  if (h == obj.end()) return true;
  return h->is_object() && int64_field(*h, "revision", rev);
}

}  // namespace

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key (etcd's convention for "to the end")
}

std::string range_request(std::string_view prefix) {
  return json{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_range_end(prefix))}}.dump();
}

std::string put_request(std::string_view key, std::string_view value, std::int64_t lease) {
  json j{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) j["lease"] = std::to_string(lease);
  return j.dump();
}

std::string delete_request(std::string_view key) { return json{{"key", base64_encode(key)}}.dump(); }

std::string lease_grant_request(std::int64_t ttl_seconds) { return json{{"TTL", std::to_string(ttl_seconds)}}.dump(); }

std::string lease_id_request(std::int64_t lease) { return json{{"ID", std::to_string(lease)}}.dump(); }

std::string watch_request(std::string_view prefix, std::int64_t start_revision) {
  return json{{"create_request",
               {{"key", base64_encode(prefix)},
                {"range_end", base64_encode(prefix_range_end(prefix))},
                {"start_revision", std::to_string(start_revision)}}}}
      .dump();
}

parsed<range_result> parse_range(std::string_view body) {
  parsed<range_result> p;
  json j;
  if (!open_object(body, j, p)) return p;
  range_result r;
  if (!header_revision(j, r.revision)) return fail<range_result>("etcd range reply: bad header");
  if (const auto kvs = j.find("kvs"); kvs != j.end()) {
    if (!kvs->is_array()) return fail<range_result>("etcd range reply: kvs is not an array");
    for (const auto& e : *kvs) {
      etcd_kv kv;
      if (!read_kv(e, kv)) return fail<range_result>("etcd range reply: a bad key-value");
      r.kvs.push_back(std::move(kv));
    }
  }
  p.value = std::move(r);
  return p;
}

parsed<lease_grant_result> parse_lease_grant(std::string_view body) {
  parsed<lease_grant_result> p;
  json j;
  if (!open_object(body, j, p)) return p;
  lease_grant_result r;
  if (!int64_field(j, "ID", r.id) || !int64_field(j, "TTL", r.ttl) || r.id == 0 || r.ttl <= 0) {
    if (const auto e = j.find("error"); e != j.end() && e->is_string()) return fail<lease_grant_result>(*e);
    return fail<lease_grant_result>("etcd lease grant reply: no lease ID or TTL");
  }
  p.value = r;
  return p;
}

parsed<std::int64_t> parse_keepalive(std::string_view body) {
  // The gateway streams keepalive replies: one {"result":{...}} object per line.
  const auto nl = body.find('\n');
  if (nl != std::string_view::npos) body = body.substr(0, nl);
  parsed<std::int64_t> p;
  json j;
  if (!open_object(body, j, p)) return p;
  const auto res = j.find("result");
  if (res == j.end() || !res->is_object()) return fail<std::int64_t>("etcd keepalive reply: no result");
  std::int64_t ttl = 0;
  if (!int64_field(*res, "TTL", ttl)) return fail<std::int64_t>("etcd keepalive reply: bad TTL");
  p.value = ttl;
  return p;
}

parsed<std::int64_t> parse_header_revision(std::string_view body) {
  parsed<std::int64_t> p;
  json j;
  if (!open_object(body, j, p)) return p;
  std::int64_t rev = 0;
  if (!header_revision(j, rev)) return fail<std::int64_t>("etcd reply: bad header");
  p.value = rev;
  return p;
}

parsed<watch_message> parse_watch_message(std::string_view line) {
  parsed<watch_message> p;
  json j;
  if (!open_object(line, j, p)) return p;
  const auto res = j.find("result");
  if (res == j.end() || !res->is_object()) return fail<watch_message>("etcd watch message: no result");
  watch_message m;
  m.created = bool_field(*res, "created");
  m.canceled = bool_field(*res, "canceled");
  if (!int64_field(*res, "compact_revision", m.compact_revision) || !header_revision(*res, m.revision)) {
    return fail<watch_message>("etcd watch message: bad revision");
  }
  if (const auto r = res->find("cancel_reason"); r != res->end() && r->is_string()) m.cancel_reason = *r;
  if (const auto evs = res->find("events"); evs != res->end()) {
    if (!evs->is_array()) return fail<watch_message>("etcd watch message: events is not an array");
    for (const auto& e : *evs) {
      if (!e.is_object()) return fail<watch_message>("etcd watch message: a bad event");
      watch_event ev;
      if (const auto t = e.find("type"); t != e.end()) {
        if (!t->is_string()) return fail<watch_message>("etcd watch message: a bad event type");
        ev.is_delete = *t == "DELETE";
      }
      const auto kv = e.find("kv");
      if (kv == e.end() || !read_kv(*kv, ev.kv)) return fail<watch_message>("etcd watch message: a bad key-value");
      m.events.push_back(std::move(ev));
    }
  }
  p.value = std::move(m);
  return p;
}

}  // namespace ringrpc::discovery::detail

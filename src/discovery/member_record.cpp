// The registration value: the contract of docs/deployment.md ("The key layout").

#include <limits>

#include <nlohmann/json.hpp>

#include "ringrpc/discovery.hpp"

namespace ringrpc::discovery {

std::string encode_member_record(const member_record& r) {
  return nlohmann::json{{"address", r.address}, {"weight", r.weight},   {"zone", r.zone},
                        {"version", r.version}, {"tls", r.tls},         {"pid", r.pid},
                        {"started_at", r.started_at}}
      .dump();
}

std::optional<member_record> decode_member_record(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  member_record r;
  const auto addr = j.find("address");
  if (addr == j.end() || !addr->is_string()) return std::nullopt;
  r.address = *addr;
  if (r.address.empty()) return std::nullopt;
  // Fields other than address are optional, so writers in other languages can start small;
  // present ones must have their type.
  if (const auto w = j.find("weight"); w != j.end()) {
    if (!w->is_number_unsigned() || w->get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
      return std::nullopt;
    }
    r.weight = w->get<std::uint32_t>();
  }
  for (const auto& [name, out] : {std::pair{"zone", &r.zone}, std::pair{"version", &r.version},
                                  std::pair{"started_at", &r.started_at}}) {
    if (const auto v = j.find(name); v != j.end()) {
      if (!v->is_string()) return std::nullopt;
      *out = *v;
    }
  }
  if (const auto t = j.find("tls"); t != j.end()) {
    if (!t->is_boolean()) return std::nullopt;
    r.tls = *t;
  }
  if (const auto p = j.find("pid"); p != j.end()) {
    if (!p->is_number_integer()) return std::nullopt;
    r.pid = p->get<std::int64_t>();
  }
  return r;
}

}  // namespace ringrpc::discovery

#include "target_etcd.hpp"

#include <stdexcept>
#include <string>

#include "ringrpc/discovery.hpp"

namespace ringrpc::load {

namespace {

[[noreturn]] void bad_etcd_url(std::string_view url, const std::string& why) {
  throw std::invalid_argument(std::string("bad target '").append(url).append("': ").append(why).append(
      " (expected etcd://HOST:PORT/SERVICE[/PATH][?prefix=/PREFIX&scheme=SCHEME])"));
}

}  // namespace

std::vector<target> resolve_etcd_endpoints(std::string_view url, std::chrono::milliseconds timeout) {
  constexpr std::string_view scheme_sep = "://";
  const auto sep = url.find(scheme_sep);
  std::string_view rest = url.substr(sep + scheme_sep.size());
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // HOST:PORT/SERVICE then the members' own path.
  const auto first = rest.find('/');
  if (first == std::string_view::npos || first + 1 == rest.size()) bad_etcd_url(url, "no service name");
  const auto second = rest.find('/', first + 1);
  const std::string_view authority = rest.substr(0, first);
  const std::string_view service = rest.substr(first + 1, second == std::string_view::npos ? std::string_view::npos
                                                                                           : second - first - 1);
  if (service.empty()) bad_etcd_url(url, "no service name");
  const std::string_view path = second == std::string_view::npos ? std::string_view{} : rest.substr(second);

  std::string inner_scheme = "ringrpc";
  std::string prefix_query;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.starts_with("prefix=")) {
      prefix_query = std::string(item);
    } else if (item.starts_with("scheme=") && item.size() > 7) {
      inner_scheme = std::string(item.substr(7));
      if (inner_scheme == "etcd") bad_etcd_url(url, "scheme=etcd would name a registry, not the members' protocol");
    } else {
      bad_etcd_url(url, std::string("unknown query '").append(item).append("' (prefix= and scheme= are known)"));
    }
  }
  std::string registry = std::string("etcd://").append(authority).append("/").append(service);
  if (!prefix_query.empty()) registry.append("?").append(prefix_query);

  std::vector<member_address> members;
  try {
    members = discovery::list_members(registry, timeout);
  } catch (const std::invalid_argument& e) {
    bad_etcd_url(url, e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot list the members of '").append(url).append("': ").append(e.what()));
  }
  if (members.empty()) {
    throw std::runtime_error(std::string("'").append(url).append("': etcd at ").append(authority).append(
        " lists no live member of service '").append(service).append("' (is a server registered? docs/deployment.md)"));
  }
  std::vector<target> out;
  out.reserve(members.size());
  for (const member_address& m : members) {
    // Each member as a URL of its own: the inner scheme's rules (a ringrpc method, a grpc
    // path) are checked once, by the parser every other target goes through.
    const bool v6 = m.host.find(':') != std::string::npos;
    std::string member_url = inner_scheme;
    member_url.append("://").append(v6 ? "[" : "").append(m.host).append(v6 ? "]" : "").append(":")
        .append(std::to_string(m.port)).append(path);
    out.push_back(parse_target(member_url));
  }
  return out;
}

}  // namespace ringrpc::load

#pragma once
// etcd:// targets of ringrpc-load: the members of a service registered in etcd
// (docs/deployment.md), listed once at start through the discovery library.
// Built only with the discovery library (meson build_discovery).

#include <chrono>
#include <string_view>
#include <vector>

#include "protocol.hpp"

namespace ringrpc::load {

/// etcd://HOST:PORT/SERVICE[/PATH][?prefix=/PREFIX&scheme=SCHEME]: SCHEME (default ringrpc)
/// is what the members speak and PATH what a SCHEME://MEMBER/PATH target would carry (the
/// ringrpc method, an HTTP path, /pkg.Service/Method). Returns one target per live member, in
/// etcd's key order. Throws std::invalid_argument for a malformed URL, std::runtime_error
/// when etcd cannot be reached or the service has no members.
std::vector<target> resolve_etcd_endpoints(std::string_view url, std::chrono::milliseconds timeout);

}  // namespace ringrpc::load

#include "engine_fail_fast.hpp"

#include <array>

#include "sniff.hpp"

namespace ringrpc::load {

namespace {

// Answers that say the request itself is wrong for this server. A run sends the same requests
// throughout, so none of these turns into success by trying again.
constexpr std::array<std::string_view, 15> hopeless_kinds = {
    "unknown_method",      "unauthenticated",        "permission_denied", "bad_request",
    "protocol",            "http_400",               "http_401",          "http_403",
    "http_404",            "http_405",               "grpc_unimplemented", "grpc_unauthenticated",
    "grpc_permission_denied", "grpc_invalid_argument", "h2_protocol_error"};

std::string hint_for(std::string_view kind, const target& t) {
  const std::string where = authority_of(t);
  if (kind == "unknown_method") {
    return where + " has no method '" + t.path + "'; `ringrpc-call " + where + " list` shows the ones it has";
  }
  if (kind == "unauthenticated" || kind == "grpc_unauthenticated" || kind == "http_401") {
    return where + " did not accept the calls' credentials (none, or a token it does not know): give one with "
                   "-H 'authorization: Bearer TOKEN' (or RINGRPC_TOKEN for ringrpc://)";
  }
  if (kind == "permission_denied" || kind == "grpc_permission_denied" || kind == "http_403") {
    return where + " knows the caller but does not allow it this call";
  }
  if (kind == "bad_request" || kind == "http_400" || kind == "grpc_invalid_argument") {
    return where + " rejects the request itself: check the payload (-s, --payload-file, --data) and --mix";
  }
  if (kind == "http_404") return where + " has no '" + t.path + "': check the URL's path";
  if (kind == "http_405") return where + " does not allow this HTTP method on '" + t.path + "': check --mix";
  if (kind == "grpc_unimplemented") return where + " does not serve '" + t.path + "': check the service and method";
  return "the replies from " + where + " break the URL's protocol (" + t.scheme + "://)";
}

}  // namespace

int hopeless_error_index(std::string_view kind) noexcept {
  for (std::size_t i = 0; i < hopeless_kinds.size(); ++i) {
    if (hopeless_kinds[i] == kind) return static_cast<int>(i);
  }
  return -1;
}

std::string_view hopeless_error_name(int index) noexcept {
  if (index < 0 || static_cast<std::size_t>(index) >= hopeless_kinds.size()) return {};
  return hopeless_kinds[static_cast<std::size_t>(index)];
}

std::string hopeless_message(std::string_view kind, std::uint64_t count, const target& t) {
  std::string m = "stopped: every answer so far was ";
  m.append(kind).append(" (").append(std::to_string(count)).append(count == 1 ? " call" : " calls");
  m.append("), which no retry can change: ").append(hint_for(kind, t));
  return m;
}

answer_watch::verdict answer_watch::observe(std::uint64_t ok, std::uint64_t hopeless, std::uint64_t other,
                                            std::int64_t elapsed_ns) const noexcept {
  if (ok > 0 || other > 0) return verdict::fine;
  if (hopeless >= enough_answers) return verdict::hopeless;
  if (hopeless > 0 && elapsed_ns >= window_ns) return verdict::hopeless;
  return verdict::watching;
}

}  // namespace ringrpc::load

// The public face of downstreams: add_downstream() records a name and a resolved address
// before start(); start_downstream_call() hands an awaited call to the calling thread's shard.
#include "server/downstream_registry.hpp"

#include <netdb.h>

#include <cstring>
#include <stdexcept>
#include <utility>

#include "seam/server_seam.hpp"
#include "server/server_core.hpp"
#include "server/shard.hpp"
#include "server/shard_downstreams.hpp"

namespace ringrpc {

std::string_view downstream::name() const noexcept {
  const auto* s = static_cast<const detail::downstream_spec*>(_spec);
  return s != nullptr ? std::string_view(s->name) : std::string_view();
}

namespace {

bool valid_name(std::string_view n) noexcept {
  if (n.empty() || n.size() > 64) return false;
  for (char ch : n) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                    ch == '-' || ch == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

downstream add_downstream(server& s, std::string name, std::string host, std::uint16_t port,
                          downstream_options options) {
  detail::server_core& core = detail::server_seam::core_of(s);
  if (core.state() != detail::server_state::configured) {
    throw std::logic_error("add_downstream('" + name + "') must come before start()");
  }
  if (!valid_name(name)) {
    throw std::invalid_argument("add_downstream: '" + name +
                                "' is not a downstream name (1 to 64 letters, digits, '.', '-', '_')");
  }
  if (port == 0) throw std::invalid_argument("add_downstream('" + name + "'): port 0");
  auto* registry = core.attachment<detail::downstream_registry>();
  if (registry == nullptr) {
    auto owned = std::make_unique<detail::downstream_registry>();
    registry = owned.get();
    core.attach(std::move(owned));
  }
  for (const auto& spec : registry->specs) {
    if (spec->name == name) throw std::invalid_argument("add_downstream: '" + name + "' was added already");
  }
  // Resolved once, here: a shard never blocks on a name lookup.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0 || found == nullptr) {
    throw std::invalid_argument("add_downstream('" + name + "'): cannot resolve '" + host + "': " +
                                (rc != 0 ? ::gai_strerror(rc) : "no address"));
  }
  auto spec = std::make_unique<detail::downstream_spec>();
  std::memcpy(&spec->address, found->ai_addr, found->ai_addrlen);
  spec->address_bytes = found->ai_addrlen;
  ::freeaddrinfo(found);
  spec->name = std::move(name);
  spec->target = host + ":" + service;
  spec->options = options;
  spec->index = static_cast<unsigned>(registry->specs.size());
  spec->core = &core;
  downstream d;
  d._spec = spec.get();
  registry->specs.push_back(std::move(spec));
  return d;
}

namespace detail {

std::uint64_t server_seam::downstream_calls(const server& s) noexcept {
  const server_core& core = core_of(s);
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < core.shard_count(); ++i) n += core.shard_at(i).downstream_calls_in_use();
  return n;
}

}  // namespace detail

namespace coro_abi {

void start_downstream_call(const downstream& d, std::string_view method, std::span<const std::byte> payload,
                           call_callback done, call_options options, resume_slot& slot) {
  const detail::downstream_spec* spec = detail::downstream_access::spec(d);
  if (spec == nullptr) throw std::logic_error("co_call: a default-constructed ringrpc::downstream names none");
  detail::shard* here = detail::shard::here();
  if (here == nullptr || &here->core() != spec->core) {
    // A hop through the shard's inbox would work, but would hide the cost this API exists to
    // avoid: off its shard, a service is reached through a client.
    throw std::logic_error("co_call: downstream '" + spec->name +
                           "' used off a shard of its server (a pool thread or a thread of yours); use a client");
  }
  detail::shard_downstreams& ds = here->downstreams();
  // Never resumed in the middle of the shard's receive: a coroutine with no home of its own
  // resumes at the end of the loop turn, as an on-shard handler's frame does.
  if (slot.home == nullptr) slot.home = ds.home();
  ds.call(*spec, method, payload, std::move(done), std::move(options));
}

}  // namespace coro_abi

}  // namespace ringrpc

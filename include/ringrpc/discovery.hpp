#pragma once
/// \file Service discovery through etcd (libringrpc_discovery, pkg-config ringrpc-discovery):
/// a server's registration under a leased key, and a channel resolver that watches a service.
///
/// etcd is reached through its v3 JSON gateway (HTTP POST /v3/..., keys and values base64)
/// with libcurl, not its gRPC API: the gateway is etcd's documented JSON API, and libgrpc++
/// would pull gRPC and protobuf into every program that embeds ringrpc.
///
/// The key layout is a contract other languages may read and write (docs/deployment.md):
///   key   PREFIX/SERVICE/HOST:PORT          (PREFIX defaults to "/ringrpc/services")
///   value {"address":"HOST:PORT","weight":1,"zone":"","version":"","tls":false,
///          "pid":1234,"started_at":"2026-12-01T18:00:00Z"}
/// attached to a lease the server keeps alive; the key vanishes when the server dies (within
/// the lease's TTL) or deregisters (at once).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/channel.hpp"
#include "ringrpc/discovery_config.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc::discovery {

/// What one key's value says about a member.
struct member_record {
  std::string address;  ///< HOST:PORT
  std::uint32_t weight = 1;
  std::string zone;
  std::string version;
  bool tls = false;
  std::int64_t pid = 0;
  std::string started_at;
};

/// The JSON value of a registration key.
std::string encode_member_record(const member_record& r);
/// Parses a value; nullopt (never a throw) for anything that is not a valid record.
std::optional<member_record> decode_member_record(std::string_view json);

/// Counters of a registration.
struct registration_stats {
  std::uint64_t registrations = 0;  ///< leases granted and keys written (the first one included)
  std::uint64_t keepalive_failures = 0;
  std::uint64_t etcd_errors = 0;     ///< requests to etcd that failed
  bool registered = false;           ///< the key is believed to be in etcd now
};

/// The etcd registration of one server, as a ringrpc::registration hook:
///   server.add_registration(std::make_shared<etcd_registration>(cfg.discovery, cfg.server.host));
/// on_started grants a lease of `lease_ttl`, writes the key and keeps the lease alive every
/// third of the TTL on a thread of its own. If etcd cannot be reached (at start or later) the
/// server serves on, and the registration retries with backoff (0.2 s doubling to 5 s), writing
/// the key again under a new lease when etcd answers; each attempt is logged and counted.
/// before_stop deletes the key, revokes the lease, then waits `deregister_grace`.
/// `server_host` is advertised with the bound port when config.advertise is empty (a
/// wildcard address such as 0.0.0.0 cannot be: on_started throws, naming advertise).
class etcd_registration final : public registration {
 public:
  etcd_registration(discovery_config config, std::string server_host);
  ~etcd_registration() override;
  void on_started(std::uint16_t port) override;
  void before_stop() noexcept override;
  void on_stopped() noexcept override;
  /// ringrpc_discovery_registrations_total, _etcd_errors_total, _keepalive_failures_total and
  /// the gauge ringrpc_discovery_registered, each labelled with the service.
  std::string metrics_text() const override;
  registration_stats stats() const;
  /// The key this registration writes (empty before on_started).
  std::string key() const;

 private:
  struct state;
  std::unique_ptr<state> _s;
};

/// A resolver for "etcd://HOST:PORT/service" (optionally "?prefix=/my/prefix"): lists
/// PREFIX/service/, then watches it. A compacted watch lists again and watches on from the new
/// revision; a lost connection is retried with backoff, the last membership kept meanwhile.
/// Throws std::invalid_argument for a malformed target.
std::shared_ptr<resolver> make_etcd_resolver(std::string_view target);

/// The members of an "etcd://HOST:PORT/service[?prefix=/p]" target as etcd lists them now:
/// one listing, no watch (ringrpc-load spreads its connections over them). Values that are not
/// member records are logged and skipped. Throws std::invalid_argument for a malformed target,
/// std::runtime_error (naming etcd's address and what failed) when etcd does not answer within
/// `timeout` or answers with an error. An empty list is no error.
std::vector<member_address> list_members(std::string_view target,
                                         std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

/// channel::create with etcd:// targets too.
channel open_channel(std::string_view target, channel_options options = {});

}  // namespace ringrpc::discovery

RINGRPC_API_END

#pragma once
/// \file A server run from a configuration file, with its admin HTTP server (library
/// ringrpc-ops, pkg-config `ringrpc-ops`). The server itself is the core's ringrpc::server;
/// this adds what an operator's file asks for around it.
///
///     auto srv = ringrpc::make_server(ringrpc::load_config_file("ringrpc.toml"));
///     ringrpc::add_builtin_methods(*srv);
///     srv->start();
///     std::printf("admin pages on port %u\n", unsigned{ringrpc::admin_port(*srv)});
///     srv->wait(ringrpc::wait_signals::stop);

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/authorizer.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// Everything from a configuration file: the server options (with the tokens of
/// `[auth] tokens_file`, read now), the pools, per-endpoint options (they replace what
/// register_endpoint is given for that name, so the operator's file wins), the admin server,
/// the event queues' capacities and logging (log configuration is process-wide). Throws
/// config_error when `config` is not valid or a tokens file cannot be read.
std::unique_ptr<server> make_server(const server_config& config);

/// The admin HTTP server's bound port; 0 when it is disabled or `s` did not come from
/// make_server. Valid after start().
std::uint16_t admin_port(const server& s) noexcept;

/// Replaces the tokens the admin pages accept (admin_options::tokens_file) while running, as
/// server::replace_bearer_tokens does for calls. Any thread. Throws std::invalid_argument on an
/// empty list, std::logic_error when the admin server is not enabled or was not configured
/// with tokens (turning the check on or off takes a restart).
void replace_admin_tokens(server& s, std::vector<bearer_token> tokens);

/// The /metrics page of `s`, any server (made by make_server or not): every metric in the
/// Prometheus text exposition format, with the registration hook's lines
/// (server::add_registration).
std::string metrics_text(const server& s);

}  // namespace ringrpc

RINGRPC_API_END

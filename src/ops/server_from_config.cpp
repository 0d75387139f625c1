// The members of ringrpc::server that belong to libringrpc_ops: a server built from a
// configuration file (with its admin server), and the metrics page. They live here, not in the
// core, so an embedder who uses neither links neither TOML nor JSON.

#include "ringrpc/config.hpp"
#include "ringrpc/server.hpp"

#include <stdexcept>

#include "log/log.hpp"
#include "ops/config_ineffective.hpp"
#include "ops/status_pages.hpp"
#include "server/registration_attachment.hpp"
#include "server/server_core.hpp"

namespace ringrpc {

namespace {

// The server options with the tokens of [auth] tokens_file added (read now, at construction).
server_options with_tokens_file(const server_config& config) {
  server_options o = config.server;
  if (!config.auth.tokens_file.empty()) {
    for (auto& t : load_bearer_tokens(config.auth.tokens_file)) o.bearer_tokens.push_back(std::move(t));
  }
  return o;
}

}  // namespace

server::server(const server_config& config)
    : _core(std::make_unique<detail::server_core>(with_tokens_file(config))) {
  validate(config);
  if (config.admin.enabled && config.admin.tls && config.server.tls == nullptr) {
    throw config_error("configuration", 0, "admin.tls",
                       "is true but the server has no record layer: set server_options::tls "
                       "(ringrpc::tls_context::server(config.tls), library ringrpc-tls)");
  }
  log::configure(config.logging);
  config_detail::warn_ineffective(config_detail::ineffective_keys(config));
  for (const auto& [name, p] : config.pools) _core->endpoints().add_pool(name, p);
  for (const auto& [name, e] : config.endpoints) _core->set_endpoint_override(name, e);
  _core->set_event_log(config.events.capacity_of("log"), config.logging.level,
                       config.events.warning_interval);
  if (config.admin.enabled) _core->attach(std::make_unique<detail::admin_pages>(*_core, config));
}

std::uint16_t server::admin_port() const noexcept {
  const auto* admin = _core->attachment<detail::admin_pages>();
  return admin != nullptr ? admin->port() : 0;
}

void server::replace_admin_tokens(std::vector<bearer_token> tokens) {
  auto* admin = _core->attachment<detail::admin_pages>();
  if (admin == nullptr) throw std::logic_error("replace_admin_tokens(): the admin server is not enabled");
  admin->replace_tokens(std::move(tokens));
}

std::string server::metrics_text() const {
  std::string text = detail::metrics_text(*_core);
  if (const auto* reg = _core->attachment<detail::registration_attachment>()) text += reg->hook().metrics_text();
  return text;
}

}  // namespace ringrpc

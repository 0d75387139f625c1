// ringrpc/ops.hpp: a server built from a configuration file (with its admin server), and the
// metrics page. They live here, not in the core, so an embedder who uses neither links neither
// TOML nor JSON; they reach the server through the seam the server module publishes for ops
// (seam/server_seam.hpp).

#include "ringrpc/ops.hpp"

#include <stdexcept>

#include "log/log.hpp"
#include "ops/config_ineffective.hpp"
#include "ops/status_pages.hpp"
#include "seam/server_seam.hpp"

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

std::unique_ptr<server> make_server(const server_config& config) {
  using detail::server_seam;
  auto s = std::make_unique<server>(with_tokens_file(config));
  validate(config);
  if (config.admin.enabled && config.admin.tls && config.server.tls == nullptr) {
    throw config_error("configuration", 0, "admin.tls",
                       "is true but the server has no record layer: set server_options::tls "
                       "(ringrpc::tls_context::server(config.tls), library ringrpc-tls)");
  }
  log::configure(config.logging);
  config_detail::warn_ineffective(config_detail::ineffective_keys(config));
  for (const auto& [name, p] : config.pools) s->add_pool(name, p);
  for (const auto& [name, e] : config.endpoints) server_seam::set_endpoint_override(*s, name, e);
  server_seam::set_event_log(*s, config.events.capacity_of("log"), config.logging.level,
                             config.events.warning_interval);
  if (config.admin.enabled) server_seam::attach(*s, std::make_unique<detail::admin_pages>(*s, config));
  return s;
}

std::uint16_t admin_port(const server& s) noexcept {
  const auto* admin = detail::server_seam::part<detail::admin_pages>(s);
  return admin != nullptr ? admin->port() : 0;
}

void replace_admin_tokens(server& s, std::vector<bearer_token> tokens) {
  auto* admin = detail::server_seam::part<detail::admin_pages>(s);
  if (admin == nullptr) throw std::logic_error("replace_admin_tokens(): the admin server is not enabled");
  admin->replace_tokens(std::move(tokens));
}

std::string metrics_text(const server& s) {
  return detail::metrics_text(s) + detail::server_seam::registration_metrics_text(s);
}

}  // namespace ringrpc

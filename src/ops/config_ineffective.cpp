#include "ops/config_ineffective.hpp"

#include <algorithm>

#include "log/log.hpp"

namespace ringrpc::config_detail {

std::vector<ineffective_key> ineffective_keys(const server_config& cfg) {
  std::vector<ineffective_key> out;
  if (!cfg.admin.enabled) {
    // Compared with the defaults: a key set to its default value changes nothing either way.
    const admin_options defaults;
    const std::string fix = "[admin] enabled is false, so no admin server listens; set enabled = true";
    if (cfg.admin.port != defaults.port) {
      out.push_back({"admin.port", std::string("port ").append(std::to_string(cfg.admin.port)).append(" is ignored: ").append(fix)});
    }
    if (cfg.admin.host != defaults.host) {
      out.push_back({"admin.host", std::string("host ").append(cfg.admin.host).append(" is ignored: ").append(fix)});
    }
    if (cfg.admin.tls) out.push_back({"admin.tls", std::string("tls = true is ignored: ").append(fix)});
    if (!cfg.admin.tokens_file.empty()) {
      out.push_back({"admin.tokens_file", std::string("the tokens file is not read: ").append(fix)});
    }
  }
  return out;
}

std::vector<ineffective_key> unregistered_endpoint_keys(const server_config& cfg,
                                                        const std::vector<std::string>& registered) {
  std::vector<ineffective_key> out;
  std::string names;
  for (const auto& r : registered) {
    if (!names.empty()) names += ", ";
    names += r;
  }
  for (const auto& [name, options] : cfg.endpoints) {
    if (std::find(registered.begin(), registered.end(), name) != registered.end()) continue;
    out.push_back({std::string("endpoints.").append(name),
                   std::string("no endpoint named '").append(name).append("' is registered, so its options apply to nothing (endpoints: ").append(names).append(")")});
  }
  return out;
}

void warn_ineffective(const std::vector<ineffective_key>& keys) {
  for (const auto& k : keys) log::warn("config_key_ignored", {{"key", k.key}, {"msg", k.why}});
}

}  // namespace ringrpc::config_detail

#pragma once
// Configuration keys that are valid but do nothing where they are: `[admin] port` while the
// admin server is disabled, `[endpoints.NAME]` for an endpoint the program never registers. The
// configuration is still usable, so these are warnings naming the key, not config_errors.

#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/config.hpp"

namespace ringrpc::config_detail {

struct ineffective_key {
  std::string key;  ///< e.g. "admin.port", "endpoints.orders"
  std::string why;  ///< one line: why it does nothing and what would make it count
};

/// Keys of `cfg` that no server made from it can use: admin.port and admin.host with
/// admin.enabled false.
std::vector<ineffective_key> ineffective_keys(const server_config& cfg);

/// `[endpoints.NAME]` tables whose NAME is not in `registered` (the endpoints a program
/// registers; `registered` also names them in the message).
std::vector<ineffective_key> unregistered_endpoint_keys(const server_config& cfg,
                                                        const std::vector<std::string>& registered);

/// Logs each as a warn event `config_key_ignored key=... msg=...`.
void warn_ineffective(const std::vector<ineffective_key>& keys);

}  // namespace ringrpc::config_detail

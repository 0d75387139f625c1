#pragma once
// The pages of a running server as the admin HTTP server serves them, built on the admin thread
// from the server's public accessors and the seam it publishes for ops (seam/server_seam.hpp):
// ops reads the server, the server never calls ops.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "auth/token_table.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/server.hpp"
#include "seam/server_seam.hpp"

namespace ringrpc::detail {

class metrics_snapshot;
class admin_server;

void fill_metrics(const server& s, metrics_snapshot& out);
std::string metrics_text(const server& s);  ///< Prometheus text exposition format
std::string metrics_json(const server& s);
/// Version, state, uptime, the configuration in effect (`given` with the server's resolved
/// options; null: the options alone), endpoints and pools.
std::string status_json(const server& s, const server_config* given);
std::string connections_json(const server& s);

/// The admin HTTP server as a part of a server: started once the listener is up, stopped after
/// everything else, so /readyz says "draining" until the very end.
class admin_pages final : public server_part {
 public:
  /// Reads admin.tokens_file (config_error naming the file, or one without tokens).
  admin_pages(const server& s, server_config config);
  ~admin_pages() override;
  void start() override;
  void stop() noexcept override;
  std::uint16_t port() const noexcept;
  /// ringrpc::replace_admin_tokens.
  void replace_tokens(std::vector<bearer_token> tokens);

 private:
  const server& _server;
  const server_config _config;  // as given, for /status
  token_table _tokens;          // empty: the pages are open
  std::unique_ptr<admin_server> _admin;
};

}  // namespace ringrpc::detail

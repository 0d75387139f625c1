// A client connection becomes a TLS one before the loop sees it.
#include <cerrno>
#include <system_error>

#include "client/client_loop.hpp"
#include "client/tls_client_link.hpp"

namespace ringrpc::detail {

void attach_tls(client_conn& c, record_layer& layer, const std::string& host) {
  auto link = std::make_unique<tls_client_link>();
  link->session = layer.new_client_session(host);
  if (!link->session) {
    throw std::system_error(EINVAL, std::system_category(),
                            "TLS to " + host + ": the record layer makes no client sessions");
  }
  c.tls = std::move(link);
}

}  // namespace ringrpc::detail

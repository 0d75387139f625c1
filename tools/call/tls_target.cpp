#include "tls_target.hpp"

#include <stdexcept>

#ifdef RINGRPC_HAVE_TLS
#include "ringrpc/tls.hpp"
#endif

namespace ringrpc::tools {

bool take_scheme(std::string& target) {
  bool tls = false;
  if (target.starts_with("ringrpcs://")) {
    tls = true;
    target.erase(0, 11);
  } else if (target.starts_with("ringrpc://")) {
    target.erase(0, 10);
  }
  if (!target.empty() && target.back() == '/') target.pop_back();
  return tls;
}

std::shared_ptr<record_layer> make_client_tls([[maybe_unused]] const tls_flags& flags) {
#ifdef RINGRPC_HAVE_TLS
  tls_client_options o;
  o.ca_file = flags.cacert;
  o.cert_file = flags.cert;
  o.key_file = flags.key;
  o.insecure = flags.insecure;
  return tls_context::client(o);
#else
  throw std::runtime_error("this ringrpc-call was built without TLS (meson -Dtls=enabled)");
#endif
}

}  // namespace ringrpc::tools

#include "tls_target.hpp"

#include <stdexcept>

#ifdef RINGRPC_HAVE_TLS
#include "ringrpc/tls.hpp"
#endif

namespace ringrpc::tools {

bool take_scheme(std::string& target) {
  const auto sep = target.find("://");
  if (sep == std::string::npos) return false;
  const std::string scheme = target.substr(0, sep);
  if (scheme != "ringrpc" && scheme != "ringrpcs") {
    std::string hint = "ringrpc-call speaks ringrpc only: give HOST:PORT, ringrpc://HOST:PORT or ringrpcs://HOST:PORT";
    if (scheme == "http" || scheme == "https" || scheme == "redis" || scheme == "rediss" || scheme == "h2c" ||
        scheme == "h2" || scheme == "grpc" || scheme == "grpcs") {
      hint += " (ringrpc-load can load " + scheme + ":// servers)";
    }
    throw std::invalid_argument("'" + scheme + "://' is not a scheme of ringrpc-call; " + hint);
  }
  target.erase(0, sep + 3);
  if (!target.empty() && target.back() == '/') target.pop_back();
  if (const auto slash = target.find('/'); slash != std::string::npos) {
    throw std::invalid_argument("'" + scheme + "://" + target + "': a ringrpc-call address has no path; the method is an " +
                                "argument: ringrpc-call " + scheme + "://" + target.substr(0, slash) + " call " +
                                target.substr(slash + 1));
  }
  return scheme == "ringrpcs";
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

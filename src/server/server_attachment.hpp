#pragma once
// The seam through which parts that are not the RPC core live and die with a server, without
// the core knowing them: the registration hook, and the parts libringrpc_ops adds through
// seam/server_seam.hpp (the admin HTTP server), held together by one attachment.

namespace ringrpc::detail {

class server_attachment {
 public:
  virtual ~server_attachment() = default;
  /// Once the listener is up and before start() returns; a throw fails start().
  virtual void start() = 0;
  /// After every connection is closed and every thread of the core has been joined.
  virtual void stop() noexcept = 0;
};

}  // namespace ringrpc::detail

// The reader's dispatch skips the call guard for calls that need none of its checks (no
// metadata, no tokens, no authorizer), also on connections with a rare part (every TLS one,
// any that sent a cancel): those calls must still carry the connection's identity, and a
// plaintext connection's calls none. Real TLS server and clients over loopback.
#include <gtest/gtest.h>

#include <string>

#include "ringrpc/call_context.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/tls.hpp"
#include "tls/test_certs.hpp"

namespace {

using ringrpc::test::files;

TEST(guard_path, calls_without_checks_still_carry_the_tls_identity) {
  ringrpc::server_options o;
  o.readers = 1;
  o.handlers = 1;
  o.tls = ringrpc::tls_context::server(ringrpc::test::server_tls(true));
  ringrpc::server srv(o);  // no authorizer, no tokens: the guard has nothing to check
  srv.add_method("whoami", [](ringrpc::call_context& ctx) {
    const ringrpc::peer_identity* p = ctx.peer();
    ctx.reply(p == nullptr ? std::string("nobody") : p->subject);
  });
  srv.start();

  ringrpc::tls_client_options ct;
  ct.ca_file = files()("ca.pem");
  ct.cert_file = files()("client.pem");
  ct.key_file = files()("client.key");
  ringrpc::client_options co;
  co.tls = ringrpc::tls_context::client(ct);
  auto c = ringrpc::client::connect("127.0.0.1", srv.tls_port(), co);
  for (int i = 0; i < 3; ++i) {  // the second and later calls take the cached method slot
    const auto who = c.call("whoami", std::string_view(""));
    ASSERT_TRUE(who.ok()) << who.message;
    EXPECT_EQ(who.payload_string(), "CN=client-1");
  }
  auto plain = ringrpc::client::connect("127.0.0.1", srv.port());
  const auto nobody = plain.call("whoami", std::string_view(""));
  ASSERT_TRUE(nobody.ok()) << nobody.message;
  EXPECT_EQ(nobody.payload_string(), "nobody");
}

}  // namespace

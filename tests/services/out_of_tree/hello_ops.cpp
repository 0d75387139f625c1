// The ops library through pkg-config ringrpc-ops: a server made from TOML text, with its
// admin pages, answering the built-in echo; every declaration of ringrpc/ops.hpp. Exit codes as
// hello.cpp.
#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include <ringrpc/client.hpp>
#include <ringrpc/config.hpp>
#include <ringrpc/ops.hpp>
#include <ringrpc/server.hpp>

int main() {
  try {
    const ringrpc::server_config cfg = ringrpc::parse_config(
        "[server]\nhost = \"127.0.0.1\"\nport = 0\n[admin]\nenabled = true\nhost = \"127.0.0.1\"\nport = 0\n",
        "hello_ops.toml");
    const std::unique_ptr<ringrpc::server> made = ringrpc::make_server(cfg);
    ringrpc::server& server = *made;
    ringrpc::add_builtin_methods(server);
    server.start();
    auto client = ringrpc::client::connect("127.0.0.1", server.port());
    ringrpc::call_options bounded;
    bounded.timeout = std::chrono::seconds(5);
    const ringrpc::call_result r = client.call("echo", std::string_view("ping"), bounded);
    const bool admin = ringrpc::admin_port(server) != 0;
    const bool metrics = ringrpc::metrics_text(server).find("ringrpc_rpc_calls_received_total 1") != std::string::npos;
    // The pages were configured without tokens: turning them on takes a restart.
    bool tokens_refused = false;
    try {
      ringrpc::replace_admin_tokens(server, {{"admin-token", "operator", {}}});
    } catch (const std::logic_error&) {
      tokens_refused = true;
    }
    server.stop();
    if (!r.ok() || r.payload_string() != "ping" || !admin || !metrics || !tokens_refused) {
      std::fprintf(stderr, "hello_ops: unexpected: %s admin=%d metrics=%d tokens_refused=%d\n", r.message.c_str(),
                   admin ? 1 : 0, metrics ? 1 : 0, tokens_refused ? 1 : 0);
      return 1;
    }
    std::printf("hello_ops: echo ok, admin was on\n");
    return 0;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "hello_ops: %s\n", e.what());
    const int err = e.code().value();
    return err == ENOSYS || err == EPERM || err == EACCES ? 77 : 1;
  }
}

// The ops library through pkg-config ringrpc-ops: a server made from TOML text, with its
// admin pages, answering the built-in echo. Exit codes as hello.cpp.
#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>

#include <ringrpc/client.hpp>
#include <ringrpc/config.hpp>
#include <ringrpc/server.hpp>

int main() {
  try {
    const ringrpc::server_config cfg = ringrpc::parse_config(
        "[server]\nhost = \"127.0.0.1\"\nport = 0\n[admin]\nenabled = true\nhost = \"127.0.0.1\"\nport = 0\n",
        "hello_ops.toml");
    ringrpc::server server(cfg);
    ringrpc::add_builtin_methods(server);
    server.start();
    auto client = ringrpc::client::connect("127.0.0.1", server.port());
    ringrpc::call_options bounded;
    bounded.timeout = std::chrono::seconds(5);
    const ringrpc::call_result r = client.call("echo", std::string_view("ping"), bounded);
    const bool admin = server.admin_port() != 0;
    server.stop();
    if (!r.ok() || r.payload_string() != "ping" || !admin) {
      std::fprintf(stderr, "hello_ops: unexpected: %s admin=%d\n", r.message.c_str(), admin ? 1 : 0);
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

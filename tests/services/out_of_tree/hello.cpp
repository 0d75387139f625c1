// A program that knows ringrpc only through its installed headers and pkg-config (or a meson
// wrap): a server and a client in one process over 127.0.0.1. Exit 0 on the expected reply, 77
// when io_uring is unavailable here (the test is then skipped), 1 otherwise.
#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>

#include <ringrpc/client.hpp>
#include <ringrpc/server.hpp>
#include <ringrpc/version.hpp>

int main() {
  try {
    ringrpc::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    ringrpc::server server(options);
    server.add_method("greet", [](ringrpc::call_context& call) {
      std::string name(reinterpret_cast<const char*>(call.payload().data()), call.payload().size());
      call.reply(std::string("hello, ").append(name));
    });
    server.start();
    auto client = ringrpc::client::connect("127.0.0.1", server.port());
    ringrpc::call_options bounded;
    bounded.timeout = std::chrono::seconds(5);
    const ringrpc::call_result r = client.call("greet", std::string_view("out of tree"), bounded);
    server.stop();
    if (!r.ok() || r.payload_string() != "hello, out of tree") {
      std::fprintf(stderr, "hello: unexpected reply: %s\n", r.message.c_str());
      return 1;
    }
    std::printf("hello: %s (ringrpc %s)\n", std::string(r.payload_string()).c_str(),
                std::string(ringrpc::version()).c_str());
    return 0;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    const int err = e.code().value();
    return err == ENOSYS || err == EPERM || err == EACCES ? 77 : 1;
  }
}

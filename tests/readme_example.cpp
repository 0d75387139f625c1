#include <cstdio>
#include <string>

#include <ringrpc/client.hpp>
#include <ringrpc/server.hpp>

int main() {
  ringrpc::server_options options;
  options.port = 0;  // any free port; server.port() tells which
  ringrpc::server server(options);
  server.add_method("greet", [](ringrpc::call_context& call) {
    std::string name(reinterpret_cast<const char*>(call.payload().data()), call.payload().size());
    call.reply("hello, " + name);
  });
  server.start();

  auto client = ringrpc::client::connect("127.0.0.1", server.port());
  ringrpc::call_result r = client.call("greet", std::string_view("ringrpc"));
  if (!r.ok()) {
    std::fprintf(stderr, "call failed: %s\n", r.message.c_str());
    return 1;
  }
  std::printf("%s\n", std::string(r.payload_string()).c_str());  // hello, ringrpc
  server.stop();
}

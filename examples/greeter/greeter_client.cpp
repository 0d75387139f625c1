// Calls Greeter.SayHello through the generated stub: greeter_client PORT NAME
#include <cstdio>
#include <cstdlib>

#include <ringrpc/client.hpp>

#include "greeter_ringrpc.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: greeter_client PORT NAME\n");
    return 2;
  }
  auto client = ringrpc::client::connect("127.0.0.1", static_cast<std::uint16_t>(std::atoi(argv[1])));
  example::Greeter::stub greeter(client);

  flatbuffers::FlatBufferBuilder fbb;
  ringrpc::call_options options;
  options.timeout = std::chrono::seconds(2);
  const auto reply = greeter.SayHello(fbb, example::CreateHelloRequestDirect(fbb, argv[2]), options);
  if (!reply.ok()) {
    std::fprintf(stderr, "SayHello failed: %s\n", reply.error().describe().c_str());
    return 1;
  }
  std::printf("%s\n", flatbuffers::GetCstring(reply->message()));  // "" when absent
}

#include <cstdio>
#include <memory>
#include <string>

#include <ringrpc/server.hpp>
#include <ringrpc/typed_stream.hpp>

#include "greeter_ringrpc.hpp"

using namespace example;

// One handler per stream: "hello, NAME" for each name, in order.
class greetings final : public ringrpc::typed_stream_handler<HelloRequest, HelloReply> {
 public:
  void on_message(ringrpc::typed_server_stream<HelloReply>& stream, const HelloRequest& request) override {
    flatbuffers::FlatBufferBuilder fbb;
    const std::string text = "hello, " + (request.name() ? request.name()->str() : std::string());
    // write() never blocks: `would_block` once the client's credit is used up; a handler that
    // may outrun its client keeps the reply for on_writable(), or pause_reading()s.
    stream.write(fbb, CreateHelloReplyDirect(fbb, text.c_str()));
  }
  void on_half_close(ringrpc::typed_server_stream<HelloReply>& stream) override { stream.finish(); }
};

class greeter final : public Greeter::service {
 public:
  std::unique_ptr<ringrpc::typed_stream_handler<HelloRequest, HelloReply>> Greetings(
      ringrpc::typed_server_stream<HelloReply>&) override {
    return std::make_unique<greetings>();
  }
};

int main() {
  ringrpc::server_options options;
  options.port = 0;
  ringrpc::server server(options);
  ringrpc::register_service(server, std::make_shared<greeter>());  // Greetings too
  server.start();

  ringrpc::client client = ringrpc::client::connect("127.0.0.1", server.port());
  auto stream = Greeter::stub(client).Greetings();
  flatbuffers::FlatBufferBuilder fbb;
  for (const char* name : {"ada", "linus"}) stream.write_wait(fbb, CreateHelloRequestDirect(fbb, name));
  stream.half_close();
  int replies = 0;
  while (auto reply = stream.read()) {
    if (!reply->ok()) return std::fprintf(stderr, "%s\n", reply->error().describe().c_str()), 1;
    std::printf("%s\n", (*reply)->message()->c_str());  // hello, ada / hello, linus
    ++replies;
  }
  const ringrpc::call_result end = stream.finish();
  server.stop();
  return end.ok() && replies == 2 ? 0 : 1;
}

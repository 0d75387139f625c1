// A server for the Greeter service of greeter.fbs, with reflection so ringrpc-call can call
// it without the schema:
//
//   greeter_server 7000 &
//   ringrpc-call 127.0.0.1:7000 call Greeter.SayHello -d '{"name": "ringrpc"}'
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <ringrpc/reflection.hpp>
#include <ringrpc/server.hpp>

#include "greeter_ringrpc.hpp"

namespace {

class greeter final : public example::Greeter::service {
 public:
  ringrpc::result<example::HelloReply> SayHello(ringrpc::call_context&, const example::HelloRequest& request) override {
    // The request has been verified, but fields may still be absent.
    if (!request.name() || request.name()->size() == 0) {
      return ringrpc::rpc_error(ringrpc::status::bad_request, "name is empty");
    }
    flatbuffers::FlatBufferBuilder fbb;
    return {fbb, example::CreateHelloReplyDirect(fbb, ("hello, " + request.name()->str()).c_str())};
  }
};

}  // namespace

int main(int argc, char** argv) {
  ringrpc::server_options options;
  options.port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 0);
  ringrpc::server server(options);
  ringrpc::register_service(server, std::make_shared<greeter>());
  ringrpc::add_reflection(server, {example::Greeter::schema()});

  // Block the stop signals before any thread starts, so only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server.start();
  std::printf("listening on 127.0.0.1:%u\n", server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
}

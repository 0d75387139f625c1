// A server for the Greeter service of greeter.fbs, with reflection so ringrpc-call can call
// it without the schema:
//
//   greeter_server 7000 &
//   ringrpc-call 127.0.0.1:7000 call Greeter.SayHello -d '{"name": "ringrpc"}'
//   printf '{"name": "ada"}\n' | ringrpc-call 127.0.0.1:7000 call Greeter.Greetings --stdin
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <ringrpc/reflection.hpp>
#include <ringrpc/server.hpp>
#include <ringrpc/typed_stream.hpp>

#include "greeter_ringrpc.hpp"

namespace {

// Greetings, a bidi stream: "hello, NAME" for each name, in order. A reply without credit waits
// here, and reading pauses until on_writable() sends it: a client that never reads holds back.
class greetings final : public ringrpc::typed_stream_handler<example::HelloRequest, example::HelloReply> {
 public:
  using stream = ringrpc::typed_server_stream<example::HelloReply>;
  void on_message(stream& s, const example::HelloRequest& request) override {
    _waiting = "hello, " + (request.name() ? request.name()->str() : std::string());
    if (!send(s)) s.raw().pause_reading();
  }
  void on_writable(stream& s) override {
    if (!_waiting.empty() && send(s)) s.raw().resume_reading();
  }
  void on_half_close(stream& s) override { s.finish(); }  // after every reply went out

 private:
  bool send(stream& s) {
    flatbuffers::FlatBufferBuilder fbb;
    if (s.write(fbb, example::CreateHelloReplyDirect(fbb, _waiting.c_str())) != ringrpc::write_result::ok) return false;
    _waiting.clear();
    return true;
  }
  std::string _waiting;
};

class greeter final : public example::Greeter::service {
 public:
  std::unique_ptr<ringrpc::typed_stream_handler<example::HelloRequest, example::HelloReply>> Greetings(
      ringrpc::typed_server_stream<example::HelloReply>&) override {
    return std::make_unique<greetings>();
  }
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

// A server of gen_test.fbs's services (Streamer's typed streams too) with reflection, for the command-line tests
// (call_cli_test.sh): prints "listening on 127.0.0.1:PORT", serves until SIGTERM/SIGINT.
//   gen_test_server [--no-reflection]
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gen_test_ringrpc.hpp"
#include "ringrpc/reflection.hpp"
#include "ringrpc/server.hpp"
#include "streamer_service.hpp"

namespace {

using namespace ringrpc;
using namespace ringrpc::test;

class test_service final : public TestService::service {
 public:
  result<EchoReply> Echo(call_context&, const EchoRequest& req) override {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<double> values;
    if (req.values()) values.assign(req.values()->begin(), req.values()->end());
    return {fbb, CreateEchoReplyDirect(fbb, req.text() ? req.text()->c_str() : nullptr, req.number(), req.point(),
                                       req.color(), req.values() ? &values : nullptr, 1)};
  }
  result<EchoReply> Fail(call_context&, const FailRequest& req) override {
    return rpc_error(static_cast<status>(req.code()), req.message() ? req.message()->str() : std::string());
  }
  result<EchoReply> Sleep(call_context&, const SleepRequest& req) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(req.ms()));
    flatbuffers::FlatBufferBuilder fbb;
    return {fbb, CreateEchoReply(fbb)};
  }
};

class counter final : public Counter::service {};

}  // namespace

int main(int argc, char** argv) {
  const bool reflection = !(argc > 1 && std::strcmp(argv[1], "--no-reflection") == 0);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  server_options o;
  o.readers = 1;
  o.handlers = 2;
  server s(o);
  register_service(s, std::make_shared<test_service>());
  register_service(s, std::make_shared<counter>());
  register_service(s, std::make_shared<streamer_service>());
  if (reflection) add_reflection(s, {TestService::schema(), Counter::schema(), Streamer::schema()});
  s.start();
  std::printf("listening on 127.0.0.1:%u\n", s.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  s.stop();
}

// A real gRPC server (libgrpc++, generated code from echo.proto) for ringrpc-load's grpc://
// tests and bench/client_cpu_h2.sh: Echo.Say answers with the request's text and blob, or fails
// with the status code the request names. Listens on 127.0.0.1 on a port of the kernel's
// choosing, prints "listening on 127.0.0.1:PORT", and on SIGTERM or SIGINT prints what it served
// ("served CALLS calls, REQUEST_BYTES request bytes", "distinct texts N") and exits.
// Usage: grpc_echo_server [THREADS]
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "echo.grpc.pb.h"

namespace {

std::atomic<unsigned long long> calls{0};
std::atomic<unsigned long long> request_bytes{0};
std::mutex texts_mutex;
std::set<std::string> texts;

class echo_service final : public ringtest::Echo::Service {
  grpc::Status Say(grpc::ServerContext*, const ringtest::EchoRequest* request, ringtest::EchoReply* reply) override {
    calls.fetch_add(1, std::memory_order_relaxed);
    request_bytes.fetch_add(request->ByteSizeLong(), std::memory_order_relaxed);
    if (request->fail_with() != 0) {
      return grpc::Status(static_cast<grpc::StatusCode>(request->fail_with()), "failed as asked");
    }
    reply->set_text(request->text());
    reply->set_blob(request->blob());
    std::lock_guard lock(texts_mutex);  // what request templates sent (load_h2_peers_test.sh)
    texts.insert(request->text());
    return grpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before gRPC's threads start, so they inherit it

  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  echo_service service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, threads);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_echo_server: cannot listen on 127.0.0.1\n");
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  std::printf("served %llu calls, %llu request bytes\n", calls.load(), request_bytes.load());
  std::printf("distinct texts %zu\n", texts.size());
  std::fflush(stdout);
  // gRPC's globals are not torn down: leave without static destructors (nor a leak report of them).
  std::_Exit(0);
}

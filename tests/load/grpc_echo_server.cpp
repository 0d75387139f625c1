// A real gRPC server (libgrpc++, generated code from echo.proto) for ringrpc-load's grpc://
// tests and bench/client_cpu_h2.sh: Echo.Say answers with the request's text and blob, or fails
// with the status code the request names. Echo.Chat (bidi, gRPC's callback API) writes every
// message back in order: ringrpc-load's grpc:// --stream tests and bench/stream_vs_grpc.sh. Listens
// on 127.0.0.1 on a port of the kernel's choosing, prints "listening on 127.0.0.1:PORT", and on
// SIGTERM or SIGINT prints what it served ("served CALLS calls, REQUEST_BYTES request bytes", then
// "streamed MESSAGES messages on STREAMS streams", then
// "distinct texts N" of Say's requests) and exits.
// Usage: grpc_echo_server [THREADS]   (THREADS: the sync pollers of Say; Chat runs on gRPC's
// callback threads)
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
std::atomic<unsigned long long> stream_messages{0};
std::atomic<unsigned long long> streams{0};

// Chat is what bench/stream_vs_grpc.sh measures ringrpc's streams against, so it is the fair,
// idiomatic gRPC echo: the callback API (the one gRPC recommends for performance), shaped as
// gRPC's own callback benchmark server (test/cpp/qps/server_callback.cc): one read, then its
// write, then the next read — one write outstanding at a time, as the API requires, with reads
// resumed as writes finish. The client's pipelined messages wait in gRPC's transport meanwhile.
// The reactor reuses one request and one reply for the stream's life; the counters are one
// relaxed add per message, as Say's are per call.
class chat_reactor final : public grpc::ServerBidiReactor<ringtest::EchoRequest, ringtest::EchoReply> {
 public:
  chat_reactor() {
    streams.fetch_add(1, std::memory_order_relaxed);
    StartRead(&_request);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // the client half-closed (or the call is gone)
      return;
    }
    stream_messages.fetch_add(1, std::memory_order_relaxed);
    if (_request.fail_with() != 0) {
      Finish(grpc::Status(static_cast<grpc::StatusCode>(_request.fail_with()), "failed as asked"));
      return;
    }
    _reply.set_text(_request.text());
    _reply.set_blob(_request.blob());
    StartWrite(&_reply);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reply could not be written"));
      return;
    }
    StartRead(&_request);
  }

  void OnDone() override { delete this; }

 private:
  ringtest::EchoRequest _request;
  ringtest::EchoReply _reply;
};

// Say stays a sync method (bench/client_cpu_h2.sh's server, THREADS pollers); Chat alone is a
// callback method of the same service.
class echo_service final : public ringtest::Echo::WithCallbackMethod_Chat<ringtest::Echo::Service> {
  grpc::ServerBidiReactor<ringtest::EchoRequest, ringtest::EchoReply>* Chat(grpc::CallbackServerContext*) override {
    return new chat_reactor();
  }

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
  std::printf("streamed %llu messages on %llu streams\n", stream_messages.load(), streams.load());
  std::printf("distinct texts %zu\n", texts.size());
  std::fflush(stdout);
  // gRPC's globals are not torn down: leave without static destructors (nor a leak report of them).
  std::_Exit(0);
}

// A real gRPC server (libgrpc++, generated code from echo.proto) for ringrpc-load's grpc://
// tests and bench/client_cpu_h2.sh: Echo.Say answers with the request's text and blob, or fails
// with the status code the request names. Echo.Chat (bidi, gRPC's callback API) writes every
// message back in order: ringrpc-load's grpc:// --stream tests and bench/stream_vs_grpc.sh. Listens
// on 127.0.0.1 on a port of the kernel's choosing, prints "listening on 127.0.0.1:PORT", and on
// SIGTERM or SIGINT prints what it served ("served CALLS calls, REQUEST_BYTES request bytes", then
// "streamed MESSAGES messages on STREAMS streams", then
// "distinct texts N" of Say's requests) and exits.
// Usage: grpc_echo_server [--callback-only] [THREADS]   (THREADS: the sync pollers of Say; Chat
// runs on gRPC's callback threads; --callback-only makes Say a callback method too and sets no
// sync server options, so no sync pollers exist and THREADS is ignored)
//        grpc_echo_server --proxy-to PORT   Say forwards each request to Echo.Say on
// 127.0.0.1:PORT through the callback stub and answers with its reply: gRPC's callback-API proxy
// for bench/proxy.sh (every method a callback method, as with --callback-only)
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
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
// idiomatic gRPC echo for a pipelined client: the callback API (the one gRPC recommends for
// performance). gRPC allows one write outstanding at a time, and a read beside it: one read is
// kept outstanding while a write is in flight, and the replies it makes wait in a queue for the
// write before them (at most max_queued, so a client that stops reading stops our reads too).
// Read and write reactions may run at once on two of gRPC's threads: the state is under a mutex,
// and the Start* and Finish calls are made outside it. Finish only once no read or write is
// outstanding (cancellation included: both then complete with ok false), and the reactor is
// deleted in OnDone. The counters are one relaxed add per message, as Say's are per call.
class chat_reactor final : public grpc::ServerBidiReactor<ringtest::EchoRequest, ringtest::EchoReply> {
 public:
  chat_reactor() {
    streams.fetch_add(1, std::memory_order_relaxed);
    _reading = true;
    StartRead(&_request);
  }

  void OnReadDone(bool ok) override {
    const ringtest::EchoReply* write = nullptr;
    bool read = false;
    bool finish = false;
    {
      std::lock_guard lock(_mutex);
      _reading = false;
      if (!ok) {
        _input_done = true;  // the client half-closed (or the call is gone)
      } else {
        stream_messages.fetch_add(1, std::memory_order_relaxed);
        if (_request.fail_with() != 0) {
          _status = grpc::Status(static_cast<grpc::StatusCode>(_request.fail_with()), "failed as asked");
          _input_done = true;
        } else {
          ringtest::EchoReply& reply = _replies.emplace_back();
          reply.set_text(_request.text());
          reply.set_blob(_request.blob());
          if (!_writing) write = &_replies.front();
          _writing = true;
          read = _replies.size() < max_queued;
          _reading = read;
        }
      }
      finish = finish_now();
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartRead(&_request);  // its message is copied into the reply already
    if (finish) Finish(_status);
  }

  void OnWriteDone(bool ok) override {
    const ringtest::EchoReply* write = nullptr;
    bool read = false;
    bool finish = false;
    {
      std::lock_guard lock(_mutex);
      _replies.pop_front();  // deque: the replies behind it stay where they are
      if (!ok) {
        _status = grpc::Status(grpc::StatusCode::CANCELLED, "the reply could not be written");
        _input_done = true;
        _replies.clear();
      }
      _writing = !_replies.empty();
      if (_writing) write = &_replies.front();
      if (!_input_done && !_reading && _replies.size() < max_queued) read = _reading = true;
      finish = finish_now();
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartRead(&_request);
    if (finish) Finish(_status);
  }

  void OnDone() override { delete this; }

 private:
  static constexpr std::size_t max_queued = 64;

  // Under _mutex: true once, when nothing more will be read and nothing is outstanding.
  bool finish_now() {
    if (!_input_done || _reading || _writing || _finished) return false;
    _finished = true;
    return true;
  }

  std::mutex _mutex;
  ringtest::EchoRequest _request;  // the read outstanding, reused
  std::deque<ringtest::EchoReply> _replies;  // front: the write outstanding while _writing
  bool _reading = false, _writing = false, _input_done = false, _finished = false;
  grpc::Status _status = grpc::Status::OK;
};

grpc::Status say(const ringtest::EchoRequest& request, ringtest::EchoReply& reply) {
  calls.fetch_add(1, std::memory_order_relaxed);
  request_bytes.fetch_add(request.ByteSizeLong(), std::memory_order_relaxed);
  if (request.fail_with() != 0) {
    return grpc::Status(static_cast<grpc::StatusCode>(request.fail_with()), "failed as asked");
  }
  reply.set_text(request.text());
  reply.set_blob(request.blob());
  std::lock_guard lock(texts_mutex);  // what request templates sent (load_h2_peers_test.sh)
  texts.insert(request.text());
  return grpc::Status::OK;
}

// Say stays a sync method (bench/client_cpu_h2.sh's server, THREADS pollers); Chat alone is a
// callback method of the same service.
class echo_service final : public ringtest::Echo::WithCallbackMethod_Chat<ringtest::Echo::Service> {
  grpc::ServerBidiReactor<ringtest::EchoRequest, ringtest::EchoReply>* Chat(grpc::CallbackServerContext*) override {
    return new chat_reactor();
  }
  grpc::Status Say(grpc::ServerContext*, const ringtest::EchoRequest* request, ringtest::EchoReply* reply) override {
    return say(*request, *reply);
  }
};

// --callback-only: every method a callback method, so the server has no sync pollers beside
// gRPC's callback threads (bench/stream_vs_grpc.sh: one pinned core, no idle threads competing).
class callback_echo_service final : public ringtest::Echo::CallbackService {
  grpc::ServerBidiReactor<ringtest::EchoRequest, ringtest::EchoReply>* Chat(grpc::CallbackServerContext*) override {
    return new chat_reactor();
  }
  grpc::ServerUnaryReactor* Say(grpc::CallbackServerContext* context, const ringtest::EchoRequest* request,
                                ringtest::EchoReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(say(*request, *reply));
    return reactor;
  }
};

// --proxy-to: Say as a proxy written the way gRPC recommends for asynchronous C++ (the callback
// API on both sides): the server reactor finishes in the downstream call's completion callback,
// with no thread waiting in between.
class proxy_echo_service final : public ringtest::Echo::CallbackService {
 public:
  explicit proxy_echo_service(const std::shared_ptr<grpc::Channel>& downstream)
      : _stub(ringtest::Echo::NewStub(downstream)) {}
  grpc::ServerUnaryReactor* Say(grpc::CallbackServerContext* context, const ringtest::EchoRequest* request,
                                ringtest::EchoReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto* downstream = new grpc::ClientContext();
    _stub->async()->Say(downstream, request, reply, [reactor, downstream](grpc::Status s) {
      delete downstream;
      reactor->Finish(s);
    });
    return reactor;
  }

 private:
  std::unique_ptr<ringtest::Echo::Stub> _stub;
};

}  // namespace

int main(int argc, char** argv) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before gRPC's threads start, so they inherit it

  const bool proxy = argc > 1 && std::string(argv[1]) == "--proxy-to";
  if (proxy && argc < 3) {
    std::fprintf(stderr, "grpc_echo_server: --proxy-to needs the downstream's port\n");
    return 2;
  }
  const bool callback_only = argc > 1 && std::string(argv[1]) == "--callback-only";
  const int first = callback_only ? 2 : 1;
  const int threads = argc > first ? std::atoi(argv[first]) : 2;
  echo_service sync_service;
  callback_echo_service callback_service;
  std::unique_ptr<proxy_echo_service> proxy_service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  if (proxy) {
    proxy_service = std::make_unique<proxy_echo_service>(
        grpc::CreateChannel(std::string("127.0.0.1:") + argv[2], grpc::InsecureChannelCredentials()));
    builder.RegisterService(proxy_service.get());
  } else if (callback_only) {
    builder.RegisterService(&callback_service);
  } else {
    builder.RegisterService(&sync_service);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, threads);
  }
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

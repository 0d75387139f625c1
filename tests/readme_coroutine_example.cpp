#include <cstdio>
#include <string>

#include <ringrpc/client.hpp>
#include <ringrpc/coro.hpp>
#include <ringrpc/coro_handler.hpp>
#include <ringrpc/server.hpp>

int main() {
  ringrpc::server_options options;
  options.port = 0;
  ringrpc::server backend(options);
  backend.add_method("greet", [](ringrpc::call_context& call) {
    std::string name(reinterpret_cast<const char*>(call.payload().data()), call.payload().size());
    call.reply("hello, " + name);
  });
  backend.start();
  auto to_backend = ringrpc::client::connect("127.0.0.1", backend.port());

  // A coroutine handler that awaits a call to the backend. It runs on the shard that read its
  // call (on_shard) and resumes there when the answer comes; no thread waits meanwhile.
  ringrpc::server front(options);
  ringrpc::add_coroutine_method(front, "welcome", [&to_backend](ringrpc::deferred_reply& call) -> ringrpc::task<void> {
    ringrpc::call_result r = co_await ringrpc::co_call(to_backend, "greet", call.payload());
    if (r.ok()) {
      call.reply(std::string(r.payload_string()) + ", welcome");
    } else {
      call.fail(ringrpc::status::unavailable, r.message);
    }
  }, ringrpc::on_shard);
  front.start();

  auto client = ringrpc::client::connect("127.0.0.1", front.port());
  ringrpc::call_result r = client.call("welcome", std::string_view("ringrpc"));
  front.stop();
  backend.stop();
  if (!r.ok()) {
    std::fprintf(stderr, "call failed: %s\n", r.message.c_str());
    return 1;
  }
  std::printf("%s\n", std::string(r.payload_string()).c_str());  // hello, ringrpc, welcome
}

// A server for bench/proxy.sh: method "echo" answered one of four ways, so the script can put
// the server CPU per call of a proxy beside a direct echo's in one run.
//
//   --mode direct      echo on the shard (a `direct` endpoint): the baseline, one call's I/O
//   --mode downstream  a coroutine handler on its shard (on_shard) that co_awaits "echo" on the
//                      downstream added to the server (ringrpc/downstream.hpp): the call goes
//                      out and comes back on the shard's own ring
//   --mode shard       the same handler, calling through a `client` (its own I/O thread)
//   --mode pool-coro   the same coroutine on the default pool
//   --mode pool-sync   a plain handler on the default pool that calls the downstream with a
//                      blocking client call (what code without coroutines does)
//
// The downstream is a ringrpc server at --downstream PORT on 127.0.0.1, reached through one
// `client` (its own I/O thread), or as a server's downstream in mode downstream. Not a benchmark by itself; prints "listening on
// 127.0.0.1:PORT" once ready and stops (draining) on SIGINT or SIGTERM.
//
//   proxy_server --mode shard --downstream PORT [--readers N (1)] [--handlers N (1)] [--port P (0)]

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "ringrpc/client.hpp"
#include "ringrpc/coro.hpp"
#include "ringrpc/coro_handler.hpp"
#include "ringrpc/downstream.hpp"
#include "ringrpc/server.hpp"

namespace {

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: proxy_server --mode direct|downstream|shard|pool-coro|pool-sync [--downstream PORT] [--readers N (1)] "
               "[--handlers N (1)] [--port P (0)]\n");
  std::exit(2);
}

template <class Downstream>
ringrpc::task<void> forward(Downstream& downstream, ringrpc::deferred_reply& call) {
  ringrpc::call_result r = co_await ringrpc::co_call(downstream, "echo", call.payload());
  if (r.ok()) {
    call.reply(r.payload);
  } else {
    call.fail(ringrpc::status::unavailable, r.message);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ringrpc::server_options o;
  o.readers = 1;
  o.handlers = 1;
  std::string mode;
  unsigned downstream_port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (a == "--mode") {
      mode = v;
    } else if (a == "--downstream") {
      downstream_port = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--readers") {
      o.readers = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--handlers") {
      o.handlers = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--port") {
      o.port = static_cast<std::uint16_t>(std::strtoul(v, nullptr, 10));
    } else {
      usage();
    }
  }
  if (mode != "direct" && downstream_port == 0) usage();
  std::optional<ringrpc::client> downstream;
  if (mode != "direct" && mode != "downstream") downstream.emplace(ringrpc::client::connect("127.0.0.1", static_cast<std::uint16_t>(downstream_port)));

  ringrpc::server s(o);
  if (mode == "direct") {
    ringrpc::endpoint_options direct;
    direct.policy = ringrpc::dispatch_policy::direct;
    struct echo final : ringrpc::endpoint {
      void receive_and_reply(ringrpc::call_context& call) override { call.reply(call.payload()); }
    };
    s.register_endpoint("echo", std::make_shared<echo>(), direct);
  } else if (mode == "downstream") {
    const ringrpc::downstream backend =
        ringrpc::add_downstream(s, "backend", "127.0.0.1", static_cast<std::uint16_t>(downstream_port));
    ringrpc::add_coroutine_method(s, "echo", [backend](ringrpc::deferred_reply& call) { return forward(backend, call); },
                                  ringrpc::on_shard);
  } else if (mode == "shard") {
    ringrpc::add_coroutine_method(s, "echo", [&](ringrpc::deferred_reply& call) { return forward(*downstream, call); },
                                  ringrpc::on_shard);
  } else if (mode == "pool-coro") {
    ringrpc::add_coroutine_method(s, "echo", [&](ringrpc::deferred_reply& call) { return forward(*downstream, call); });
  } else if (mode == "pool-sync") {
    s.add_method("echo", [&](ringrpc::call_context& call) {
      ringrpc::call_result r = downstream->call("echo", call.payload());
      if (r.ok()) {
        call.reply(r.payload);
      } else {
        call.fail(ringrpc::status::unavailable, r.message);
      }
    });
  } else {
    usage();
  }
  s.start();
  std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(s.port()));
  std::fflush(stdout);
  s.wait(ringrpc::wait_signals::stop);
  return 0;
}

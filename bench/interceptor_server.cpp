// A server for bench/interceptor_cost.sh: the built-in methods (echo, sleep, burn) behind N
// no-op server interceptors, so the script can compare the server's CPU per call with 0 and 1
// in one run. Not a benchmark by itself; prints "listening on 127.0.0.1:PORT" once ready and
// stops (draining) on SIGINT or SIGTERM.
//
//   interceptor_server [--interceptors N] [--timed 0|1] [--dispatch all|direct] [--readers N] [--handlers N]

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "ringrpc/interceptor.hpp"
#include "ringrpc/server.hpp"

namespace {

// Does nothing, but is not something the compiler can see through: virtual calls on a shared
// chain, as a real interceptor's would be.
class noop_interceptor final : public ringrpc::server_interceptor {
 public:
  explicit noop_interceptor(bool timed) noexcept : _timed(timed) {}
  ringrpc::call_verdict before_call(ringrpc::call_context&) override { return ringrpc::call_verdict::proceed(); }
  void after_call(const ringrpc::server_call_summary&) override {}
  bool wants_timing() const noexcept override { return _timed; }

 private:
  bool _timed;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: interceptor_server [--interceptors N (0)] [--timed 0|1 (0: the interceptors want no "
               "start/end timing)] [--dispatch all|direct (all)] [--readers N (1)] [--handlers N (1)] "
               "[--port P (0)]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  ringrpc::server_options o;
  o.readers = 1;
  o.handlers = 1;
  unsigned interceptors = 0;
  bool timed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (a == "--interceptors") {
      interceptors = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--timed") {
      timed = std::string_view(v) == "1";
    } else if (a == "--dispatch") {
      if (!ringrpc::parse_dispatch_policy(v, o.default_policy)) usage();
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
  for (unsigned i = 0; i < interceptors; ++i) o.interceptors.push_back(std::make_shared<noop_interceptor>(timed));
  ringrpc::server s(o);
  ringrpc::add_builtin_methods(s);
  s.start();
  std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(s.port()));
  std::fflush(stdout);
  s.wait(ringrpc::wait_signals::stop);
  return 0;
}

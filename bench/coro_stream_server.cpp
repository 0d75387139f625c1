// The stream echoes of bench/coro_stream.sh: `echo_stream`, callbacks written as ringrpc-server's
// built-in is (a message written back from on_message, kept and reading paused only when credit
// runs out; the built-in is not public API), and `co_echo_stream`, the same echo as one
// coroutine per stream (ringrpc/stream_coro.hpp: co_read, co_write). Not a benchmark by itself; prints "listening on
// 127.0.0.1:PORT" and serves until SIGINT or SIGTERM.
//
//   coro_stream_server [--readers N (1)] [--handlers N (1)] [--port P (0)]
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/server.hpp"
#include "ringrpc/stream_coro.hpp"
#include "ringrpc/task.hpp"

namespace {

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: coro_stream_server [--readers N (1)] [--handlers N (1)] [--port P (0)]\n");
  std::exit(2);
}

class echo_stream_handler final : public ringrpc::stream_handler {
 public:
  void on_message(ringrpc::server_stream& s, std::span<const std::byte> m) override {
    if (s.write(m) == ringrpc::write_result::ok) return;
    _waiting.assign(m.begin(), m.end());
    _has_waiting = true;
    s.pause_reading();
  }
  void on_writable(ringrpc::server_stream& s) override {
    if (!_has_waiting || s.write(_waiting) != ringrpc::write_result::ok) return;
    _has_waiting = false;
    s.resume_reading();
  }
  void on_half_close(ringrpc::server_stream& s) override { s.finish(); }

 private:
  std::vector<std::byte> _waiting;
  bool _has_waiting = false;
};

ringrpc::task<void> echo(ringrpc::coro_stream& s) {
  while (auto m = co_await ringrpc::co_read(s)) {
    if (co_await ringrpc::co_write(s, *m) != ringrpc::write_result::ok) co_return;
  }
  s.stream().finish();
}

}  // namespace

int main(int argc, char** argv) {
  ringrpc::server_options o;
  o.readers = 1;
  o.handlers = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (a == "--readers") {
      o.readers = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--handlers") {
      o.handlers = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    } else if (a == "--port") {
      o.port = static_cast<std::uint16_t>(std::strtoul(v, nullptr, 10));
    } else {
      usage();
    }
  }
  ringrpc::server s(o);
  s.add_stream_method("echo_stream", ringrpc::stream_kind::bidi, [](ringrpc::server_stream&, std::span<const std::byte>) {
    return std::make_unique<echo_stream_handler>();
  });
  ringrpc::add_coroutine_stream_method(s, "co_echo_stream", ringrpc::stream_kind::bidi, echo);
  s.start();
  std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(s.port()));
  std::fflush(stdout);
  s.wait(ringrpc::wait_signals::stop);
  return 0;
}

#pragma once
// The acceptor ring: multishot accept, then hand each new socket to a reader ring by msg_ring.

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "base/counter.hpp"
#include "uring/ring.hpp"
#include "uring/ring_waker.hpp"

namespace ringrpc::detail {

class server_core;

/// Owns the listening sockets (the plaintext one, and the TLS one when the server has a record
/// layer) and one ring on one thread. Connections go round-robin to the reader rings; the fd
/// travels in the msg_ring's result field and the message's tag says which listener took it,
/// so the hand-off takes no lock and no queue.
class acceptor {
 public:
  /// Binds and listens at once (so errors surface from server::start). Throws std::system_error.
  explicit acceptor(server_core& core);
  ~acceptor();

  void start(const uring_features& features);
  /// Closes the listening socket and joins the thread: no connection is accepted after return.
  void stop_and_join();

  std::uint16_t port() const noexcept { return _listeners[0].port; }
  std::uint16_t tls_port() const noexcept { return _listeners[1].port; }
  std::uint64_t accepted() const noexcept { return _accepted.get(); }

 private:
  struct listener {
    int fd = -1;
    std::uint16_t port = 0;
    bool armed = false;
  };
  void run_loop(ring& r);
  void arm_accept(ring& r, std::size_t which);
  void hand_off(ring& r, int fd, bool tls);
  void close_listeners() noexcept;

  server_core& _core;
  listener _listeners[2];  // [0] plaintext, [1] TLS (fd -1 without a record layer)
  std::thread _thread;
  ring_waker _waker;
  std::atomic<bool> _stop{false};
  std::size_t _next_reader = 0;
  counter _accepted;
};

}  // namespace ringrpc::detail

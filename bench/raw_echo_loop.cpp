// raw_echo_loop: the baseline that bench/vs_raw_loop.sh measures ringrpc-server against. A
// one-thread TCP echo server on plain liburing, built the way a careful hand-written loop would
// be, so that "ringrpc / raw" says how far the framework is from what one core can do:
//
//   multishot accept, multishot recv into a provided buffer ring, SINGLE_ISSUER|DEFER_TASKRUN
//   (without them if the kernel refuses), one io_uring_submit_and_wait per loop turn, and per
//   connection one send per turn carrying every byte that came in that turn.
//
// It sends back exactly the bytes it received, so `ringrpc-load echo://127.0.0.1:PORT` drives it.
//
//   build/bench/bench/raw_echo_loop --port 0 [--host 127.0.0.1] [--no-defer-taskrun]
//                                   [--handoff syscalls|ring] [--exit-after S]
//
// --handoff hands each turn's echoes to a worker thread instead (raw_handoff.hpp): the floor of
// any server whose user code runs on a thread of its own, such as ringrpc's pool path.
//
// Installed as ringrpc-raw-echo: ringrpc-bench runs it beside ringrpc-server (tools/bench).
//
// Prints "listening on HOST:PORT" on stdout once ready and one line about the ring it got on
// stderr; stops on SIGTERM or SIGINT, or after --exit-after seconds (a server left on another
// host by `ringrpc-bench serve` does not outlive its run). --log-level and --max-connections are accepted and ignored
// so that bench/idle_connections.py can start it like ringrpc-server.
#include <liburing.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <vector>

#include "raw_handoff.hpp"
#include "uring/ring_futex.hpp"

namespace {

constexpr unsigned sq_entries = 4096;
constexpr unsigned buf_count = 1024;  // a power of two, as the buffer ring requires
constexpr unsigned buf_size = 4096;
constexpr unsigned short buf_group = 0;
constexpr std::uint32_t none = UINT32_MAX;
// Gather buffers kept for reuse; beyond this many spare ones a burst's extras are freed, so that
// 10,000 connections answered at once do not stay in RSS as if they were per-connection cost.
constexpr std::size_t spare_gather_buffers = 256;

enum op : std::uint64_t { op_accept = 1, op_recv = 2, op_send = 3, op_signal = 4, op_futex = 5 };
std::uint64_t tag(op o, int fd) { return (std::uint64_t{o} << 32) | static_cast<std::uint32_t>(fd); }

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "raw_echo_loop: %s: %s\n", what, std::strerror(err));
  std::exit(2);
}

// Kept small: idle connections are measured, and an idle one holds only this.
struct connection {
  std::uint32_t sending = none;  // gather buffer whose send is in flight
  std::uint32_t gathered = none;  // bytes received since that send was issued
  std::uint32_t sent = 0;         // bytes of `sending` the kernel has taken so far
  bool open = false, recv_armed = false, closing = false, queued = false;
};

class echo_loop {
 public:
  echo_loop(int listen_fd, bool try_defer, const char* handoff) : _listen_fd(listen_fd) {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = sq_entries * 4;
    _setup = "single_issuer|defer_taskrun";
    int r = try_defer ? io_uring_queue_init_params(sq_entries, &_ring, &p) : -EINVAL;
    if (r == -EINVAL) {  // before 6.1: the next best is cooperative task work (5.19)
      p = io_uring_params{};
      p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN;
      p.cq_entries = sq_entries * 4;
      _setup = "coop_taskrun";
      r = io_uring_queue_init_params(sq_entries, &_ring, &p);
    }
    if (r == -EINVAL) {
      p = io_uring_params{};
      _setup = "plain";
      r = io_uring_queue_init_params(sq_entries, &_ring, &p);
    }
    if (r < 0) die("io_uring_queue_init_params", -r);
    _features = p.features;
    // Saves the fd table lookup on every io_uring_enter; optional (5.18).
    _ring_fd_registered = io_uring_register_ring_fd(&_ring) == 1;
    setup_buffer_ring();
    if (handoff != nullptr) {
      _ring_wake = probe_ring_wake();
      const bool ring = std::strcmp(handoff, "ring") == 0;
      _worker = std::make_unique<raw_handoff::worker>(ring ? raw_handoff::mode::ring : raw_handoff::mode::syscalls);
      _worker_setup = ring ? _worker->ring_setup() : "send_futex_syscalls";
    }
  }

  void describe() const {
    std::fprintf(stderr, "raw_echo_loop: setup=%s ring_fd=%s features=0x%x buffers=%ux%u", _setup,
                 _ring_fd_registered ? "registered" : "plain", _features, buf_count, buf_size);
    if (_worker) {
      std::fprintf(stderr, " handoff_wake=%s handoff_worker=%s",
                   _ring_wake ? "ring_futex_wake" : "futex_syscall", _worker_setup);
    }
    std::fputc('\n', stderr);
  }

  void run(int signal_fd) {
    _signal_fd = signal_fd;
    arm_signal();
    arm_accept();
    while (!_stop) {
      const int r = io_uring_submit_and_wait(&_ring, 1);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) die("io_uring_submit_and_wait", -r);
      unsigned head = 0, seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&_ring, head, cqe) {
        ++seen;
        handle(*cqe);
      }
      io_uring_cq_advance(&_ring, seen);
      if (_returned != 0) {
        io_uring_buf_ring_advance(_br, static_cast<int>(_returned));
        _returned = 0;
      }
      flush_sends();
    }
  }

 private:
  // Whether the kernel takes IORING_OP_FUTEX_WAKE (6.7): one wake of a word nobody waits on.
  // Runs before anything else is armed, so the one completion is the wake's.
  bool probe_ring_wake() {
    std::uint32_t word = 0;
    io_uring_sqe* s = sqe();
    ringrpc::detail::prep_futex_wake(s, &word, 1);
    io_uring_sqe_set_data64(s, tag(op_futex, 0));
    io_uring_cqe* cqe = nullptr;
    if (io_uring_submit_and_wait(&_ring, 1) < 0 || io_uring_peek_cqe(&_ring, &cqe) != 0) return false;
    const bool ok = cqe->res >= 0;
    io_uring_cqe_seen(&_ring, cqe);
    return ok;
  }

  // The worker was parked: woken by the turn's own submit where the kernel can, as ringrpc's
  // readers wake their pool (src/server/shard.cpp), so the floor has the same advantage.
  void wake_worker() {
    if (!_ring_wake) {
      _worker->wake_by_syscall();
      return;
    }
    io_uring_sqe* s = sqe();
    ringrpc::detail::prep_futex_wake(s, _worker->wake_word(), 1);
    s->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(s, tag(op_futex, 0));
  }

  // Only a failed ring wake completes (IOSQE_CQE_SKIP_SUCCESS): wake by system call from now on.
  void on_futex(int res) {
    if (res >= 0 || !_worker) return;
    _ring_wake = false;
    _worker->wake_by_syscall();
  }

  // --handoff: the turn's echoes (and closes, in order after them) go to the worker in one post.
  void flush_to_worker() {
    for (const int fd : _dirty) {
      connection& c = _conns[static_cast<std::size_t>(fd)];
      c.queued = false;
      if (c.gathered == none || c.closing) continue;
      _jobs.push_back(raw_handoff::job{fd, false, std::move(_gather[c.gathered])});
      give_gather(c.gathered);
      c.gathered = none;
    }
    _dirty.clear();
    if (!_jobs.empty() && _worker->post(_jobs, _recycled)) wake_worker();
  }

  // liburing 2.3 has no io_uring_setup_buf_ring (2.4), so the ring memory is mapped and
  // registered here by hand.
  void setup_buffer_ring() {
    const std::size_t ring_bytes = buf_count * sizeof(io_uring_buf);
    void* mem = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) die("mmap buffer ring", errno);
    _br = static_cast<io_uring_buf_ring*>(mem);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem);
    reg.ring_entries = buf_count;
    reg.bgid = buf_group;
    if (const int r = io_uring_register_buf_ring(&_ring, &reg, 0); r < 0) die("io_uring_register_buf_ring", -r);
    io_uring_buf_ring_init(_br);
    _buffers.assign(std::size_t{buf_count} * buf_size, 0);  // touched now: a fixed cost, not per connection
    for (unsigned i = 0; i < buf_count; ++i) {
      io_uring_buf_ring_add(_br, buffer(i), buf_size, static_cast<unsigned short>(i),
                            io_uring_buf_ring_mask(buf_count), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(_br, buf_count);
  }

  char* buffer(unsigned bid) { return _buffers.data() + std::size_t{bid} * buf_size; }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&_ring);
    while (s == nullptr) {  // SQ full mid-turn: hand the kernel what we have, keep going
      io_uring_submit(&_ring);
      s = io_uring_get_sqe(&_ring);
    }
    return s;
  }

  void arm_signal() {
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, _signal_fd, &_siginfo, sizeof _siginfo, 0);
    io_uring_sqe_set_data64(s, tag(op_signal, _signal_fd));
  }

  void arm_accept() {
    io_uring_sqe* s = sqe();
    io_uring_prep_multishot_accept(s, _listen_fd, nullptr, nullptr, 0);
    io_uring_sqe_set_data64(s, tag(op_accept, _listen_fd));
  }

  void arm_recv(int fd) {
    io_uring_sqe* s = sqe();
    io_uring_prep_recv_multishot(s, fd, nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = buf_group;
    io_uring_sqe_set_data64(s, tag(op_recv, fd));
    _conns[static_cast<std::size_t>(fd)].recv_armed = true;
  }

  void send_rest(int fd, connection& c) {
    const std::vector<char>& b = _gather[c.sending];
    io_uring_sqe* s = sqe();
    io_uring_prep_send(s, fd, b.data() + c.sent, b.size() - c.sent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, tag(op_send, fd));
  }

  std::uint32_t take_gather() {
    if (_spare.empty()) {
      _gather.emplace_back();
      return static_cast<std::uint32_t>(_gather.size() - 1);
    }
    const std::uint32_t i = _spare.back();
    _spare.pop_back();
    if (_gather[i].capacity() == 0 && !_recycled.empty()) {  // moved to the worker: take one back
      _gather[i] = std::move(_recycled.back());
      _recycled.pop_back();
    }
    return i;
  }

  void give_gather(std::uint32_t i) {
    if (i == none) return;
    if (_spare.size() >= spare_gather_buffers) {
      std::vector<char>().swap(_gather[i]);
    } else {
      _gather[i].clear();
    }
    _spare.push_back(i);
  }

  void handle(const io_uring_cqe& cqe) {
    const auto kind = static_cast<op>(cqe.user_data >> 32);
    const int fd = static_cast<int>(cqe.user_data & 0xffffffffu);
    const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
    switch (kind) {
      case op_signal: _stop = true; return;
      case op_accept: on_accept(cqe.res, more); return;
      case op_recv: on_recv(fd, cqe, more); return;
      case op_send: on_send(fd, cqe.res); return;
      case op_futex: on_futex(cqe.res); return;
    }
  }

  void on_accept(int res, bool more) {
    if (res >= 0) {
      const int one = 1;
      setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (static_cast<std::size_t>(res) >= _conns.size()) _conns.resize(static_cast<std::size_t>(res) + 1024);
      _conns[static_cast<std::size_t>(res)] = connection{};
      _conns[static_cast<std::size_t>(res)].open = true;
      arm_recv(res);
    } else if (res != -EAGAIN && res != -EINTR) {
      std::fprintf(stderr, "raw_echo_loop: accept: %s\n", std::strerror(-res));
    }
    if (!more) arm_accept();
  }

  void on_recv(int fd, const io_uring_cqe& cqe, bool more) {
    connection& c = _conns[static_cast<std::size_t>(fd)];
    if (cqe.res > 0) {
      const unsigned bid = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
      if (c.gathered == none) c.gathered = take_gather();
      const char* data = buffer(bid);
      _gather[c.gathered].insert(_gather[c.gathered].end(), data, data + cqe.res);
      // Copied out, so the buffer goes straight back; made visible to the kernel at turn end.
      io_uring_buf_ring_add(_br, buffer(bid), buf_size, static_cast<unsigned short>(bid),
                            io_uring_buf_ring_mask(buf_count), static_cast<int>(_returned++));
      if (!c.queued) {
        c.queued = true;
        _dirty.push_back(fd);
      }
    }
    if (more) return;
    c.recv_armed = false;
    // The multishot ended. Out of buffers (ENOBUFS) or a data CQE without MORE: arm again (this
    // turn's returns are visible before the next submit). End of stream or an error: close.
    if (cqe.res > 0 || cqe.res == -ENOBUFS) {
      arm_recv(fd);
    } else {
      c.closing = true;
      close_if_quiet(fd, c);
    }
  }

  void on_send(int fd, int res) {
    connection& c = _conns[static_cast<std::size_t>(fd)];
    if (res < 0) {
      give_gather(c.sending);
      give_gather(c.gathered);
      c.sending = c.gathered = none;
      c.closing = true;
      close_if_quiet(fd, c);
      return;
    }
    c.sent += static_cast<std::uint32_t>(res);
    if (c.sent < _gather[c.sending].size()) {  // partial send: the rest goes first
      send_rest(fd, c);
      return;
    }
    give_gather(c.sending);
    c.sending = none;
    if (c.closing) {
      close_if_quiet(fd, c);
    } else if (c.gathered != none && !c.queued) {  // came while that send was in flight
      c.queued = true;
      _dirty.push_back(fd);
    }
  }

  void flush_sends() {
    if (_worker) {
      flush_to_worker();
      return;
    }
    for (const int fd : _dirty) {
      connection& c = _conns[static_cast<std::size_t>(fd)];
      c.queued = false;
      if (c.sending != none || c.gathered == none || c.closing) continue;
      c.sending = c.gathered;
      c.gathered = none;
      c.sent = 0;
      send_rest(fd, c);
    }
    _dirty.clear();
  }

  // Closing only once nothing of ours still refers to the fd, so a reused fd number never gets
  // a stale completion.
  void close_if_quiet(int fd, connection& c) {
    if (!c.open || c.recv_armed || c.sending != none) return;
    give_gather(c.gathered);
    c = connection{};
    if (_worker) {  // after the worker's sends to it; the turn's flush posts it
      _jobs.push_back(raw_handoff::job{fd, true, {}});
    } else {
      close(fd);
    }
  }

  io_uring _ring{};
  io_uring_buf_ring* _br = nullptr;
  std::vector<char> _buffers;
  unsigned _returned = 0;  // buffers added back this turn, not yet advanced
  std::vector<connection> _conns;
  std::vector<std::vector<char>> _gather;
  std::vector<std::uint32_t> _spare;
  std::vector<int> _dirty;  // connections that received this turn, in arrival order
  int _listen_fd;
  int _signal_fd = -1;
  signalfd_siginfo _siginfo{};
  bool _stop = false;
  const char* _setup = "";
  unsigned _features = 0;
  bool _ring_fd_registered = false;
  std::unique_ptr<raw_handoff::worker> _worker;  // --handoff only
  bool _ring_wake = false;                        // the worker is woken by IORING_OP_FUTEX_WAKE
  const char* _worker_setup = "";
  std::vector<raw_handoff::job> _jobs;            // this turn's, posted at its end
  std::vector<std::vector<char>> _recycled;       // emptied by the worker, for take_gather()
};

int listen_on(const std::string& host, int port, int& bound_port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket", errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    std::fprintf(stderr, "raw_echo_loop: --host must be an IPv4 address, got '%s'\n", host.c_str());
    std::exit(2);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind", errno);
  if (listen(fd, 4096) != 0) die("listen", errno);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  bound_port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  bool try_defer = true;
  const char* handoff = nullptr;
  unsigned exit_after = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--port" && has_value) {
      port = std::atoi(argv[++i]);
    } else if (a == "--host" && has_value) {
      host = argv[++i];
    } else if (a == "--no-defer-taskrun") {  // to see what the kernel feature is worth here
      try_defer = false;
    } else if (a == "--handoff" && has_value &&
               (std::strcmp(argv[i + 1], "syscalls") == 0 || std::strcmp(argv[i + 1], "ring") == 0)) {
      handoff = argv[++i];
    } else if (a == "--exit-after" && has_value) {
      exit_after = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
    } else if ((a == "--log-level" || a == "--max-connections") && has_value) {
      ++i;
    } else {
      const bool help = a == "--help" || a == "-h";
      std::fprintf(help ? stdout : stderr,
                   "Usage: %s [--port N] [--host IPV4] [--no-defer-taskrun] [--handoff syscalls|ring]\n"
                   "          [--exit-after S]\n"
                   "A one-thread TCP echo server on plain io_uring: the baseline ringrpc-bench measures\n"
                   "ringrpc-server against. Prints 'listening on HOST:PORT' once ready.\n\n"
                   "  --port N            port to listen on; 0 picks one [0]\n"
                   "  --host IPV4         address to listen on [127.0.0.1]\n"
                   "  --no-defer-taskrun  do not ask the kernel for IORING_SETUP_DEFER_TASKRUN\n"
                   "  --handoff WORKER    a worker thread sends the echoes (the least a server whose\n"
                   "                      user code runs on a thread of its own pays): with send(2)\n"
                   "                      and futex(2) (syscalls), or its own io_uring (ring)\n"
                   "  --exit-after S      exit after S seconds; 0 = run until stopped [0]\n\n"
                   "Exit status: 0 stopped by SIGTERM, SIGINT or --exit-after (or --help);\n"
                   "2 usage, or the socket or io_uring could not be set up (one line on stderr).\n",
                   argv[0]);
      return help ? 0 : 2;
    }
  }
  // Signals arrive as a completion on the ring, so a stop can never slip in between checking a
  // flag and blocking in io_uring_enter.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGALRM);  // --exit-after: the alarm stops the loop like SIGTERM
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  const int signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (signal_fd < 0) die("signalfd", errno);
  std::signal(SIGPIPE, SIG_IGN);

  int bound_port = 0;
  const int listen_fd = listen_on(host, port, bound_port);
  echo_loop loop(listen_fd, try_defer, handoff);
  loop.describe();
  if (exit_after != 0) alarm(exit_after);
  std::printf("listening on %s:%d\n", host.c_str(), bound_port);
  std::fflush(stdout);
  loop.run(signal_fd);
  close(listen_fd);
  return 0;
}

// raw_http_client: the floor under bench/client_cpu.sh's nginx pair. A closed-loop HTTP/1.1 GET
// client on plain liburing that does the least a client can: every connection keeps one request
// in flight, a reply is recognised only by its length (learnt from the first reply's
// Content-Length), nothing is timed or recorded. Its CPU per request is what the kernel charges
// a client on this host for one request and one reply; "ringrpc-load / raw" says what the load
// tool adds, "raw / wrk" what any io_uring client can win over wrk's epoll loop.
//
// The same ring set-up as ringrpc-load (SINGLE_ISSUER|DEFER_TASKRUN, registered sockets and ring
// fd, multishot recv into a provided buffer ring, one submit-and-wait per loop turn), so the two
// differ only in what ringrpc-load does on top.
//
//   raw_http_client HOST PORT [--connections 64] [--seconds 5] [--wait-nr 1] [--min-wait-us 0]
//
// Prints "requests N seconds S" on stdout. --wait-nr N waits for N completions per turn (at most
// the calls in flight) so that the kernel wakes the loop once per N replies; --min-wait-us M
// (6.12+) returns after M µs with fewer, if any have come.
#include <liburing.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr unsigned buf_count = 1024;
constexpr unsigned buf_size = 4096;
constexpr unsigned short buf_group = 0;
enum op : std::uint64_t { op_recv = 1, op_send = 2 };

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "raw_http_client: %s: %s\n", what, std::strerror(err));
  std::exit(2);
}

struct connection {
  std::size_t pending = 0;  // bytes of the reply in flight received so far
  std::string head;         // the first reply, until its length is known
};

std::size_t reply_length(const std::string& head) {
  const auto end = head.find("\r\n\r\n");
  if (end == std::string::npos) return 0;
  const auto cl = head.find("Content-Length: ");
  if (cl == std::string::npos || cl > end) die("the first reply has no Content-Length", EPROTO);
  return end + 4 + std::strtoul(head.c_str() + cl + 16, nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: raw_http_client HOST PORT [--connections N] [--seconds S] [--wait-nr N] [--min-wait-us M]\n");
    return 2;
  }
  unsigned conns = 64, seconds = 5, wait_nr = 1, min_wait_us = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const unsigned v = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
    if (flag == "--connections") conns = v;
    else if (flag == "--seconds") seconds = v;
    else if (flag == "--wait-nr") wait_nr = v;
    else if (flag == "--min-wait-us") min_wait_us = v;
    else die(argv[i], EINVAL);
  }
  if (conns == 0 || wait_nr == 0 || wait_nr > conns) die("--connections/--wait-nr", EINVAL);

  io_uring ring{};
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  p.cq_entries = 4 * 1024;
  if (int r = io_uring_queue_init_params(1024, &ring, &p); r < 0) die("io_uring_queue_init", -r);
  const bool registered_ring = io_uring_register_ring_fd(&ring) == 1;

  const std::size_t ring_bytes = buf_count * sizeof(io_uring_buf);
  void* br_mem = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (br_mem == MAP_FAILED) die("mmap", errno);
  auto* br = static_cast<io_uring_buf_ring*>(br_mem);
  io_uring_buf_ring_init(br);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(br);
  reg.ring_entries = buf_count;
  reg.bgid = buf_group;
  if (int r = io_uring_register_buf_ring(&ring, &reg, 0); r < 0) die("io_uring_register_buf_ring", -r);
  std::vector<char> bufs(std::size_t{buf_count} * buf_size);
  const int mask = io_uring_buf_ring_mask(buf_count);
  for (unsigned i = 0; i < buf_count; ++i) io_uring_buf_ring_add(br, &bufs[std::size_t{i} * buf_size], buf_size, i, mask, static_cast<int>(i));
  io_uring_buf_ring_advance(br, buf_count);

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) die("HOST", EINVAL);
  std::vector<int> fds(conns);
  for (unsigned i = 0; i < conns; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[i] < 0) die("socket", errno);
    const int one = 1;
    setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("connect", errno);
  }
  if (int r = io_uring_register_files(&ring, fds.data(), conns); r < 0) die("io_uring_register_files", -r);

  const std::string request = std::string("GET / HTTP/1.1\r\nHost: ") + argv[1] + "\r\n\r\n";
  std::vector<connection> state(conns);
  auto send = [&](unsigned i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send(sqe, static_cast<int>(i), request.data(), request.size(), 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
    sqe->user_data = (std::uint64_t{op_send} << 32) | i;
  };
  auto arm_recv = [&](unsigned i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recv_multishot(sqe, static_cast<int>(i), nullptr, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    sqe->buf_group = buf_group;
    sqe->user_data = (std::uint64_t{op_recv} << 32) | i;
  };
  for (unsigned i = 0; i < conns; ++i) {
    arm_recv(i);
    send(i);
  }

  std::size_t reply_bytes = 0;
  std::uint64_t requests = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto stop = start + std::chrono::seconds(seconds);
  __kernel_timespec ts{.tv_sec = 0, .tv_nsec = 100'000'000};
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    int r = 0;
    if (min_wait_us == 0) {
      r = io_uring_submit_and_wait_timeout(&ring, &cqe, wait_nr, &ts, nullptr);
    } else {
      // liburing 2.3 has no helper for min_wait_usec (6.12): flush the SQ and enter by hand.
      io_uring_sq& sq = ring.sq;
      sq.sqe_head = sq.sqe_tail;
      io_uring_smp_store_release(sq.ktail, sq.sqe_tail);
      const unsigned to_submit = sq.sqe_tail - *sq.khead;
      io_uring_getevents_arg arg{};
      arg.pad = min_wait_us;  // the kernel's min_wait_usec
      arg.ts = reinterpret_cast<std::uint64_t>(&ts);
      unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
      if (registered_ring) flags |= IORING_ENTER_REGISTERED_RING;
      r = io_uring_enter2(registered_ring ? static_cast<unsigned>(ring.enter_ring_fd) : static_cast<unsigned>(ring.ring_fd),
                          to_submit, wait_nr, flags, reinterpret_cast<sigset_t*>(&arg), sizeof arg);
    }
    if (r < 0 && r != -ETIME && r != -EINTR) die("io_uring_submit_and_wait_timeout", -r);
    unsigned head = 0, seen = 0, returned = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      const auto i = static_cast<unsigned>(cqe->user_data & 0xffffffffu);
      if ((cqe->user_data >> 32) == op_send) die("send", -cqe->res);
      if (cqe->res <= 0) die("recv", cqe->res == 0 ? ECONNRESET : -cqe->res);
      if (!(cqe->flags & IORING_CQE_F_MORE)) arm_recv(i);
      const unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
      connection& c = state[i];
      if (reply_bytes == 0) {
        c.head.append(&bufs[std::size_t{bid} * buf_size], static_cast<std::size_t>(cqe->res));
        reply_bytes = reply_length(c.head);
        if (reply_bytes != 0) c.pending = c.head.size();
      } else {
        c.pending += static_cast<std::size_t>(cqe->res);
      }
      io_uring_buf_ring_add(br, &bufs[std::size_t{bid} * buf_size], buf_size, static_cast<unsigned short>(bid), mask,
                            static_cast<int>(returned++));
      while (reply_bytes != 0 && c.pending >= reply_bytes) {
        c.pending -= reply_bytes;
        ++requests;
        send(i);
      }
    }
    io_uring_cq_advance(&ring, seen);
    io_uring_buf_ring_advance(br, static_cast<int>(returned));
    if (std::chrono::steady_clock::now() >= stop) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("requests %llu seconds %.3f\n", static_cast<unsigned long long>(requests), secs);
  return 0;
}

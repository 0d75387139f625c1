#pragma once
// raw_echo_loop --handoff: the least a server that runs user code on a thread of its own can pay
// per call. The loop stays as it is, except that a turn's echoes go to one worker thread instead
// of the loop's own sends; the worker writes them with send(2) and parks on a futex. One queue
// hand-off and (when the worker is parked) one wake per turn, nothing else: no framing, no
// accounting, no replies handed back. bench/vs_raw_loop.sh (HANDOFF=1) measures it beside the
// raw loop and ringrpc's pool path, so "pool / handoff" says what ringrpc adds to the hand-off
// and "handoff / raw" what the hand-off itself costs on the host.
//
// A mutex guards the queue: held for a swap or an append, never across a system call, so on one
// core (the case measured) it is never contended; a lock-free queue would not change the figures,
// which are set by the wake, the park and the context switch.
//
// Two workers:
//   syscalls  send(2) per echo, then futex(FUTEX_WAIT): what ringrpc's pool workers do today
//             (a handler writes its reply with send(2), src/server/inline_reply; then parks).
//   ring      the worker's own io_uring: a batch's sends and the futex wait that parks it go in
//             one io_uring_enter (IORING_OP_FUTEX_WAIT, Linux 6.7; liburing 2.3 has no helper,
//             so the SQE is filled by hand as later liburing's io_uring_prep_futex_wait does):
//             one system call per batch, the least a worker thread can make. Without the futex
//             opcodes, the sends go in one enter and the park is a futex() call.
//
// The sends block until whole (blocking sockets; MSG_WAITALL on the ring): a peer that stops
// reading stalls every connection. Fine for a baseline driven by ringrpc-load, which reads all.

#include <liburing.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "uring/ring_futex.hpp"

namespace raw_handoff {

inline constexpr std::uint8_t op_futex_wait = 51;  // IORING_OP_FUTEX_WAIT

// Parks until *word != expected or a wake; completes with 0 or -EAGAIN (the word had moved).
inline void prep_futex_wait(io_uring_sqe* sqe, const std::uint32_t* word, std::uint32_t expected) {
  using namespace ringrpc::detail;
  io_uring_prep_rw(op_futex_wait, sqe, static_cast<int>(futex2_size_u32 | futex2_private), word, 0, expected);
  sqe->rw_flags = 0;
  sqe->addr3 = futex_match_any;
}


struct job {
  int fd = -1;
  bool close = false;       // close fd once every earlier job for it is written
  std::vector<char> bytes;  // what to send back
};

enum class mode { syscalls, ring };

class worker {
 public:
  explicit worker(mode m) : _thread([this, m] { m == mode::ring ? run_ring() : run(); }) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;
  ~worker() {
    {
      const std::lock_guard<std::mutex> lock(_mutex);
      _stop = true;
      _epoch.fetch_add(1, std::memory_order_relaxed);
    }
    wake_by_syscall();
    _thread.join();
  }

  /// Queues a turn's jobs (moved out) and takes back the byte buffers the worker has emptied.
  /// True if the worker is parked: the caller wakes it, through the ring or wake_by_syscall().
  bool post(std::vector<job>& jobs, std::vector<std::vector<char>>& recycled) {
    const std::lock_guard<std::mutex> lock(_mutex);
    for (job& j : jobs) _queue.push_back(std::move(j));
    jobs.clear();
    if (recycled.empty()) recycled.swap(_emptied);
    if (!_parked) return false;
    _parked = false;
    // Under the lock, as take() reads it: a post after a take bumps the epoch, so the wait that
    // follows the take returns at once instead of missing this wake.
    _epoch.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  /// The ring worker's set-up, once known ("ring_futex_wait", "ring_sends_futex_syscall").
  const char* ring_setup() {
    for (;;) {
      if (const char* s = _ring_setup.load(std::memory_order_acquire)) return s;
      std::this_thread::yield();
    }
  }

  /// The futex word a wake targets (FUTEX_WAIT_PRIVATE in run()).
  const std::uint32_t* wake_word() const { return reinterpret_cast<const std::uint32_t*>(&_epoch); }

  void wake_by_syscall() {
    syscall(SYS_futex, wake_word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

 private:
  void run() {
    std::vector<job> mine;
    for (;;) {
      std::uint32_t seen = 0;
      if (!take(mine, seen, false)) return;
      if (mine.empty()) {
        syscall(SYS_futex, wake_word(), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
        continue;
      }
      for (const job& j : mine) {
        if (j.close) {
          ::close(j.fd);
        } else {
          send_all(j.fd, j.bytes);
        }
      }
    }
  }

  // Takes the queued jobs (returning the last batch's emptied buffers). When none are queued, or
  // `park_anyway` (the ring worker parks in the same enter as the batch's sends), marks the worker
  // parked and returns in `seen` the epoch its wait must see unchanged.
  bool take(std::vector<job>& mine, std::uint32_t& seen, bool park_anyway) {
    const std::lock_guard<std::mutex> lock(_mutex);
    for (job& j : mine) {
      if (!j.bytes.empty() && _emptied.size() < 256) {
        j.bytes.clear();
        _emptied.push_back(std::move(j.bytes));
      }
    }
    mine.clear();
    mine.swap(_queue);
    if (mine.empty() && _stop) return false;
    if (mine.empty() || park_anyway) {
      _parked = true;
      seen = _epoch.load(std::memory_order_relaxed);
    }
    return true;
  }

  // One io_uring_enter per batch: its sends, then the wait for the next post. A post while the
  // sends run sees the worker parked and wakes it, which ends the wait (or makes it -EAGAIN).
  void run_ring() {
    io_uring ring{};
    io_uring_params p{};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;  // created on this thread
    if (io_uring_queue_init_params(1024, &ring, &p) < 0) {
      p = io_uring_params{};
      if (const int r = io_uring_queue_init_params(1024, &ring, &p); r < 0) {
        std::fprintf(stderr, "raw_echo_loop: the worker's io_uring_queue_init: %s\n", std::strerror(-r));
        std::exit(2);
      }
    }
    const bool ring_wait = probe_futex_wait(ring);
    _ring_setup.store(ring_wait ? "ring_futex_wait" : "ring_sends_futex_syscall", std::memory_order_release);
    std::vector<job> mine;
    for (;;) {
      std::uint32_t seen = 0;
      if (!take(mine, seen, ring_wait)) break;
      unsigned want = 0;
      bool closes = false;
      for (const job& j : mine) {
        if (j.close) {
          closes = true;
          continue;
        }
        io_uring_prep_send(next_sqe(ring), j.fd, j.bytes.data(), j.bytes.size(), MSG_NOSIGNAL | MSG_WAITALL);
        ++want;
      }
      // A batch that closes a connection waits for its sends only, and closes at once: parked
      // in the same enter, the close would wait for the next post.
      if (ring_wait && !closes) {
        prep_futex_wait(next_sqe(ring), wake_word(), seen);
        ++want;
      }
      wait_for(ring, want);
      for (const job& j : mine) {
        if (j.close) ::close(j.fd);  // after the batch's sends, which include the fd's last
      }
      if (!ring_wait && mine.empty()) {
        syscall(SYS_futex, wake_word(), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
      }
    }
    io_uring_queue_exit(&ring);
  }

  // More entries than the ring holds: what is queued goes to the kernel first.
  static io_uring_sqe* next_sqe(io_uring& ring) {
    io_uring_sqe* s = io_uring_get_sqe(&ring);
    while (s == nullptr) {
      io_uring_submit(&ring);
      s = io_uring_get_sqe(&ring);
    }
    return s;
  }

  // Submits what is queued and reaps `want` completions (a failed send's bytes are dropped: the
  // loop sees the connection end on its receive).
  static void wait_for(io_uring& ring, unsigned want) {
    while (want > 0) {
      const int r = io_uring_submit_and_wait(&ring, want);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) return;
      unsigned head = 0, seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring, head, cqe) { ++seen; }
      io_uring_cq_advance(&ring, seen);
      want -= std::min(want, seen);
    }
  }

  bool probe_futex_wait(io_uring& ring) {
    // A wait on a word that does not hold the expected value completes at once with -EAGAIN;
    // a kernel without the opcode answers -EINVAL.
    std::uint32_t word = 1;
    prep_futex_wait(io_uring_get_sqe(&ring), &word, 0);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_submit_and_wait(&ring, 1) < 0 || io_uring_peek_cqe(&ring, &cqe) != 0) return false;
    const bool ok = cqe->res == -EAGAIN;
    io_uring_cqe_seen(&ring, cqe);
    return ok;
  }

  // A failed send drops the rest: the loop sees the connection end on its receive and closes it.
  static void send_all(int fd, const std::vector<char>& b) {
    std::size_t sent = 0;
    while (sent < b.size()) {
      const ssize_t n = ::send(fd, b.data() + sent, b.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  std::mutex _mutex;
  std::vector<job> _queue;
  std::vector<std::vector<char>> _emptied;
  bool _parked = false;
  bool _stop = false;
  std::atomic<std::uint32_t> _epoch{0};
  std::atomic<const char*> _ring_setup{nullptr};
  std::thread _thread;  // last: started once the members above exist
};

}  // namespace raw_handoff

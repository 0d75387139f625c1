#include "uring/uring_probe.hpp"

#include "uring/ring_futex.hpp"

#include <liburing.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <system_error>
#include <thread>

namespace ringrpc::detail {
namespace {

// Multishot recv with provided buffer rings is the newest thing we cannot live without
// (Linux 6.0); msg_ring, multishot accept and buffer rings came in 5.18/5.19.
constexpr int min_major = 6, min_minor = 0;

void read_kernel_version(int& major, int& minor) {
  utsname u{};
  major = minor = 0;
  if (uname(&u) == 0) std::sscanf(u.release, "%d.%d", &major, &minor);
}

int read_disabled_sysctl() {
  std::ifstream f("/proc/sys/kernel/io_uring_disabled");
  int v = 0;
  if (f >> v) return v;
  return 0;  // the knob only exists from 6.6 on; absent means enabled
}

[[noreturn]] void unavailable(int err, const std::string& why) {
  throw std::system_error(err, std::system_category(), "io_uring unavailable: " + why);
}

// RINGRPC_URING_AS_OF: the kernel version whose features we limit ourselves to (lowers
// major/minor, never raises them).
void apply_as_of(int& major, int& minor) {
  const char* v = std::getenv("RINGRPC_URING_AS_OF");
  int a = 0, b = 0;
  if (v == nullptr || std::sscanf(v, "%d.%d", &a, &b) != 2) return;
  if (a < major || (a == major && b < minor)) {
    major = a;
    minor = b;
  }
}

bool at_least(int major, int minor, int want_major, int want_minor) {
  return major > want_major || (major == want_major && minor >= want_minor);
}

// The wake of a word nobody waits on, through the exact SQE ring_futex.hpp builds: true when the
// kernel completes it (0 woken). An opcode the probe lists may still refuse fields we set by
// hand; a refusal at run time would leave a worker asleep, so it is found here.
bool futex_wake_works() {
  io_uring ring{};
  if (io_uring_queue_init(4, &ring, 0) < 0) return false;
  std::uint32_t word = 0;
  prep_futex_wake(io_uring_get_sqe(&ring), &word, 1);
  io_uring_cqe* cqe = nullptr;
  bool ok = io_uring_submit_and_wait(&ring, 1) == 1 && io_uring_peek_cqe(&ring, &cqe) == 0 && cqe->res == 0;
  io_uring_queue_exit(&ring);
  return ok;
}

bool ring_accepts(unsigned flags) {
  io_uring ring{};
  io_uring_params p{};
  p.flags = flags;
  const int rc = io_uring_queue_init_params(4, &ring, &p);
  if (rc < 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

}  // namespace

namespace {
uring_features probe_here();
}  // namespace

uring_features probe_io_uring() {
  // The throw-away rings are created on a thread of their own. Tearing down a ring marks the
  // thread that created it for task work a little later, and a blocking socket call with a
  // timeout (SO_RCVTIMEO) on that thread then fails with EINTR with no signal in sight: the
  // embedder's thread that starts a server or client must not inherit that.
  uring_features f;
  std::exception_ptr failure;
  std::thread([&] {
    try {
      f = probe_here();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
  return f;
}

namespace {
uring_features probe_here() {
  uring_features f;
  read_kernel_version(f.kernel_major, f.kernel_minor);

  io_uring ring{};
  const int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) {
    const int err = -rc;
    const int disabled = read_disabled_sysctl();
    if (disabled == 2) unavailable(err, "the sysctl kernel.io_uring_disabled=2 turns it off for everyone");
    if (disabled == 1 && err == EPERM) {
      unavailable(err, "the sysctl kernel.io_uring_disabled=1 limits it to root and the group in "
                "kernel.io_uring_group");
    }
    if (err == ENOSYS) {
      unavailable(err, "io_uring_setup returned ENOSYS: the kernel lacks io_uring or a seccomp profile "
                "(e.g. a container runtime's default) blocks the io_uring syscalls");
    }
    if (err == EPERM) unavailable(err, "io_uring_setup returned EPERM: blocked by a seccomp or LSM policy");
    if (err == ENOMEM) {
      unavailable(err, "io_uring_setup returned ENOMEM: RLIMIT_MEMLOCK is too low for the ring");
    }
    unavailable(err, std::string("io_uring_setup failed: ") + std::strerror(err));
  }

  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  io_uring_queue_exit(&ring);
  if (probe == nullptr) unavailable(ENOSYS, "the kernel cannot report supported io_uring operations");
  struct needed { int opcode; const char* name; };
  const needed ops[] = {{IORING_OP_ACCEPT, "ACCEPT"},     {IORING_OP_RECV, "RECV"},
                        {IORING_OP_SENDMSG, "SENDMSG"},   {IORING_OP_MSG_RING, "MSG_RING"},
                        {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"}, {IORING_OP_READ, "READ"},
                        {IORING_OP_SEND, "SEND"},         {IORING_OP_TIMEOUT, "TIMEOUT"}};
  for (const auto& op : ops) {
    if (!io_uring_opcode_supported(probe, op.opcode)) {
      io_uring_free_probe(probe);
      unavailable(ENOSYS, std::string("the kernel lacks IORING_OP_") + op.name);
    }
  }
  io_uring_free_probe(probe);

  if (f.kernel_major < min_major || (f.kernel_major == min_major && f.kernel_minor < min_minor)) {
    unavailable(ENOSYS, "ringrpc needs Linux 6.0 or newer for multishot recv with provided buffer rings; "
                 "this kernel is " + std::to_string(f.kernel_major) + "." +
                 std::to_string(f.kernel_minor));
  }

  // Optional features, limited to RINGRPC_URING_AS_OF's kernel when it names an older one.
  int major = f.kernel_major, minor = f.kernel_minor;
  apply_as_of(major, minor);
  f.futex_wake = at_least(major, minor, 6, 7) && futex_wake_works();

  // Optional flags, newest first. SINGLE_ISSUER (6.0) lets the kernel skip locking because only
  // the owning thread submits; COOP_TASKRUN (5.19) avoids interrupting that thread to run
  // completions. DEFER_TASKRUN (6.1) batches completion work until we wait, but msg_ring into
  // such a ring from another thread was only made safe in 6.3, so it is used from 6.3 on.
  const bool has_defer = at_least(major, minor, 6, 3);
  const unsigned candidates[] = {
      has_defer ? (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) : 0u,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
      IORING_SETUP_COOP_TASKRUN,
  };
  for (unsigned flags : candidates) {
    if (flags != 0 && ring_accepts(flags)) {
      f.setup_flags = flags;
      break;
    }
  }
  return f;
}
}  // namespace

std::string io_uring_unavailable_reason() {
  try {
    probe_io_uring();
    return {};
  } catch (const std::system_error& e) {
    return e.what();
  }
}

}  // namespace ringrpc::detail

#pragma once
// IORING_OP_FUTEX_WAKE (Linux 6.7): a futex wake that rides a ring's submission instead of a
// futex() system call of its own. A reader that gave a pool work this turn wakes its worker in
// the same io_uring_enter that sends the turn's replies and then sleeps.
//
// Debian 12's liburing (2.3) knows neither the opcode nor the FUTEX2 flags, so the SQE is filled
// by hand, with the layout later liburing's io_uring_prep_futex_wake uses: the futex word in
// addr, how many to wake in off, the FUTEX2 size and private flags in fd, the bitset in addr3,
// futex_flags (rw_flags) zero. uring_probe.cpp checks that the kernel takes exactly this SQE.

#include <liburing.h>

#include <cstdint>

namespace ringrpc::detail {

inline constexpr std::uint8_t op_futex_wake = 52;        // IORING_OP_FUTEX_WAKE
inline constexpr unsigned futex2_size_u32 = 0x02;        // FUTEX2_SIZE_U32
inline constexpr unsigned futex2_private = 128;          // FUTEX2_PRIVATE (= FUTEX_PRIVATE_FLAG)
inline constexpr std::uint64_t futex_match_any = 0xffffffffu;  // FUTEX_BITSET_MATCH_ANY

/// Wakes up to `n` threads waiting (FUTEX_WAIT_PRIVATE) on `word`. The completion reports how
/// many woke, or -errno.
inline void prep_futex_wake(io_uring_sqe* sqe, const std::uint32_t* word, unsigned n) noexcept {
  io_uring_prep_rw(op_futex_wake, sqe, static_cast<int>(futex2_size_u32 | futex2_private), word, 0, n);
  sqe->rw_flags = 0;
  sqe->addr3 = futex_match_any;
}

}  // namespace ringrpc::detail

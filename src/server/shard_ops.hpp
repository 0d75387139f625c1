#pragma once
// The completions of the server's rings (acceptor and shards) in the terms of the server: the
// acceptor hands each accepted socket to a shard as a msg_ring, whose result is the fd, and a
// TLS listener's sockets and their receives are told apart from plaintext ones by their op.

#include "uring/cqe_tag.hpp"

namespace ringrpc::detail::shard_ops {

inline constexpr op handoff = op::msg_ring;            // res: a plaintext connection's fd
inline constexpr op handoff_sent = op::msg_ring_sent;  // the acceptor's own completion for it
inline constexpr op handoff_tls = op::owned_0;         // as handoff, for the TLS listener's
inline constexpr op recv_tls = op::owned_1;            // multishot recv: ciphertext for a session
// A shard's own connections to its downstreams (shard_downstreams.cpp).
inline constexpr op downstream_connect = op::owned_2;  // IORING_OP_CONNECT (res: 0 or -errno)
inline constexpr op downstream_recv = op::owned_3;     // multishot recv of replies
inline constexpr op downstream_send = op::owned_4;     // a gathered write of requests
// IORING_OP_FUTEX_WAKE of a pool's parked workers (tag: the pool). Posts a completion only
// when it fails (IOSQE_CQE_SKIP_SUCCESS).
inline constexpr op futex_wake = op::owned_5;

}  // namespace ringrpc::detail::shard_ops

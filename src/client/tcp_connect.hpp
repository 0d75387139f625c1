#pragma once
// Opening a TCP connection with a bounded wait, for the client library and ringrpc-load.

#include <chrono>
#include <cstdint>
#include <string>

namespace ringrpc::detail {

/// Resolves `host` (numeric or a name), connects to the first address that accepts within
/// `timeout`, and returns a non-blocking socket with TCP_NODELAY set, or -errno (EHOSTUNREACH
/// when the name does not resolve). Blocking: call it off any ring thread's hot path.
/// Non-blocking because io_uring does not need blocking mode, and a stray blocking call on the
/// socket must never stall an event loop.
int connect_tcp(const std::string& host, std::uint16_t port, std::chrono::nanoseconds timeout) noexcept;

}  // namespace ringrpc::detail

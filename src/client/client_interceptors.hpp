#pragma once
// Client and channel interceptor chains (ringrpc/interceptor.hpp): before_call when a call is
// made, after_call just before its callback. Both sides share this; a client calls it from
// call_async/send_one_way only when its chain is non-empty, a channel likewise.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/interceptor.hpp"

namespace ringrpc::detail {

/// One call's passage through a client-side chain.
struct client_chain_run {
  std::shared_ptr<const client_interceptors> chain;
  std::string method;
  bool one_way = false;
  std::uint32_t ran = 0;  // before_call that ran: their after_call runs
  std::int64_t start_ns = 0;
  bool refused = false;
  status code = status::ok;
  std::string message;  // the refusal's, or what the throw said

  /// Runs before_call in order until one refuses or throws.
  void before(std::string_view method, std::span<const std::byte> payload, std::vector<metadata_entry>& metadata,
              std::chrono::microseconds timeout, bool one_way);
  /// The outcome a refused call gets (views into this run).
  call_outcome refusal() const noexcept;
  /// after_call for those that ran, in reverse, then `done` with the (possibly replaced)
  /// outcome. A throwing after_call turns the outcome into intercepted/internal.
  void after_then(const call_outcome& o, unsigned attempts, const call_callback& done);
};

/// For client::call_async with a chain: runs before_call; a refused call is completed here
/// (after_call, then `done`) and false returned. Otherwise `done` is replaced by a wrapper that
/// runs after_call first, and true returned.
bool intercept_call(const std::shared_ptr<const client_interceptors>& chain, std::chrono::microseconds timeout,
                    std::string_view method, std::span<const std::byte> payload, call_callback& done,
                    std::vector<metadata_entry>& metadata);

/// For client::send_one_way with a chain: runs before_call, then `post` with the metadata the
/// interceptors added (unless one refused), then after_call. What `post` returns, or false.
bool intercept_one_way(const std::shared_ptr<const client_interceptors>& chain, std::string_view method,
                       std::span<const std::byte> payload,
                       const std::function<bool(std::span<const metadata_entry>)>& post);

}  // namespace ringrpc::detail

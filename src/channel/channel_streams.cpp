// A stream's path through the channel: pick a member as a call's first attempt, open the stream
// on that member's connection and leave it there until its end (ringrpc/channel.hpp says why
// an open is retried at most once, and only when the member's client refused it at once).

#include <algorithm>
#include <string>

#include "channel/channel_core.hpp"
#include "client/client_access.hpp"

namespace ringrpc::detail {

namespace {

// What a stream opened through the channel holds until its end, when the client loop lets go of
// it (client_stream_state::opener_hold): the member's connection, which the maintenance thread
// closes only once nothing holds it (an ejected or removed member's stream goes on to its end,
// as a call in flight does), and one unit of the member's outstanding work, which
// least_outstanding and p2c weigh.
class member_hold {
 public:
  explicit member_hold(std::shared_ptr<member_conn> m) noexcept : _member(std::move(m)) {
    _member->counters->outstanding.fetch_add(1, std::memory_order_relaxed);
  }
  ~member_hold() { _member->counters->outstanding.fetch_sub(1, std::memory_order_relaxed); }
  member_hold(const member_hold&) = delete;
  member_hold& operator=(const member_hold&) = delete;

 private:
  std::shared_ptr<member_conn> _member;
};

}  // namespace

client_stream channel_core::open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                                        const stream_options& options) {
  _streams.fetch_add(1, std::memory_order_relaxed);
  if (_closed.load(std::memory_order_acquire)) {
    return client_access::ended_stream(kind, call_error::client_closed, status::cancelled, "channel is closed");
  }
  if (_interceptors) {
    return client_access::ended_stream(kind, call_error::intercepted, status::unimplemented,
                                       "streams do not run channel interceptors yet: a channel with interceptors "
                                       "opens no streams");
  }
  // One retry at most, and only of a refusal before anything was sent: see channel.hpp.
  const unsigned attempts = std::min(_options.max_attempts, 2u);
  const member_conn* refused_by = nullptr;
  for (unsigned attempt = 1;; ++attempt) {
    std::shared_ptr<member_conn> m;
    {
      const auto snap = _snap.read();
      m = pick(*snap, refused_by);
    }
    if (!m) {
      _no_member.fetch_add(1, std::memory_order_relaxed);
      _stream_no_member.fetch_add(1, std::memory_order_relaxed);
      return client_access::ended_stream(kind, call_error::connection_closed, status::unavailable,
                                         std::string("no live member of ").append(_target));
    }
    call_error refused = call_error::none;
    client_stream s = client_access::open_stream(m->conn, method, kind, request, options,
                                                 std::make_shared<member_hold>(m), refused);
    // Only client_busy moves on: a member's client closed under us means the channel is
    // closing, and the other refusals would be the same on every member.
    if (refused != call_error::client_busy || attempt >= attempts || _closed.load(std::memory_order_acquire)) return s;
    _budget.on_failure();
    if (!_budget.retry_allowed()) {
      _retries_throttled.fetch_add(1, std::memory_order_relaxed);
      return s;
    }
    _retries.fetch_add(1, std::memory_order_relaxed);
    _stream_retries.fetch_add(1, std::memory_order_relaxed);
    refused_by = m.get();
  }
}

}  // namespace ringrpc::detail

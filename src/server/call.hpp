#pragma once
// A call in flight through the server pipeline, and the pool that recycles them.

#include <atomic>
#include <memory>
#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "wire/frame_codec.hpp"
#include "ringrpc/status.hpp"
#include "base/cancel_hub.hpp"
#include "base/mpmc_queue.hpp"
#include "exec/work_item.hpp"
#include "server/response_metadata.hpp"

namespace ringrpc {
struct peer_identity;
}

namespace ringrpc::detail {

struct connection;
class stream_state;

/// Created by a reader for each request it accepts (and for each error it must answer), owned
/// by whichever stage holds it: call queue -> handler -> responder -> pool. It holds one
/// reference on its connection for its whole life.
///
/// Exec schedules it as a work_item (its target and purpose); the rest is the server's. As an
/// mpsc_node it sits in the responder's inbox or a serial endpoint's inbox (never both at once);
/// as a pool_task it waits in a thread pool.
struct call : work_item {
  call* wq_next = nullptr;    // link in the connection's write queue
  connection* conn = nullptr;
  std::uint64_t id = 0;
  std::string_view method_name;  // points into that table, which outlives every call
  wire::Kind kind = wire::Kind::Request;
  std::int64_t received_ns = 0;
  std::int64_t deadline_ns = 0;  // steady clock; 0 = none
  std::span<const std::byte> payload;  // inside `request`
  std::vector<std::byte> request;      // the whole frame, prefix included (8-aligned start)
  std::vector<std::byte> reply;        // the whole answer frame, ready to write
  status answer_status = status::ok;  // what reply holds, for the metrics
  /// Set when the server gives up on the call while stopping; cancel frames and vanished
  /// peers are tracked on the connection instead (see connection::is_cancelled).
  std::atomic<bool> abandoned{false};
  std::string event_text;  // network_error: what happened
  // Bytes charged to the server's memory budget for this call (request by the reader, reply by
  // the responder when it queued it); released when the call is.
  std::size_t request_charged = 0;
  std::size_t reply_charged = 0;
  bool share_counted = false;  // counted in its caller's fair share (released with the call)
  // Streams (server/stream_state.hpp), beside the fields every answer reads. `stream_out`: a
  // message a handler wrote, made on its thread: it holds no count of `outstanding` and no
  // request bytes, only its reply's charge and `stream_out_bytes` of its connection's cap,
  // and relies on its stream's end (posted after it) to keep the connection alive.
  // `stream_end`: the carrier of a stream's end (`stream` names the stream), so the
  // responder's take of it takes the stream out of its connection's table.
  bool stream_out = false;
  bool stream_end = false;
  std::uint32_t cost_units = 0;  // what it counts there (call_units; caller_shares.hpp)
  /// Who the caller proved to be (its connection's TLS identity, or that plus an accepted
  /// token's subject); owned by the connection, which outlives the call. Null: nobody.
  const peer_identity* peer = nullptr;
  /// Headers and trailers the handler added for its answer; null (nothing allocated) for the
  /// calls that add none, whose replies take the fast encoding.
  std::unique_ptr<response_metadata> response_md;
  /// Made on first use by whoever owns the call (its handler, then its deferred reply's
  /// holder): on_cancel hooks and the client calls made for it. Null for almost every call.
  /// server_core::close_hub() ends it when the call is answered (call_cancel.cpp).
  std::shared_ptr<cancel_hub> hub;
  // Server interceptors (server/interceptors.hpp): how many before_call ran (0: the call was
  // not intercepted) and when the chain started.
  std::uint32_t intercepted_count = 0;
  std::int64_t intercept_start_ns = 0;
  stream_state* stream = nullptr;  // stream_end: whose end it carries
  // Its share of the connection's stream cap: a stream_out message's, or a received message's
  // that carried what its handler wrote (stream_state::_carrier).
  std::uint32_t stream_out_bytes = 0;
  // The reply's way out (responder_inline.cpp). `gated`: counted in its connection's
  // reply_gate until the responder has written it. `inline_write`: its handler's thread wrote
  // it (all of it, or the first `inline_sent` bytes); the responder only does the bookkeeping,
  // or writes the rest. Both are cleared when the responder takes the call.
  enum class inline_write : std::uint8_t { none, whole, partial };
  bool gated = false;
  inline_write written_by_handler = inline_write::none;
  std::uint32_t inline_sent = 0;

  std::span<const std::byte> wq_bytes() const noexcept { return reply; }
  /// A request or one-way message a client sent (not a local post or a connection event).
  bool from_client() const noexcept {
    return purpose == call_purpose::request || purpose == call_purpose::one_way;
  }
  static call* from_node(mpsc_node* n) noexcept { return static_cast<call*>(n); }
  static call* from_task(pool_task* t) noexcept { return static_cast<call*>(t); }
  static call* from_item(work_item* w) noexcept { return static_cast<call*>(w); }
};

/// Recycles calls so the steady state allocates nothing: buffers keep their capacity between
/// uses. Any thread may get() or put(). When empty it allocates; when full it frees.
class call_pool {
 public:
  explicit call_pool(std::size_t capacity) : _free(capacity) {}
  ~call_pool() {
    call* c = nullptr;
    while (_free.try_pop(c)) delete c;
  }
  call_pool(const call_pool&) = delete;
  call_pool& operator=(const call_pool&) = delete;

  call* get() {
    call* c = nullptr;
    if (_free.try_pop(c)) return c;
    return new call();
  }

  void put(call* c) noexcept {
    clean(c);
    if (!_free.try_push(c)) delete c;
  }

  /// Makes `c` ready for reuse (put() does this too).
  static void clean(call* c) noexcept {
    // A call that carried a big frame gives the memory back rather than pinning it.
    if (c->request.capacity() > keep_bytes) std::vector<std::byte>().swap(c->request);
    if (c->reply.capacity() > keep_bytes) std::vector<std::byte>().swap(c->reply);
    c->conn = nullptr;
    c->payload = {};
    c->target = nullptr;
    c->abandoned.store(false, std::memory_order_relaxed);
    c->request_charged = c->reply_charged = 0;
    c->over_share = false;
    c->share_counted = false;
    c->cost_units = 0;
    c->cost_hint = nullptr;
    c->peer = nullptr;
    if (c->response_md) c->response_md.reset();
    c->hub.reset();  // closed when answered; only a copy the registry let go of is left
    c->intercepted_count = 0;
    c->stream_out = false;
    c->stream_end = false;
    c->stream = nullptr;
    c->stream_out_bytes = 0;
  }

 private:
  // Idle calls in the pool keep at most this much per buffer: capacity x 2 x keep_bytes is all
  // the pool can pin after a burst of big calls (documented in docs/operations.md).
  static constexpr std::size_t keep_bytes = 8 * 1024;
  mpmc_queue<call*> _free;
};

/// One thread's stack of idle calls in front of the shared pool. A reader creates its calls
/// and (its responder running on the same thread) releases them, so most calls never leave
/// the thread and recycling them takes no atomic and touches no line other threads write.
/// Calls released elsewhere go to the shared pool; calls beyond `keep` here go back to it.
class call_cache {
 public:
  explicit call_cache(call_pool& shared) noexcept : _shared(shared) {}
  ~call_cache() {
    while (_top != nullptr) _shared.put(pop());
  }
  call_cache(const call_cache&) = delete;
  call_cache& operator=(const call_cache&) = delete;

  /// Throws std::bad_alloc when neither has one and no memory is left for a new one.
  call* get() { return _top != nullptr ? pop() : _shared.get(); }

  void put(call* c) noexcept {
    if (_count >= keep) {
      _shared.put(c);
      return;
    }
    call_pool::clean(c);
    c->wq_next = _top;  // the write-queue link is free while the call is idle
    _top = c;
    ++_count;
  }

 private:
  static constexpr std::size_t keep = 1024;
  call* pop() noexcept {
    call* c = _top;
    _top = c->wq_next;
    c->wq_next = nullptr;
    --_count;
    return c;
  }
  call_pool& _shared;
  call* _top = nullptr;
  std::size_t _count = 0;
};

}  // namespace ringrpc::detail

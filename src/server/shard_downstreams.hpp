#pragma once
// A shard's own connections to its server's downstreams (ringrpc/downstream.hpp), and the calls
// its on-shard handlers make on them: written by the shard's ring with its other writes, read
// with its receives, completed on its thread (docs/architecture.md, "Shard-local clients").
//
// Thread rules: everything here belongs to the shard's thread. The one way in from elsewhere
// is a call's cancellation (its parent fired on another thread, the frame's stop): the trigger
// sets the call's flag and posts the call to `_cancels` (its node is in the call), and the
// shard acts on it at its next turn. A call is never completed in place by another thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <linux/time_types.h>

#include "base/cancel_hub.hpp"
#include "base/counter.hpp"
#include "base/mpsc_queue.hpp"
#include "base/write_queue.hpp"
#include "client/inflight_table.hpp"
#include "exec/coro_home.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server_counters.hpp"
#include "wire/frame_assembler.hpp"
#include "wire/metadata_check.hpp"

struct io_uring_cqe;

namespace ringrpc::detail {

class ring;
class ring_waker;
class provided_buffers;
class shard;
struct downstream_spec;
struct downstream_conn;
class shard_downstreams;

/// Who asked to cancel a downstream call.
enum class downstream_cancel : std::uint8_t { none = 0, stop_token, parent };

/// One downstream call (or a Cancel frame the shard sends, born `finished`), pooled per shard.
struct downstream_call {
  mpsc_node cancel_node;  // in shard_downstreams::_cancels once a trigger fired
  downstream_call* wq_next = nullptr;
  downstream_conn* conn = nullptr;
  std::uint64_t id = 0;
  std::uint64_t seq = 0;  // bumped at each reuse: a deadline entry names (call, seq)
  std::int64_t deadline_ns = 0;
  call_callback done;
  std::vector<std::byte> frame;
  bool written = false;       // the frame left (or never will)
  bool finished = false;      // the callback has run
  bool counted = false;       // holds one of its target's pending calls and its bytes
  bool cancel_taken = false;  // the shard took it from _cancels (after a trigger fired)
  std::atomic<downstream_cancel> cancel_requested{downstream_cancel::none};
  struct stop_trigger {
    downstream_call* call;
    void operator()() const noexcept;
  };
  std::optional<std::stop_callback<stop_trigger>> stop;
  std::shared_ptr<cancel_hub> parent;
  cancel_hub::token parent_token = 0;
  shard_downstreams* owner = nullptr;

  std::span<const std::byte> wq_bytes() const noexcept { return frame; }
};

/// One connection of a shard to a downstream. Alive while an operation on the ring names it.
struct downstream_conn {
  enum class state : std::uint8_t { connecting, open, dead };
  downstream_conn(struct downstream_target& t, int fd_);

  downstream_target& target;
  const int fd;
  state st = state::connecting;
  frame_assembler assembler;
  gathered_writer<downstream_call> out;
  inflight_table<downstream_call> inflight;
  std::uint64_t next_id = 1;
  bool connect_armed = false;
  bool recv_armed = false;
  bool dirty = false;
  __kernel_timespec connect_timeout{};  // read by the kernel when the connect is submitted
};

/// One downstream as this shard sees it: its connection, its bounds, its backoff.
struct downstream_target {
  const downstream_spec* spec = nullptr;
  downstream_conn* conn = nullptr;  // the current one (a failed one leaves at once)
  std::uint32_t pending_calls = 0;
  std::size_t pending_bytes = 0;
  std::int64_t retry_at_ns = 0;  // while in the future, calls fail at once (the backoff)
  std::int64_t backoff_ns = 0;
  std::string down_why;          // why the last connect failed
};

class shard_downstreams {
 public:
  using counters = counter_array<server_counter, server_counter_count>;
  /// `counts`: the shard's counters (the downstream_* ones are bumped here, on its thread).
  shard_downstreams(shard& s, ring& r, provided_buffers& buffers, ring_waker& waker,
                    std::atomic<std::uint64_t>& in_use, counters& counts);
  ~shard_downstreams();
  shard_downstreams(const shard_downstreams&) = delete;
  shard_downstreams& operator=(const shard_downstreams&) = delete;

  /// A call to `spec` (the calling coroutine's awaitable). `done` runs on this thread: inline for
  /// a call refused at once, else from a completion or at a later turn.
  void call(const downstream_spec& spec, std::string_view method, std::span<const std::byte> payload,
            call_callback done, call_options options);
  /// Where a coroutine without a home resumes after a downstream call: this shard.
  coro_abi::coro_home* home() noexcept { return &_home; }

  // Driven by the shard's loop.
  void handle(const io_uring_cqe& cqe);
  /// After the turn's completions: cancellations other threads posted, then deadlines.
  void after_completions(std::int64_t now);
  /// At the end of the turn: the requests queued this turn go out with the turn's submit.
  void flush() noexcept;
  /// The nearest deadline of a call in flight (0: none).
  std::int64_t next_deadline() const noexcept { return _deadlines.empty() ? 0 : _deadlines.front().at; }
  bool cancels_empty() const noexcept { return _cancels.empty(); }
  /// The server stops: every call fails, every connection closes, later calls fail at once.
  void close_all() noexcept;
  /// No connection left (after close_all(): the loop may end).
  bool idle() const noexcept { return _conns_alive == 0; }

  /// Any thread: a trigger fired for `k`.
  void request_cancel(downstream_call* k, downstream_cancel why) noexcept;

 private:
  struct deadline {
    std::int64_t at;
    downstream_call* call;
    std::uint64_t seq;
    bool operator>(const deadline& o) const noexcept { return at > o.at; }
  };

  downstream_target& target_of(const downstream_spec& spec);
  downstream_conn* connect(downstream_target& t, std::string& why) noexcept;
  void on_connect(downstream_conn* c, int res) noexcept;
  void on_recv(downstream_conn* c, const io_uring_cqe& cqe) noexcept;
  bool on_frame(downstream_conn* c, std::span<const std::byte> frame) noexcept;
  void on_write(downstream_conn* c, int res) noexcept;
  void start_write(downstream_conn* c) noexcept;
  void mark_dirty(downstream_conn* c);
  void complete(downstream_call* k, const call_outcome& o) noexcept;
  void written(downstream_call* k) noexcept;
  void uncount(downstream_call* k) noexcept;
  void send_cancel(downstream_conn* c, std::uint64_t id) noexcept;
  void take_cancels() noexcept;
  void expire(std::int64_t now) noexcept;
  void fail_connection(downstream_conn* c, call_error e, std::string_view why) noexcept;
  void maybe_free(downstream_conn* c) noexcept;
  downstream_call* get_call();
  void maybe_recycle(downstream_call* k) noexcept;
  static void disarm(downstream_call* k) noexcept;

  shard& _shard;
  ring& _ring;
  provided_buffers& _buffers;
  ring_waker& _waker;
  coro_abi::coro_home _home;
  std::vector<std::unique_ptr<downstream_target>> _targets;  // by downstream_spec::index
  std::vector<downstream_conn*> _dirty;
  std::vector<downstream_call*> _free;
  std::vector<deadline> _deadlines;  // min-heap; entries of finished calls are skipped lazily
  mpsc_queue _cancels;
  std::vector<std::byte> _scratch;  // aligned copy of one reply for decoding
  std::size_t _conns_alive = 0;
  std::atomic<std::uint64_t>& _in_use;  // the shard's: calls taken from _free, not given back
  counters& _counts;
  std::uint64_t _jitter;  // xorshift state for the backoff's jitter
  bool _closing = false;
};

}  // namespace ringrpc::detail

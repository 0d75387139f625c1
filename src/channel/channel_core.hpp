#pragma once
// The channel's parts: members with one connection each, an immutable snapshot of the
// members taking calls (swapped atomically, read without a lock by every call), and one
// maintenance thread that owns every change: membership from the resolver, ejections,
// reconnects with backoff, health checks, and closing retired connections once no call
// holds them.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "channel/retry_budget.hpp"
#include "channel/snapshot_cell.hpp"
#include "ringrpc/channel.hpp"
#include "ringrpc/client_stream.hpp"

namespace ringrpc::detail {

/// Counters of one member address; they outlive its connections.
struct member_counters {
  std::atomic<std::uint64_t> outstanding{0};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> failures{0};
};

/// One connection to one member. Immutable but for its flags; replaced whole on reconnect.
struct member_conn {
  member_conn(member_address a, std::shared_ptr<member_counters> c, client cl)
      : address(std::move(a)), label(address.host + ":" + std::to_string(address.port)),
        counters(std::move(c)), conn(std::move(cl)) {}
  member_address address;
  std::string label;
  std::shared_ptr<member_counters> counters;
  client conn;
  std::atomic<bool> failed{false};        // connection failed: eject
  std::atomic<unsigned> missed_checks{0};  // health checks missed in a row
  std::atomic<bool> check_in_flight{false};
  std::atomic<bool> old_server_noted{false};  // logged once: no built-in ping there
  std::atomic<bool> leaving{false};           // its ping said SHUTTING_DOWN: stay away longer
};

struct member_snapshot {
  std::vector<std::shared_ptr<member_conn>> up;
};

class channel_core {
 public:
  channel_core(std::shared_ptr<resolver> r, channel_options options);
  ~channel_core();

  void start();
  void close() noexcept;

  void call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                  channel_call_options options);
  bool in_runtime_thread() const noexcept { return _runtime->in_runtime_thread(); }
  /// A stream on one member, for its whole life (channel_streams.cpp).
  client_stream open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                            const stream_options& options);
  /// One-way message to one member, picked as a call's first attempt; never retried.
  bool send_one_way(std::string_view method, std::span<const std::byte> payload,
                    const channel_call_options& options);
  const channel_options& options() const noexcept { return _options; }

  std::size_t up_count() const noexcept { return _snap.read()->up.size(); }
  std::vector<channel_member_state> members() const;
  channel_stats stats() const;

  /// From a call's callback: the connection failed; the maintenance thread ejects it.
  void report_failed(member_conn& m) noexcept;

 public:
  struct call_state;  // channel_calls.cpp; public only for its pool

 private:
  struct member_entry {
    member_address address;
    std::shared_ptr<member_counters> counters = std::make_shared<member_counters>();
    std::shared_ptr<member_conn> conn;
    std::chrono::milliseconds backoff{0};
    std::chrono::steady_clock::time_point next_attempt{};
    bool ever_connected = false;
  };

  void run();
  void apply_membership(std::vector<member_address> members);
  void eject_failed();
  void connect_due();
  void check_health(const std::vector<std::shared_ptr<member_conn>>& conns);
  void publish();
  void retire(std::shared_ptr<member_conn> conn);

  // noexcept: they run in a client callback on the I/O thread, where a throw would be
  // swallowed and the call never finished (its coroutine never resumed, stop() waiting on it).
  void attempt(call_state* st, std::span<const std::byte> payload) noexcept;
  void on_outcome(call_state* st, member_conn& m, const call_outcome& o, bool sent,
                  std::span<const std::byte> payload) noexcept;
  /// The call's last word: runs its callback once, then gives its state back to the pool.
  static void finish(call_state* st, const call_outcome& o) noexcept;
  std::shared_ptr<member_conn> pick(const member_snapshot& snap, const member_conn* avoid) noexcept;

  channel_options _options;
  std::shared_ptr<const client_interceptors> _interceptors;  // null: none (client_interceptors.hpp)
  std::shared_ptr<resolver> _resolver;
  std::shared_ptr<client_runtime> _runtime;
  std::string _target;
  std::uint64_t _id;  // for per-thread pick state
  snapshot_cell<member_snapshot> _snap;
  retry_budget _budget;

  std::atomic<std::uint64_t> _retries{0}, _retries_throttled{0}, _failed_not_idempotent{0}, _no_member{0},
      _ejections{0}, _reconnects{0}, _membership_updates{0}, _calls_removed{0};
  // Streams' share of the counters above, kept apart so that stats() can count calls alone.
  std::atomic<std::uint64_t> _streams{0}, _stream_retries{0}, _stream_no_member{0};

  // The maintenance thread's state.
  mutable std::mutex _mu;
  std::condition_variable _cv;
  bool _stop = false;
  bool _wake = false;
  std::optional<std::vector<member_address>> _pending_members;
  std::map<std::string, member_entry> _entries;  // by HOST:PORT
  std::vector<std::shared_ptr<member_conn>> _retired;
  std::chrono::steady_clock::time_point _next_health{};
  std::thread _thread;
  std::atomic<bool> _closed{false};
};

}  // namespace ringrpc::detail

#pragma once
// One open stream on the server (docs/design/streams.md, "Server internals: what carries what"),
// shared by the handles its handler holds (ringrpc/stream.hpp) and by its connection's table on
// the shard. The shard's thread feeds it (messages, half-close, credit, ends it sees); its lane
// runs the handler's callbacks on the method's pool, one at a time; any thread writes and ends
// it. Ends are decided once, under `_mu`.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exec/endpoint_slot.hpp"
#include "exec/serial_lane.hpp"
#include "ringrpc/metadata.hpp"
#include "ringrpc/status.hpp"
#include "ringrpc/stream.hpp"
#include "server/address_streams.hpp"
#include "server/call.hpp"
#include "server/interceptors.hpp"
#include "server/response_metadata.hpp"
#include "server/stream_receive_credit.hpp"
#include "wire/stream_credit.hpp"

namespace ringrpc::detail {

class server_core;

class stream_state : public std::enable_shared_from_this<stream_state> {
 public:
  /// Shard thread, at the open. `open` is the StreamOpen's call (charged, counted in its
  /// connection's outstanding calls and its caller's share): it lives until the factory has
  /// run, then is released, so neither its bytes nor its share stay with a long stream. `end`
  /// is a fresh call of the connection (one of its outstanding calls): it carries the
  /// stream's end, and keeps the connection alive under the messages written before it.
  /// `slot` counts the stream in flight (endpoint_slot::enter_stream) until its lane is done.
  stream_state(server_core& core, call* open, call* end, const frame_view& v, endpoint_slot& slot,
               std::shared_ptr<const stream_factory> factory, stream_kind kind);
  ~stream_state();
  stream_state(const stream_state&) = delete;
  stream_state& operator=(const stream_state&) = delete;

  // --- the shard's thread
  /// Queues the factory's run, the first thing the lane does, as a call to the method would
  /// be: within the pool's bound and the caller's fair share. False when the pool refused it:
  /// nothing ran, and the open call is the shard's again (take_back_open).
  bool start() noexcept;
  /// After a refused start(): the open call, to be answered as a refused call is, and the end's
  /// carrier, to be released unsent.
  call* take_back_open() noexcept { return std::exchange(_open, nullptr); }
  call* take_back_end() noexcept { return std::exchange(_end, nullptr); }
  /// Shard thread: the connection's stream messages on their way went below half their cap;
  /// a writer held back by it (and not by credit) hears on_writable().
  void on_room() noexcept;
  /// A StreamMessage's call (charged at arrival). False when the peer had no credit for it:
  /// the stream has been ended then, and `m` is still the caller's.
  enum class arrival : std::uint8_t { queued, beyond_credit, ended };
  arrival on_message(call* m) noexcept;
  /// A StreamHalfClose's call, queued behind the messages sent before it.
  void on_half_close(call* h) noexcept;
  /// A StreamCredit. False when the grant overflowed (the stream has been ended then).
  bool on_credit(std::uint32_t messages, std::uint64_t bytes) noexcept;
  bool half_closed() const noexcept { return _half_closed; }
  /// Shard thread, before start(): the stream's slot of its address's count, given back with
  /// the server's slot when its last callback has run.
  void hold_address_slot(std::shared_ptr<address_streams::count> from) noexcept { _from_address = std::move(from); }
  /// Shard thread: the table's reference, dropped when the stream leaves the table.
  std::shared_ptr<stream_state> table_ref;

  // --- any thread
  /// Ends the stream (first end wins): `code` ok is a Reply carrying `reply`, else an Error with
  /// `message`. `by_handler`: finish()/fail(), so on_cancel does not run. False when it had
  /// ended.
  bool end(status code, std::string_view message, bool by_handler, std::span<const std::byte> reply = {}) noexcept;
  write_result write(std::span<const std::byte> message) noexcept;
  bool add_pair(bool trailer, std::string_view key, std::string_view value) noexcept;
  /// Nothing of the stream has gone to the client yet (no message, headers or end).
  bool wrote_nothing() const noexcept {
    std::lock_guard lock(_mu);
    return !_headers_sent && !_ended;
  }
  bool ended() const noexcept { return _ended_flag.load(std::memory_order_acquire); }
  void pause_reading() noexcept { _reading_paused.store(true, std::memory_order_seq_cst); }
  void resume_reading() noexcept;

  std::uint64_t id() const noexcept { return _id; }
  std::string_view method() const noexcept { return _method; }
  stream_kind kind() const noexcept { return _kind; }
  std::int64_t deadline_ns() const noexcept { return _deadline_ns; }
  std::span<const metadata_entry> metadata() const noexcept { return _metadata; }
  const peer_identity* peer() const noexcept { return _peer.get(); }
  /// Written once by the lane before the factory runs (which every handle's user comes after).
  std::span<const metadata_entry> annotations() const noexcept { return _annotations; }

 private:
  // The lane's items besides the received calls: the open (the factory) and a poke that makes
  // the lane look at its signals (writable, ended).
  struct marker : work_item {};
  struct drain_task : pool_task {
    stream_state* self = nullptr;
    std::shared_ptr<stream_state> keep;  // set by whoever made the drain due (the lane's owner)
  };
  static constexpr std::uint8_t signal_writable = 1;
  static constexpr std::uint8_t signal_ended = 2;
  static constexpr std::uint8_t signal_resume = 4;

  /// `on_reader`: called on the connection's reader thread, which wakes the pool at the end
  /// of its turn.
  void push(work_item* item, bool on_reader = false) noexcept;
  void poke(std::uint8_t signals) noexcept;
  static void drain_entry(pool_task* t) noexcept;
  void drain(std::shared_ptr<stream_state> keep) noexcept;
  void run_open(server_stream& handle) noexcept;
  bool intercept_open() noexcept;
  void run_message(server_stream& handle, call* m) noexcept;
  void run_signals(server_stream& handle) noexcept;
  void take_received(server_stream& handle, call* m) noexcept;
  void run_held(server_stream& handle) noexcept;
  template <class F>
  void guarded(F&& f) noexcept;
  void encode_end_locked(status code, std::string_view message, std::span<const std::byte> reply) noexcept;
  void post_end_locked() noexcept;
  void encode_message_locked(std::span<const std::byte> message, std::vector<std::byte>& into);
  call* new_message_call_locked();
  bool flush_carrier_locked() noexcept;
  void release_open() noexcept;

  server_core& _core;
  endpoint_slot& _slot;
  thread_pool& _pool;
  const std::shared_ptr<const stream_factory> _factory;
  const std::uint64_t _id;
  const stream_kind _kind;
  const std::int64_t _deadline_ns;  // steady clock; 0: none
  const std::string _method;        // a copy: the open call goes with the end
  const std::vector<metadata_entry> _metadata;         // copies likewise (empty: no allocation)
  const std::shared_ptr<const peer_identity> _peer;    // shared: a handle may outlive the connection
  std::span<const std::byte> _request;  // a server stream's request, inside the open call
  call* _open;                          // the lane's until the factory has run

  // The lane (only its owner touches _handler and _done).
  serial_lane _lane;
  drain_task _drain;
  marker _open_item;
  marker _poke_item;
  std::atomic<bool> _poke_queued{false};
  std::atomic<std::uint8_t> _signals{0};
  std::unique_ptr<stream_handler> _handler;
  std::unique_ptr<intercepted_stream> _intercepted;  // the server has interceptors and they saw the open
  std::vector<metadata_entry> _annotations;  // the open's interceptors' (call_context::annotate)
  bool _done = false;
  std::shared_ptr<address_streams::count> _from_address;  // see hold_address_slot
  // Received calls waiting while reading is paused, oldest first, linked by call::wq_next (a
  // call in the lane is in no write queue). Bounded by the receive credit: it comes back only
  // as they are handled.
  call* _held_head = nullptr;
  call* _held_tail = nullptr;
  std::atomic<bool> _reading_paused{false};

  bool _half_closed = false;  // shard thread
  // Arrivals checked on the shard's thread, consumption and grants on the lane (each side its
  // own counts: no lock per message).
  stream_receive_credit _receive;

  mutable std::mutex _mu;  // guards what follows
  call* _end;               // the end's carrier, until the end is posted
  // The received message whose on_message is running on the lane, when the handler's first
  // write from there went into that message's own call: it goes out with the message's
  // release at the end of run_message (one call and one post per echoed message, as a unary
  // call has). Anything else posted before then takes the written message out first
  // (flush_carrier_locked), so the stream's order stays the order of its writes.
  call* _carrier = nullptr;
  connection* _conn;        // alive while _end is (it holds one of the connection's calls)
  std::atomic<std::size_t>& _out_bytes;  // the connection's stream_out_bytes (connection.hpp)
  send_credit _send;
  std::unique_ptr<response_metadata> _md;
  status _end_status = status::ok;
  bool _ended = false;
  bool _ended_by_handler = false;
  bool _want_writable = false;
  bool _headers_sent = false;
  std::atomic<bool> _ended_flag{false};  // _ended, readable without the lock
};

}  // namespace ringrpc::detail

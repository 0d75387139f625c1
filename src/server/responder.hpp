#pragma once
// A shard's responder: writes every reply of the connections its reader owns.

#include <cstdint>
#include <memory>
#include <vector>

#include "base/counter.hpp"
#include "base/mpsc_queue.hpp"
#include "server/call.hpp"
#include "server/connection.hpp"
#include "server/memory_budget.hpp"
#include "server/write_slots.hpp"
#include "uring/ring.hpp"

namespace ringrpc::detail {

class server_core;
class shard;

/// The responder role of one shard. It has no thread of its own: its reader's thread drives it
/// on the reader's ring, so a call answered by a direct endpoint (or refused by the reader)
/// goes from receive to sendmsg without a hand-off or a wake-up, and the turn's receives and
/// writes leave in one io_uring_enter. The design card's rules hold per shard: each reply is
/// appended to its connection's write queue (per-connection order = completion order), at most
/// one gathered sendmsg is in flight per connection, the unwritten tail of a partial write is
/// requeued at the head, and each call is released once its bytes are written or its peer is
/// gone.
///
/// Threads: post() from any thread (handlers); everything else on the reader's thread.
class responder {
 public:
  responder(server_core& core, shard& owner);
  responder(const responder&) = delete;
  responder& operator=(const responder&) = delete;

  /// The ring the writes go to (the reader's, once its thread created it).
  void attach(ring& r) noexcept { _ring = &r; }

  /// Any thread: hands over a finished call. The caller then wakes the reader (once per batch).
  void post(call* c) noexcept {
    gate(c);
    _inbox.push(c);
  }
  /// Any thread: a call whose handler's thread wrote its reply, or began to
  /// (call::written_by_handler): the responder does the bookkeeping, or writes the rest.
  void post_written(call* c) noexcept { _inbox.push(c); }
  /// Reader thread: queues a reply answered on this thread (no inbox, no wake-up). Not gated
  /// call by call: from here it goes straight into the connection's write slot, and a lent
  /// slot holds the gate itself (take_slot), so a `direct` reply costs no atomic operation of
  /// its own on the gate (two per reply were 3% of a direct server's CPU at depth 16).
  void enqueue_local(call* c) noexcept { enqueue(c); }

  /// Reader thread, each turn: replies handlers posted.
  void take_inbox() noexcept;
  /// Reader thread, end of turn: one gathered write per connection that got replies this turn.
  void flush() noexcept;
  /// Reader thread: a TLS connection's session has ciphertext of its own to send (handshake,
  /// alerts); it goes out with this turn's writes, ahead of any reply sealed after it.
  void kick(connection* c) noexcept;
  /// The connection is closing: replies a gRPC session held back for its client's window,
  /// which no write in flight will fail, are let go (responder_tls.cpp).
  void drop_held_replies(connection* c) noexcept;
  /// Reader thread: a write's completion.
  void on_write(connection* c, int res) noexcept;
  /// Reader thread, stopping: shut down every socket that still has replies queued. A peer that
  /// half-closed and never reads would otherwise keep a write, and so its connection, alive.
  void shut_down_writers() noexcept;

  /// Reader thread, each sweep: memory kept for writes that no longer come goes back.
  void trim() noexcept { _slots.trim(); }
  /// Whether handlers posted replies not taken yet (the reader must not sleep on them).
  bool inbox_empty() const noexcept { return _inbox.empty(); }
  /// Reader thread, before it sleeps: a connection whose write waited for a handler's own
  /// write can go now (the reader must not sleep on it).
  bool deferred_ready() const noexcept;

  std::uint64_t released() const noexcept { return _released.get(); }
  std::uint64_t partial_writes() const noexcept { return _partial_writes.get(); }
  std::uint64_t bytes_out() const noexcept { return _bytes_out.get(); }

 private:
  // Counts the call in its connection's reply_gate until release_call().
  static void gate(call* c) noexcept {
    c->gated = true;
    c->conn->reply_gate.fetch_add(1, std::memory_order_seq_cst);
  }
  void enqueue(call* c) noexcept;
  void queue_reply(call* k, bool first, std::size_t already_written) noexcept;
  void take_handler_write(call* k) noexcept;  // responder_inline.cpp
  bool handler_writing(connection* c) noexcept;
  void retry_deferred() noexcept;
  void start_write(connection* c) noexcept;
  // TLS connections (responder_tls.cpp): replies are sealed into ciphertext before the write.
  bool take_slot(connection* c) noexcept;
  void start_tls_write(connection* c) noexcept;
  void on_tls_write(connection* c, int res) noexcept;
  void after_written(connection* c, write_slot& w) noexcept;
  void fail_writes(connection* c) noexcept;
  void release_call(call* c) noexcept;
  void maybe_resume(connection* c) noexcept;
  void give_back_if_done(connection* c) noexcept;
  void link_writing(write_slot* w) noexcept;
  void unlink_writing(write_slot* w) noexcept;

  server_core& _core;
  shard& _owner;
  ring* _ring = nullptr;
  mpsc_queue _inbox;
  const std::size_t _max_queued_bytes;
  write_slot* _writing = nullptr;  // the slots of connections with replies queued
  std::vector<connection*> _dirty;  // got replies this turn; each holds a reference
  // Replies queued while a handler's thread wrote on the connection; each holds a reference.
  std::vector<connection*> _deferred;
  memory_budget::account _account;  // replies queued and calls released
  write_slots _slots;
  counter _released;
  counter _partial_writes;
  counter _bytes_out;
  std::vector<std::byte> _seal_scratch;  // gathered replies, sealed in one go (few, full records)
};

}  // namespace ringrpc::detail

// Replies their handlers wrote themselves. A pool handler that answers while its shard sleeps
// writes the reply to the socket on its own thread (server_core::write_inline, answer.cpp), as
// Hadoop's handlers do when the connection has nothing queued: waking the shard to write it
// would cost a wake-up and, on one core, two context switches per call. The responder then
// only does the call's bookkeeping when it next takes its inbox (or writes the rest of a reply
// the socket took only part of, ahead of everything queued after it).
//
// connection::reply_gate keeps the two writers apart: a handler writes only when nothing is in
// the responder's hands for the connection, and the responder defers its write while a
// handler's is under way (handler_writing), retrying once the handler is done (it wakes the
// shard when it sees replies waiting).
#include "server/responder.hpp"

#include <new>
#include <vector>

#include "server/server_core.hpp"
#include "server/shard.hpp"

namespace ringrpc::detail {

void responder::take_handler_write(call* k) noexcept {
  connection* c = k->conn;
  const call::inline_write how = k->written_by_handler;
  k->written_by_handler = call::inline_write::none;
  if (how == call::inline_write::whole) {
    _bytes_out.add(k->reply.size());
    c->last_write_ns.store(_owner.turn_ns(), std::memory_order_relaxed);
    release_call(k);
    return;
  }
  // The socket took part (or none) of it: the rest is ours, first in the queue. The gate
  // counts it from now on, and the handler's bit goes with the same step.
  const std::size_t sent = k->inline_sent;
  k->inline_sent = 0;
  k->gated = true;
  c->reply_gate.fetch_add(1u - inline_writer_bit, std::memory_order_seq_cst);
  if (sent != 0) {
    _partial_writes.add();
    _bytes_out.add(sent);
    c->last_write_ns.store(_owner.turn_ns(), std::memory_order_relaxed);
  }
  if (c->write_failed.load(std::memory_order_relaxed)) {
    release_call(k);  // nobody left to read the rest
    return;
  }
  queue_reply(k, true, sent);
}

bool responder::handler_writing(connection* c) noexcept {
  if ((c->reply_gate.load(std::memory_order_seq_cst) & inline_writer_bit) == 0) return false;
  write_slot& w = *c->write;
  if (!w.deferred) {
    try {
      _deferred.push_back(c);
    } catch (const std::bad_alloc&) {
      // No memory to remember the connection: it fails alone, as for any reply it could not queue.
      _core.note_out_of_memory();
      fail_writes(c);
      return true;
    }
    w.deferred = true;
    retain(c);
  }
  return true;
}

void responder::retry_deferred() noexcept {
  std::vector<connection*> waiting;
  waiting.swap(_deferred);
  for (connection* c : waiting) {
    if (write_slot* w = c->write) {
      w->deferred = false;
      if (!w->in_flight && !w->dirty) start_write(c);  // a dirty one goes in flush()'s loop
      if (!w->dirty) give_back_if_done(c);
    }
    release(c);
  }
  // Keep the capacity: a connection deferred once is likely to be again.
  if (_deferred.empty()) {
    waiting.clear();
    _deferred.swap(waiting);
  }
}

bool responder::deferred_ready() const noexcept {
  for (const connection* c : _deferred) {
    if ((c->reply_gate.load(std::memory_order_seq_cst) & inline_writer_bit) == 0) return true;
  }
  return false;
}

}  // namespace ringrpc::detail

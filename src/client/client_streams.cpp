// The client loop's side of streams (docs/design/streams.md; the handle's side is
// client_stream.cpp). Opens and the handles' frames go out while their stream is open; the
// server's messages, grants and end come in here and are handed to the handle through the
// stream's state. Every end the loop sees (the server's answer, the deadline, a protocol fault,
// the connection) goes through end_stream(), which takes the stream out of the connection's
// table, gives back what it held of max_pending_calls/bytes and, when the server may still
// think it open, sends Cancel.
#include "client/client_loop.hpp"

#include "base/tcp_keepalive.hpp"
#include "client/client_interceptors.hpp"
#include "client/reply_outcome.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

namespace ringrpc::detail {

namespace {

// What a server that predates streams answers to a kind it does not know (docs/protocol.md,
// "Errors"), for that id. To a StreamOpen it means: no streams on this server.
constexpr std::string_view old_server_answer = "unknown frame kind";

// A stream may wait on the server for as long as it likes (a subscription), so a server that
// vanished without a FIN or RST is found by TCP keepalive: probes after a minute of silence,
// the connection lost two minutes after the last byte at most (base/tcp_keepalive.hpp). Set at
// a connection's first stream; calls alone have their deadlines.
void keep_alive_for_streams(client_conn* c) noexcept {
  if (c->keepalive_on) return;
  c->keepalive_on = true;
  (void)enable_keepalive(c->fd, std::chrono::seconds(60), std::chrono::seconds(10), 6);
}

// The stream's one end, as its interceptors' after_call sees it (on this thread, as calls'
// after_call runs where their callback does). The end is the handle's already: a throw is dropped.
void intercepted_end(client_stream_state& s, const call_outcome& o) noexcept {
  const std::shared_ptr<client_chain_run> run = std::move(s.intercepted);
  try {
    run->after_then(o, 1, nullptr);
  } catch (...) {
    // after_then turns throws into an outcome; only its copies can throw, and nobody waits on it.
  }
}

}  // namespace

void client_loop::accept_stream_open(pending* p) noexcept {
  client_conn* c = p->conn;
  client_stream_state* s = p->stream;
  bool cancelled_before = false;
  {
    const std::lock_guard lock(s->mu);
    cancelled_before = s->ended;
  }
  bool inserted = false;
  if (!c->dead && !cancelled_before) {
    try {
      inserted = c->streams.insert(s);
      if (inserted && s->deadline_ns != 0) add_deadline(c, s->deadline_ns, s->id);
    } catch (const std::bad_alloc&) {
      if (inserted) c->streams.take(s->id);
      inserted = false;
    }
  }
  if (inserted) {
    keep_alive_for_streams(c);
    // A co_write on this stream may have parked for room before it was in the table, where a
    // give-back since (this turn's completions come before the inbox) did not look.
    if (c->room_waiters.load(std::memory_order_seq_cst) != 0) wake_room_writers(c);
  }
  if (!inserted) {
    // Never sent, so nothing to tell the server. A stream its handle cancelled keeps that end.
    put_pending(p);
    if (c->dead && c->detached) {
      end_stream(c, s, local_end(call_error::client_closed, status::cancelled, "client closed"), false);
    } else if (c->dead) {
      // Why the connection failed, as the streams open then were told (end_all_streams).
      std::string why;
      try {
        why = c->failure.empty() ? std::string("connection lost: the connection is closed")
                                 : std::string("connection lost: ").append(c->failure);
      } catch (const std::bad_alloc&) {
        // The end keeps its error and code.
      }
      end_stream(c, s, local_end(call_error::connection_closed, status::unavailable, why), false);
    } else {
      end_stream(c, s, local_end(call_error::client_busy, status::resource_exhausted, "too many calls in flight"), false);
    }
    return;
  }
  c->out.queue().push_back(p);
  mark_dirty(c);
}

void client_loop::accept_stream_frame(pending* p) noexcept {
  client_conn* c = p->conn;
  c->posted_by_callers.fetch_sub(1, std::memory_order_relaxed);
  client_stream_state* s = c->dead ? nullptr : c->streams.find(p->id);
  if (s == nullptr) {
    put_pending(p);  // the stream ended meanwhile: the server needs nothing more of it
  } else if (p->kind == pending::what::stream_cancel) {
    put_pending(p);
    // The handle has set its end (cancelled) already; this takes the stream out and tells the server.
    end_stream(c, s, local_end(call_error::cancelled, status::cancelled, "cancelled by the caller"), true);
  } else {
    c->out.queue().push_back(p);
    mark_dirty(c);
  }
  maybe_free(c);
}

void client_loop::on_stream_frame(client_conn* c, const frame_view& v) noexcept {
  client_stream_state* s = c->streams.find(v.call_id);
  if (s == nullptr) return;  // it crossed our Cancel (the handle's, or the deadline's)
  const bool first = !s->heard;
  s->heard = true;
  std::string refused;  // response metadata past our caps: this stream fails, the connection stays
  if (v.metadata != nullptr || v.trailers != nullptr) {
    bool ok = false;
    try {
      ok = response_metadata_ok(c->response_metadata_caps, v, refused);
    } catch (const std::bad_alloc&) {
      refused.clear();
    }
    if (!ok) {
      end_stream(c, s, local_end(call_error::protocol_error, status::internal, refused), true);
      return;
    }
  }
  switch (v.kind) {
    case wire::Kind::StreamMessage:
      on_stream_message(c, s, v);
      return;
    case wire::Kind::StreamCredit: {
      bool granted = false;
      {
        const stream_lock lock(*s);
        granted = s->send.grant(v.credit_messages, v.credit_bytes);
        s->cv.notify_all();
        s->wake_writer_locked();
      }
      if (!granted) {
        end_stream(c, s, local_end(call_error::protocol_error, status::internal, "the server's credit grant overflows"),
                   true);
      }
      return;
    }
    case wire::Kind::Reply:
    case wire::Kind::Error: {
      call_outcome o;
      o.headers = metadata_view(v.metadata);
      o.trailers = metadata_view(v.trailers);
      if (v.kind == wire::Kind::Reply) {
        o.payload = v.payload;
      } else if (first && v.code == status::bad_request && v.message == old_server_answer) {
        o.error = call_error::server_status;
        o.code = status::unimplemented;
        o.message = "the server does not support streams";
      } else {
        o.error = call_error::server_status;
        o.code = v.code == status::ok ? status::internal : v.code;
        o.message = v.message;
        o.retry_after_ms = v.retry_after_ms;
        o.details = v.details;
      }
      end_stream(c, s, o, false);
      return;
    }
    default:
      end_stream(c, s,
                 local_end(call_error::protocol_error, status::internal, "server sent an unexpected frame kind on a stream"),
                 true);
      return;
  }
}

void client_loop::on_stream_message(client_conn* c, client_stream_state* s, const frame_view& v) noexcept {
  enum class fault { none, beyond_credit, out_of_memory } f = fault::none;
  {
    const stream_lock lock(*s);
    if (s->ended) return;  // cancelled by its handle: the Cancel is on its way
    if (!s->receive.arrive(v.payload.size())) {
      f = fault::beyond_credit;
    } else {
      try {
        if (v.metadata != nullptr && s->headers.empty()) {
          for (const metadata_item item : metadata_view(v.metadata)) {
            s->headers.push_back({std::string(item.key), std::string(item.value)});
          }
        }
        s->inbox.emplace_back(v.payload.begin(), v.payload.end());
        s->buffered += v.payload.size();
        s->cv.notify_all();
        s->wake_reader_locked();
      } catch (const std::bad_alloc&) {
        f = fault::out_of_memory;
      }
    }
  }
  // Credit is what bounds the messages held here: a server past it is ended, never buffered.
  if (f == fault::beyond_credit) {
    end_stream(c, s,
               local_end(call_error::protocol_error, status::resource_exhausted,
                         "the server wrote beyond the stream's credit"),
               true);
  } else if (f == fault::out_of_memory) {
    end_stream(c, s,
               local_end(call_error::protocol_error, status::resource_exhausted, "client out of memory for a stream message"),
               true);
  }
}

void client_loop::end_stream(client_conn* c, client_stream_state* s, const call_outcome& o, bool tell_server) noexcept {
  if (!s->loop_ref) return;  // ended by the loop already: what it held is given back once
  c->streams.take(s->id);
  // The last reference may be this one (the handle is gone): s lives until the function returns.
  const std::shared_ptr<client_stream_state> keep = std::move(s->loop_ref);
  // Given back before a reader can see the end, so that an open after finish() finds the room
  // (and a channel's member its count) free. The opener's hold goes at the end, not when the
  // handle goes: a channel's member is busy with the stream until then.
  c->pending_calls.fetch_sub(1, std::memory_order_relaxed);
  give_back_bytes(c, s->admitted_bytes);  // room for the co_writes of other streams waiting for it
  s->opener_hold.reset();
  pending* unused_notice = nullptr;
  bool first_end = false;
  call_result handle_end;  // the end the handle set first (cancel), for the interceptors
  {
    const stream_lock lock(*s);
    first_end = s->end_with(o);  // no-op when the handle ended it first (cancel)
    unused_notice = std::exchange(s->end_notice, nullptr);
    if (!first_end && s->intercepted) {
      handle_end.error = s->end.error;
      handle_end.code = s->end.code;
      try {
        handle_end.message = s->end.message;
      } catch (const std::bad_alloc&) {
        // The end keeps its error and code.
      }
    }
  }
  if (unused_notice != nullptr) put_pending(unused_notice);
  if (tell_server && !c->dead) send_cancel(c, s->id);
  if (s->intercepted) {
    call_outcome last;
    if (!first_end) {
      last.error = handle_end.error;
      last.code = handle_end.code;
      last.message = handle_end.message;
    }
    intercepted_end(*s, first_end ? o : last);
  }
}

void client_loop::end_all_streams(client_conn* c, call_error e, status code, std::string_view why) noexcept {
  if (c->streams.size() == 0) return;
  std::string message;
  try {
    message = e == call_error::connection_closed || e == call_error::protocol_error
                  ? std::string("connection lost: ").append(why)
                  : std::string(why);
  } catch (const std::bad_alloc&) {
    // The end keeps its error and code.
  }
  const status end_code = e == call_error::client_closed ? status::cancelled : code;
  try {
    c->streams.drain([&](client_stream_state* s) { end_stream(c, s, local_end(e, end_code, message), false); });
  } catch (const std::bad_alloc&) {
    // drain() could not get its fresh table: end them one by one in place.
    while (c->streams.size() != 0) {
      client_stream_state* first = nullptr;
      c->streams.for_each([&](client_stream_state& s) { if (first == nullptr) first = &s; });
      end_stream(c, first, local_end(e, end_code, message), false);
    }
  }
}

void client_loop::expire_stream(client_conn* c, std::uint64_t id, std::int64_t at) noexcept {
  client_stream_state* s = c->streams.find(id);
  if (s == nullptr || s->deadline_ns != at) return;
  end_stream(c, s, local_end(call_error::timeout, status::deadline_exceeded, "the stream's deadline passed"), true);
}

}  // namespace ringrpc::detail

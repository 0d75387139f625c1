// A shard's calls to its downstreams: connect, write, read, match, expire, cancel, all on the
// shard's thread and ring (shard_downstreams.hpp says who may touch what).
#include "server/shard_downstreams.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <utility>

#include "base/clock.hpp"
#include "client/call_deadline.hpp"
#include "client/call_links.hpp"
#include "client/multishot_recv.hpp"
#include "client/reply_outcome.hpp"
#include "client/request_encoder.hpp"
#include "server/downstream_registry.hpp"
#include "server/shard.hpp"
#include "server/shard_ops.hpp"
#include "uring/cqe_tag.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"
#include "uring/ring_waker.hpp"

namespace ringrpc::detail {

namespace {

constexpr std::int64_t first_backoff_ns = 100'000'000;
constexpr std::int64_t max_backoff_ns = 5'000'000'000;
// Buffers grown past this for one big reply are given back once it is done.
constexpr std::size_t downstream_keep_bytes = 64 * 1024;
// The stall detector's name for a coroutine with no handler frame resumed here.
constexpr char homeless_method[48] = "(downstream call)";

bool resume_here(coro_abi::coro_home& self, coro_abi::resume_slot& slot) noexcept {
  return static_cast<shard*>(self.owner)->post_resumption(slot, homeless_method);
}

std::string describe_target(const downstream_spec& s) { return "downstream " + s.name + " (" + s.target + ")"; }

const char* cancel_message(downstream_cancel why) noexcept {
  return why == downstream_cancel::parent ? "cancelled: the parent call was cancelled"
                                          : "cancelled by the caller (call_options::cancel)";
}

}  // namespace

void downstream_call::stop_trigger::operator()() const noexcept {
  call->owner->request_cancel(call, downstream_cancel::stop_token);
}

namespace {

struct parent_trigger {
  downstream_call* call;
  void operator()() const noexcept { call->owner->request_cancel(call, downstream_cancel::parent); }
};

}  // namespace

downstream_conn::downstream_conn(downstream_target& t, int fd_)
    : target(t),
      fd(fd_),
      assembler(t.spec->options.max_frame_bytes),
      inflight(t.spec->options.max_pending_calls) {}

shard_downstreams::shard_downstreams(shard& s, ring& r, provided_buffers& buffers, ring_waker& waker,
                                     std::atomic<std::uint64_t>& in_use, counters& counts)
    : _shard(s),
      _ring(r),
      _buffers(buffers),
      _waker(waker),
      _home{&resume_here, &s},
      _in_use(in_use),
      _counts(counts),
      _jitter(static_cast<std::uint64_t>(now_ns()) | 1) {}

shard_downstreams::~shard_downstreams() {
  // The loop ends only once idle(): no connection is left, every call was given back.
  for (downstream_call* k : _free) delete k;
}

downstream_target& shard_downstreams::target_of(const downstream_spec& spec) {
  if (_targets.size() <= spec.index) _targets.resize(spec.index + 1);
  auto& t = _targets[spec.index];
  if (!t) {
    t = std::make_unique<downstream_target>();
    t->spec = &spec;
  }
  return *t;
}

downstream_call* shard_downstreams::get_call() {
  downstream_call* k = nullptr;
  if (!_free.empty()) {
    k = _free.back();
    _free.pop_back();
  } else {
    k = new downstream_call();
    k->owner = this;
  }
  ++k->seq;
  k->conn = nullptr;
  k->deadline_ns = 0;
  k->written = k->finished = k->counted = k->cancel_taken = false;
  k->cancel_requested.store(downstream_cancel::none, std::memory_order_relaxed);
  _in_use.fetch_add(1, std::memory_order_relaxed);
  return k;
}

void shard_downstreams::maybe_recycle(downstream_call* k) noexcept {
  if (!k->finished || !k->written) return;
  // A trigger that fired posted the call: it comes back here once the shard has taken it.
  if (k->cancel_requested.load(std::memory_order_acquire) != downstream_cancel::none && !k->cancel_taken) return;
  k->done = nullptr;
  if (k->frame.capacity() > downstream_keep_bytes) std::vector<std::byte>().swap(k->frame);
  _in_use.fetch_sub(1, std::memory_order_relaxed);
  try {
    _free.push_back(k);
  } catch (const std::bad_alloc&) {
    delete k;
  }
}

void shard_downstreams::call(const downstream_spec& spec, std::string_view method, std::span<const std::byte> payload,
                             call_callback done, call_options options) {
  // As client::call_async: a call that cannot run is refused before anything is encoded.
  std::shared_ptr<cancel_hub> parent = resolve_parent(options);
  const call_deadline d = call_deadline::of(options.timeout, spec.options.default_timeout, parent.get());
  const auto refuse = [this, &done](call_error e, std::string_view why) {
    _counts[server_counter::downstream_calls_refused].add();
    run_inline_callback(done, failed_outcome(e, why));
  };
  if (d.expired) return refuse(call_error::timeout, "deadline passed before the call was made; not sent");
  if (options.cancel.stop_requested()) return refuse(call_error::cancelled, "cancelled by the caller before it was sent");
  if (parent && parent->fired()) {
    return refuse(call_error::cancelled, "cancelled: the parent call was cancelled before this call was sent");
  }
  if (_closing) return refuse(call_error::connection_closed, describe_target(spec) + ": the server is stopping");
  downstream_target& t = target_of(spec);
  // The clock is read only while a backoff is on: a call on a live connection pays nothing.
  const std::int64_t now = t.conn == nullptr && t.retry_at_ns != 0 ? now_ns() : 0;
  if (now != 0 && t.retry_at_ns > now) {
    // Nothing was sent: retrying later is safe, and a dead target costs this shard nothing.
    return refuse(call_error::connection_closed,
                  describe_target(spec) + " is down: " + t.down_why + "; next attempt in " +
                      std::to_string((t.retry_at_ns - now + 999'999) / 1'000'000) + " ms");
  }
  if (t.pending_calls >= spec.options.max_pending_calls || t.pending_bytes >= spec.options.max_pending_bytes) {
    return refuse(call_error::client_busy,
                  describe_target(spec) + ": " + std::to_string(t.pending_calls) + " calls and " +
                      std::to_string(t.pending_bytes) +
                      " request bytes pending on this shard reach downstream_options' max_pending_calls or "
                      "max_pending_bytes");
  }
  downstream_conn* c = t.conn;
  if (c == nullptr) {
    std::string why;
    c = connect(t, why);
    if (c == nullptr) return refuse(call_error::connection_closed, describe_target(spec) + ": " + why);
  }
  downstream_call* k = get_call();
  k->conn = c;
  k->id = c->next_id++;
  frame_view f;
  f.call_id = k->id;
  f.kind = wire::Kind::Request;
  f.method = method;
  f.timeout_us = d.wire_timeout_us();
  f.payload = payload;
  const metadata_to_send md{{}, options.metadata};
  if (!md.pairs.empty()) f.metadata_out = &md;
  try {
    encode_request(f, k->frame);
    c->inflight.insert(k);  // within max_pending_calls, checked above
    if (d.at_ns != 0) {
      _deadlines.push_back({d.at_ns, k, k->seq});
      std::push_heap(_deadlines.begin(), _deadlines.end(), std::greater<>{});
    }
    mark_dirty(c);
  } catch (...) {
    c->inflight.take(k->id);
    k->written = k->finished = true;
    maybe_recycle(k);
    throw;
  }
  k->counted = true;
  ++t.pending_calls;
  t.pending_bytes += k->frame.size();
  k->deadline_ns = d.at_ns;
  k->done = std::move(done);
  c->out.queue().push_back(k);
  // Armed last: a trigger that fires at once (a parent fired meanwhile) only posts the call.
  if (parent) {
    k->parent = std::move(parent);
    try {
      if (k->parent->listen(parent_trigger{k}, k->parent_token, true) == cancel_hub::listen_result::closed) {
        k->parent.reset();
      }
    } catch (const std::bad_alloc&) {
      k->parent.reset();  // without memory for the link the call does not follow its parent
    }
  }
  if (options.cancel.stop_possible()) k->stop.emplace(options.cancel, downstream_call::stop_trigger{k});
}

downstream_conn* shard_downstreams::connect(downstream_target& t, std::string& why) noexcept {
  const downstream_spec& s = *t.spec;
  const int fd = ::socket(s.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::string("cannot open a socket: ") + std::strerror(errno);
    return nullptr;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  downstream_conn* c = nullptr;
  try {
    c = new downstream_conn(t, fd);
  } catch (const std::bad_alloc&) {
    ::close(fd);
    why = "out of memory";
    return nullptr;
  }
  ++_conns_alive;
  const auto ms = s.options.connect_timeout.count();
  c->connect_timeout.tv_sec = ms / 1000;
  c->connect_timeout.tv_nsec = (ms % 1000) * 1'000'000;
  // The connect and its timeout are linked: both must go in one submission.
  if (io_uring_sq_space_left(_ring.raw()) < 2) _ring.submit();
  io_uring_sqe* sqe = _ring.get_sqe();
  io_uring_prep_connect(sqe, fd, reinterpret_cast<const sockaddr*>(&s.address), s.address_bytes);
  io_uring_sqe_set_data64(sqe, make_tag(shard_ops::downstream_connect, c));
  sqe->flags |= IOSQE_IO_LINK;
  sqe = _ring.get_sqe();
  io_uring_prep_link_timeout(sqe, &c->connect_timeout, 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
  c->connect_armed = true;
  t.conn = c;
  return c;
}

void shard_downstreams::handle(const io_uring_cqe& cqe) {
  auto* c = tag_ptr<downstream_conn>(cqe.user_data);
  switch (tag_op(cqe.user_data)) {
    case shard_ops::downstream_connect: on_connect(c, cqe.res); break;
    case shard_ops::downstream_recv: on_recv(c, cqe); break;
    case shard_ops::downstream_send: on_write(c, cqe.res); break;
    default: break;
  }
}

void shard_downstreams::on_connect(downstream_conn* c, int res) noexcept {
  c->connect_armed = false;
  downstream_target& t = c->target;
  if (c->st == downstream_conn::state::dead) {
    maybe_free(c);
    return;
  }
  if (res < 0) {
    // -ECANCELED: the linked timeout ended it.
    t.down_why = res == -ECANCELED ? "connect timed out after " +
                                         std::to_string(t.spec->options.connect_timeout.count()) + " ms"
                                   : std::string("connect failed: ") + std::strerror(-res);
    t.backoff_ns = t.backoff_ns == 0 ? first_backoff_ns : std::min(2 * t.backoff_ns, max_backoff_ns);
    // Jitter (75% to 125%), so that the shards of a fleet do not come back in step.
    _jitter ^= _jitter << 13;
    _jitter ^= _jitter >> 7;
    _jitter ^= _jitter << 17;
    const std::int64_t wait = t.backoff_ns * 3 / 4 + static_cast<std::int64_t>(_jitter % (t.backoff_ns / 2 + 1));
    t.retry_at_ns = now_ns() + wait;
    _counts[server_counter::downstream_connects_failed].add();
    fail_connection(c, call_error::connection_closed, describe_target(*t.spec) + ": " + t.down_why);
    maybe_free(c);
    return;
  }
  _counts[server_counter::downstream_connects_ok].add();
  t.backoff_ns = 0;
  t.retry_at_ns = 0;
  c->st = downstream_conn::state::open;
  arm_multishot_recv(_ring, _buffers, c->fd, c, shard_ops::downstream_recv);
  c->recv_armed = true;
  try {
    mark_dirty(c);  // the calls made while it connected
  } catch (const std::bad_alloc&) {
    start_write(c);
  }
}

void shard_downstreams::on_recv(downstream_conn* c, const io_uring_cqe& cqe) noexcept {
  const bool dead = c->st == downstream_conn::state::dead;
  const recv_left left = take_recv(_buffers, cqe, dead, [this, c](std::span<const std::byte> bytes) {
    const auto r = c->assembler.feed(bytes, [this, c](std::span<const std::byte> f) { return on_frame(c, f); });
    if (r == frame_assembler::result::frame_too_large) {
      fail_connection(c, call_error::protocol_error,
                      describe_target(*c->target.spec) + ": a reply frame exceeds downstream_options::max_frame_bytes");
    } else if (r != frame_assembler::result::ok && r != frame_assembler::result::paused) {
      fail_connection(c, call_error::protocol_error, describe_target(*c->target.spec) + ": could not buffer a reply frame");
    }
  });
  if (_scratch.capacity() > downstream_keep_bytes) std::vector<std::byte>().swap(_scratch);
  if (left == recv_left::armed) return;
  c->recv_armed = false;
  if (left == recv_left::rearm && c->st != downstream_conn::state::dead) {
    arm_multishot_recv(_ring, _buffers, c->fd, c, shard_ops::downstream_recv);  // buffers return at the commit
    c->recv_armed = true;
    return;
  }
  if (c->st != downstream_conn::state::dead) {
    fail_connection(c, call_error::connection_closed,
                    describe_target(*c->target.spec) + ": " +
                        (cqe.res == 0 ? std::string("the downstream closed the connection")
                                      : std::string("connection lost: ") + std::strerror(-cqe.res)));
  }
  maybe_free(c);
}

bool shard_downstreams::on_frame(downstream_conn* c, std::span<const std::byte> frame) noexcept {
  if (c->st == downstream_conn::state::dead) return false;
  try {
    _scratch.assign(frame.begin(), frame.end());  // decoding needs an aligned start
  } catch (const std::bad_alloc&) {
    fail_connection(c, call_error::connection_closed, "out of memory for a reply");
    return false;
  }
  decoded_frame decoded = decode_frame(_scratch);
  const frame_view& v = decoded.view;
  if (decoded.outcome != decode_outcome::ok) {
    fail_connection(c, call_error::protocol_error,
                    describe_target(*c->target.spec) + ": the downstream sent a frame that failed verification");
    return false;
  }
  if (v.kind == wire::Kind::Error && v.call_id == 0) {
    // A connection-level error (e.g. our frame was too large): the downstream closes next.
    const call_outcome o = connection_error_outcome(v);
    c->inflight.drain([&](downstream_call* k) { complete(k, o); });
    fail_connection(c, call_error::server_status, v.message);
    return false;
  }
  downstream_call* k = c->inflight.take(v.call_id);
  if (k == nullptr) return true;  // the answer of a call that timed out or was cancelled
  static constexpr metadata_limits caps{default_max_metadata_entries, default_max_metadata_bytes,
                                        "the downstream's response metadata cap (32 entries)",
                                        "the downstream's response metadata cap (8 KiB)"};
  std::string refused;
  try {
    complete(k, outcome_of_answer(v, caps, refused));
  } catch (const std::bad_alloc&) {
    complete(k, failed_outcome(call_error::connection_closed, "out of memory"));
  }
  return true;
}

void shard_downstreams::mark_dirty(downstream_conn* c) {
  if (!c->dirty) {
    _dirty.push_back(c);  // first: if it throws, the flag must not claim the connection is listed
    c->dirty = true;
  }
}

void shard_downstreams::flush() noexcept {
  for (downstream_conn* c : _dirty) {
    c->dirty = false;
    if (c->st == downstream_conn::state::open) start_write(c);
  }
  _dirty.clear();
}

void shard_downstreams::start_write(downstream_conn* c) noexcept {
  msghdr* msg = c->out.next();
  if (msg == nullptr) return;
  io_uring_sqe* sqe = _ring.get_sqe();
  io_uring_prep_sendmsg(sqe, c->fd, msg, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, make_tag(shard_ops::downstream_send, c));
}

void shard_downstreams::on_write(downstream_conn* c, int res) noexcept {
  const bool dead = c->st == downstream_conn::state::dead;
  if (res < 0 && !dead) {
    fail_connection(c, call_error::connection_closed,
                    describe_target(*c->target.spec) + ": write failed: " + std::strerror(-res));
  }
  if (c->out.completed(res, c->st == downstream_conn::state::dead, [this](downstream_call* k) { written(k); })) {
    start_write(c);
  }
  maybe_free(c);
}

void shard_downstreams::written(downstream_call* k) noexcept {
  k->written = true;
  if (k->finished) uncount(k);
  maybe_recycle(k);
}

void shard_downstreams::complete(downstream_call* k, const call_outcome& o) noexcept {
  k->finished = true;
  disarm(k);  // a trigger from now on finds nothing to do
  _counts[o.error == call_error::none            ? server_counter::downstream_calls_ok
          : o.error == call_error::server_status ? server_counter::downstream_calls_error
                                                 : server_counter::downstream_calls_failed]
      .add();
  // Before the callback: the coroutine's next call must find the room this one held.
  if (k->written) uncount(k);
  run_callback(k->done, o);
  k->done = nullptr;
  maybe_recycle(k);
}

void shard_downstreams::uncount(downstream_call* k) noexcept {
  if (!k->counted) return;
  k->counted = false;
  downstream_target& t = k->conn->target;
  --t.pending_calls;
  t.pending_bytes -= k->frame.size();
}

void shard_downstreams::disarm(downstream_call* k) noexcept {
  // Both wait for a trigger running on another thread (it only posts the call).
  k->stop.reset();
  if (k->parent) {
    k->parent->unlisten(k->parent_token);
    k->parent_token = 0;
    k->parent.reset();
  }
}

void shard_downstreams::request_cancel(downstream_call* k, downstream_cancel why) noexcept {
  auto none = downstream_cancel::none;
  if (!k->cancel_requested.compare_exchange_strong(none, why, std::memory_order_acq_rel)) return;
  _cancels.push(&k->cancel_node);
  // From the shard's own thread (its sweep fired the parent) the loop looks at _cancels before
  // it may sleep; a notify there would only cost an eventfd write.
  if (!_shard.on_its_thread()) _waker.notify();
}

void shard_downstreams::take_cancels() noexcept {
  while (mpsc_node* n = _cancels.pop()) {
    auto* k = reinterpret_cast<downstream_call*>(n);  // cancel_node is its first member
    k->cancel_taken = true;
    if (!k->finished) {
      downstream_conn* c = k->conn;
      c->inflight.take(k->id);
      complete(k, failed_outcome(call_error::cancelled, cancel_message(k->cancel_requested.load(std::memory_order_acquire))));
      // As for a timeout: the downstream drops it if queued, its handler sees cancelled().
      if (c->st == downstream_conn::state::open) send_cancel(c, k->id);
    }
    maybe_recycle(k);
  }
}

void shard_downstreams::after_completions(std::int64_t now) {
  take_cancels();
  expire(now);
}

void shard_downstreams::expire(std::int64_t now) noexcept {
  while (!_deadlines.empty() && _deadlines.front().at <= now) {
    const deadline d = _deadlines.front();
    std::pop_heap(_deadlines.begin(), _deadlines.end(), std::greater<>{});
    _deadlines.pop_back();
    downstream_call* k = d.call;
    if (k->seq != d.seq || k->finished) continue;  // answered already (or reused since)
    downstream_conn* c = k->conn;
    c->inflight.take(k->id);
    complete(k, failed_outcome(call_error::timeout, "deadline passed before the reply arrived"));
    // The downstream would otherwise run (or keep running) a call nobody waits for.
    if (c->st == downstream_conn::state::open) send_cancel(c, d.call->id);
  }
  // Entries of answered calls are left behind; drop them when they outnumber live calls.
  if (_deadlines.size() > 64 && _deadlines.size() > 2 * _in_use.load(std::memory_order_relaxed)) {
    std::erase_if(_deadlines, [](const deadline& d) { return d.call->seq != d.seq || d.call->finished; });
    std::make_heap(_deadlines.begin(), _deadlines.end(), std::greater<>{});
  }
}

void shard_downstreams::send_cancel(downstream_conn* c, std::uint64_t id) noexcept {
  // Advice to the downstream, not needed for correctness here: if memory is short, skip it.
  downstream_call* k = nullptr;
  try {
    k = get_call();
    k->finished = true;  // a Cancel frame: nobody waits for it
    k->conn = c;
    frame_view f;
    f.call_id = id;
    f.kind = wire::Kind::Cancel;
    encode_request(f, k->frame);
    mark_dirty(c);
  } catch (...) {
    if (k != nullptr) {
      k->written = true;
      maybe_recycle(k);
    }
    return;
  }
  c->out.queue().push_back(k);
}

void shard_downstreams::fail_connection(downstream_conn* c, call_error e, std::string_view why) noexcept {
  if (c->st != downstream_conn::state::dead) {
    const bool connecting = c->st == downstream_conn::state::connecting;
    c->st = downstream_conn::state::dead;
    if (c->target.conn == c) c->target.conn = nullptr;  // the next call connects anew
    if (connecting && c->connect_armed) {
      io_uring_sqe* sqe = _ring.get_sqe();
      io_uring_prep_cancel64(sqe, make_tag(shard_ops::downstream_connect, c), 0);
      io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
    } else {
      // Ends the receive and any write at once; the fd closes when both have completed.
      ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  call_outcome o;
  try {
    o = failed_outcome(e, why);
  } catch (...) {
  }
  c->inflight.drain([&](downstream_call* k) { complete(k, o); });
  if (!c->out.in_flight()) c->out.queue().clear([this](downstream_call* k) { written(k); });
}

void shard_downstreams::maybe_free(downstream_conn* c) noexcept {
  if (c->st != downstream_conn::state::dead || c->connect_armed || c->recv_armed || c->out.in_flight()) return;
  if (c->dirty) std::erase(_dirty, c);
  ::close(c->fd);
  delete c;
  --_conns_alive;
}

void shard_downstreams::close_all() noexcept {
  _closing = true;
  for (auto& t : _targets) {
    if (t && t->conn != nullptr) {
      downstream_conn* c = t->conn;
      fail_connection(c, call_error::connection_closed, describe_target(*t->spec) + ": the server is stopping");
      maybe_free(c);
    }
  }
}

}  // namespace ringrpc::detail

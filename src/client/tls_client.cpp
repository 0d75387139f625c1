// The client loop's TLS connections: ciphertext from the multishot receive goes through the
// connection's session into the frame assembler; queued request frames are sealed into
// records just before the write, which then sends ciphertext (one write in flight, the rest
// of a partial write first). Calls made during the handshake wait in the queue for it.
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "client/client_loop.hpp"
#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

namespace {

// Frame bytes sealed per write at most (their records are written before more are sealed).
constexpr std::size_t client_seal_limit = 256 * 1024;
constexpr std::size_t tls_keep_bytes = 64 * 1024;

}  // namespace

void client_loop::tls_start(client_conn* c) noexcept {
  tls_client_link& t = *c->tls;
  try {
    if (t.session->start(t.pending) == record_session::outcome::failed) {
      fail_connection(c, call_error::connection_closed, t.session->error());
      return;
    }
    mark_dirty(c);  // the ClientHello goes out with this turn's writes
  } catch (const std::bad_alloc&) {
    fail_connection(c, call_error::connection_closed, "out of memory starting TLS");
  }
}

void client_loop::tls_receive(client_conn* c, std::span<const std::byte> cipher) {
  tls_client_link& t = *c->tls;
  const bool was_established = t.session->established();
  const std::size_t had = t.pending.size();
  t.plain.clear();
  record_session::outcome rc;
  try {
    rc = t.session->receive(cipher, t.plain, t.pending);
  } catch (const std::bad_alloc&) {
    fail_connection(c, call_error::connection_closed, "out of memory receiving TLS records");
    return;
  }
  if (rc == record_session::outcome::failed) {
    const std::string why = t.session->error();
    fail_connection(c, call_error::connection_closed, why);
    return;
  }
  // Something to say back, or calls that waited for the handshake: write this turn.
  if (t.pending.size() != had || (!was_established && t.session->established())) mark_dirty(c);
  if (!t.plain.empty()) feed_frames(c, t.plain);
  if (t.plain.capacity() > tls_keep_bytes) std::vector<std::byte>().swap(t.plain);
}

void client_loop::tls_start_write(client_conn* c) noexcept {
  tls_client_link& t = *c->tls;
  if (t.in_flight || c->dead) return;
  if (t.all_sent()) {
    t.begin_next();
    auto& q = c->out.queue();
    if (t.session->established() && !q.empty()) {
      iovec iov[64];
      const std::size_t n = q.gather(iov, 64);
      try {
        if (t.seal_queued(*t.session, iov, n, client_seal_limit, t.plain) != record_session::outcome::ok) {
          const std::string why = t.session->error();
          fail_connection(c, call_error::connection_closed, why);
          return;
        }
      } catch (const std::bad_alloc&) {
        fail_connection(c, call_error::connection_closed, "out of memory sealing TLS records");
        return;
      }
      if (t.plain.capacity() > tls_keep_bytes) std::vector<std::byte>().swap(t.plain);
    }
  }
  if (t.all_sent()) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  const auto unsent = t.unsent();
  io_uring_prep_send(sqe, c->fd, unsent.data(), unsent.size(), MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, make_tag(op::send, c));
  t.in_flight = true;
}

void client_loop::tls_on_write(client_conn* c, int res) noexcept {
  tls_client_link& t = *c->tls;
  t.in_flight = false;
  auto done = [this](pending* p) { written(p); };
  if (res < 0 && !c->dead) fail_connection(c, call_error::connection_closed, std::strerror(-res));
  if (c->dead) {
    // fail_connection() left the queue while this write was out.
    c->out.queue().clear(done);
    t.drop();
    return;
  }
  if (t.advance(static_cast<std::size_t>(res))) c->out.queue().consume(t.finish(4 * client_seal_limit), done);
  tls_start_write(c);  // the rest of this ciphertext, or what was queued meanwhile
}

}  // namespace ringrpc::detail

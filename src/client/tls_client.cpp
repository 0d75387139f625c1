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
constexpr std::size_t seal_limit = 256 * 1024;
constexpr std::size_t keep_bytes = 64 * 1024;

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
  if (t.plain.capacity() > keep_bytes) std::vector<std::byte>().swap(t.plain);
}

void client_loop::tls_start_write(client_conn* c) noexcept {
  tls_client_link& t = *c->tls;
  if (t.in_flight || c->dead) return;
  if (t.sent == t.cipher.size()) {
    t.cipher.clear();
    t.sent = 0;
    t.cipher.swap(t.pending);
    auto& q = c->out.queue();
    if (t.session->established() && !q.empty()) {
      iovec iov[64];
      const std::size_t n = q.gather(iov, 64);
      std::size_t total = 0;
      try {
        // Several small frames share records: one seal for the batch.
        t.plain.clear();
        for (std::size_t i = 0; i < n && total < seal_limit; ++i) {
          const std::size_t len = std::min(iov[i].iov_len, seal_limit - total);
          const auto* p = static_cast<const std::byte*>(iov[i].iov_base);
          t.plain.insert(t.plain.end(), p, p + len);
          total += len;
        }
        if (t.session->seal(t.plain, t.cipher) != record_session::outcome::ok) {
          const std::string why = t.session->error();
          fail_connection(c, call_error::connection_closed, why);
          return;
        }
      } catch (const std::bad_alloc&) {
        fail_connection(c, call_error::connection_closed, "out of memory sealing TLS records");
        return;
      }
      t.sealed = total;
      if (t.plain.capacity() > keep_bytes) std::vector<std::byte>().swap(t.plain);
    }
  }
  if (t.sent == t.cipher.size()) return;
  io_uring_sqe* sqe = _ring->get_sqe();
  io_uring_prep_send(sqe, c->fd, t.cipher.data() + t.sent, t.cipher.size() - t.sent, MSG_NOSIGNAL);
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
    t.cipher.clear();
    t.pending.clear();
    t.sent = t.sealed = 0;
    return;
  }
  t.sent += static_cast<std::size_t>(res);
  if (t.sent == t.cipher.size()) {
    c->out.queue().consume(t.sealed, done);
    t.sealed = 0;
    if (t.cipher.capacity() > 4 * seal_limit) std::vector<std::byte>().swap(t.cipher);
  }
  tls_start_write(c);  // the rest of this ciphertext, or what was queued meanwhile
}

}  // namespace ringrpc::detail

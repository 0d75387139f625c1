#pragma once
// The sending half of one TLS connection on a ring loop (the server's responder, the client's
// loop): the records the session made on its own go first, then frames sealed from the head of
// the connection's queue; one write is out at a time, and a partial write sends its rest before
// anything else, so records keep the session's order. Loop thread only.

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "ringrpc/record_layer.hpp"

namespace ringrpc::detail {

struct tls_write_state {
  /// Ciphertext the session produced on its own (handshake flights, alerts, tickets) that no
  /// write carries yet: the next write starts with it.
  std::vector<std::byte> pending;
  /// The write in flight (or about to go): `pending`, then the sealed frames; `sent` of it is
  /// written so far.
  std::vector<std::byte> cipher;
  std::size_t sent = 0;
  /// Plaintext bytes at the head of the queue that `cipher` carries: released once it is out.
  std::size_t sealed = 0;

  bool all_sent() const noexcept { return sent == cipher.size(); }
  std::span<const std::byte> unsent() const noexcept { return std::span(cipher).subspan(sent); }

  /// Starts the next write with what the session said since the last one. Only when all_sent().
  void begin_next() noexcept {
    cipher.clear();
    sent = 0;
    cipher.swap(pending);
  }

  /// Seals up to `limit` bytes of the queue's gathered head (`iov`, `n` entries) after what
  /// begin_next() put in `cipher`, and remembers how many it took. One entry (or a first one of
  /// `limit` or more) is sealed in place; several small frames are copied into `scratch` first,
  /// so they share full records instead of each paying a record's overhead. Throws bad_alloc.
  record_session::outcome seal_queued(record_session& session, const iovec* iov, std::size_t n,
                                      std::size_t limit, std::vector<std::byte>& scratch) {
    std::size_t total = 0;
    record_session::outcome r = record_session::outcome::ok;
    if (n == 1 || iov[0].iov_len >= limit) {
      total = std::min(iov[0].iov_len, limit);
      r = session.seal({static_cast<const std::byte*>(iov[0].iov_base), total}, cipher);
    } else {
      scratch.clear();
      for (std::size_t i = 0; i < n && total < limit; ++i) {
        const std::size_t len = std::min(iov[i].iov_len, limit - total);
        const auto* p = static_cast<const std::byte*>(iov[i].iov_base);
        scratch.insert(scratch.end(), p, p + len);
        total += len;
      }
      r = session.seal(scratch, cipher);
    }
    sealed = r == record_session::outcome::ok ? total : 0;
    return r;
  }

  /// Counts `n` more bytes written; true when the whole write is out.
  bool advance(std::size_t n) noexcept {
    sent += n;
    return sent == cipher.size();
  }

  /// After a whole write: how many queued plaintext bytes it carried (the caller releases them).
  /// A buffer grown past `keep_bytes` by a burst is given back.
  std::size_t finish(std::size_t keep_bytes) noexcept {
    const std::size_t carried = sealed;
    sealed = 0;
    cipher.clear();
    sent = 0;
    if (cipher.capacity() > keep_bytes) std::vector<std::byte>().swap(cipher);
    return carried;
  }

  /// Forgets everything owed: the connection failed.
  void drop() noexcept {
    cipher.clear();
    pending.clear();
    sent = sealed = 0;
  }
};

}  // namespace ringrpc::detail

// Stream records kept for the next streams (grpc_session_state.hpp: new_stream, recycle).
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "grpc/grpc_session_state.hpp"

namespace ringrpc::detail::grpc {

namespace {

// Streams come and go with every call: their records (and a request's and a reply's buffer,
// when small) are kept per thread for the next ones, as nghttp2's blocks are (grpc_memory.cpp).
void empty_text(std::string& s) noexcept {
  s.clear();
  if (s.capacity() > 256) std::string().swap(s);
}

std::size_t buffer_bytes(const call_stream& st) noexcept {
  return st.body.capacity() + st.pending.capacity() + st.path.capacity() + st.method.capacity();
}

struct stream_cache {
  call_stream* head = nullptr;
  unsigned count = 0;
  std::size_t bytes = 0;  // the kept records' buffers
  // A shard's connections may each have max_concurrent_streams (100 by default) calls in
  // flight, ended in a burst when their replies are sealed and opened again by the next
  // receive: records are kept for that many, and their buffers up to `max_bytes` in all
  // (small calls' buffers for every record).
  static constexpr unsigned kept = 512;
  static constexpr std::size_t max_bytes = 256 * 1024;

  ~stream_cache() {
    while (head != nullptr) {
      call_stream* next = head->next;
      delete head;
      head = next;
    }
  }
  call_stream* take() {
    if (head == nullptr) return new call_stream;
    call_stream* st = head;
    head = st->next;
    st->next = nullptr;
    --count;
    bytes -= buffer_bytes(*st);
    return st;
  }
  void give(call_stream* st) noexcept {
    if (count == kept) {
      delete st;
      return;
    }
    // The same bound as a live stream's buffers between calls (kept_buffer_bytes), and the
    // path and method names (a method's name past the short-string size would cost an
    // allocation per call).
    std::vector<std::byte> body = std::move(st->body);
    std::vector<std::byte> reply = std::move(st->pending);
    std::string path = std::move(st->path);
    std::string method = std::move(st->method);
    empty_buffer(body);
    empty_buffer(reply);
    empty_text(path);
    empty_text(method);
    // A fresh record in place (no temporary to build, assign member by member and destroy),
    // default-initialized: every member has its initializer, and value-initialization would
    // clear the whole record first (a `rep stos` of 464 bytes, half of this function's time).
    std::destroy_at(st);
    ::new (static_cast<void*>(st)) call_stream;
    if (bytes + body.capacity() + reply.capacity() + path.capacity() + method.capacity() <= max_bytes) {
      st->body = std::move(body);
      st->pending = std::move(reply);
      st->path = std::move(path);
      st->method = std::move(method);
      bytes += buffer_bytes(*st);
    }
    st->next = head;
    head = st;
    ++count;
  }
};

thread_local stream_cache streams_kept;

}  // namespace

call_stream* session::state::new_stream() { return streams_kept.take(); }

void session::state::recycle(call_stream* st) noexcept { streams_kept.give(st); }

}  // namespace ringrpc::detail::grpc

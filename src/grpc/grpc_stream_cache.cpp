// Stream records kept for the next streams (grpc_session_state.hpp: new_stream, recycle).
#include <utility>
#include <vector>

#include "grpc/grpc_session_state.hpp"

namespace ringrpc::detail::grpc {

namespace {

// Streams come and go with every call: their records (and a request's and a reply's buffer,
// when small) are kept per thread for the next ones, as nghttp2's blocks are (grpc_memory.cpp).
struct stream_cache {
  call_stream* head = nullptr;
  unsigned count = 0;
  static constexpr unsigned kept = 64;

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
    return st;
  }
  void give(call_stream* st) noexcept {
    if (count == kept) {
      delete st;
      return;
    }
    // The same bound as a live stream's buffers between calls (kept_buffer_bytes): a thread
    // keeps at most kept records of two such buffers each.
    std::vector<std::byte> body = std::move(st->body);
    std::vector<std::byte> reply = std::move(st->pending);
    empty_buffer(body);
    empty_buffer(reply);
    *st = call_stream{};
    st->body = std::move(body);
    st->pending = std::move(reply);
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

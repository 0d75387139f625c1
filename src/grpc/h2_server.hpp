#pragma once
// The server's side of one HTTP/2 connection (RFC 9113), without I/O: the peer's bytes go in
// and come out as callbacks (a request's fields, its DATA, its end, a stream's close), and what
// the server sends (responses, window updates, acknowledgements, resets, GOAWAY) is written as
// HTTP/2 bytes into the buffer the caller lends for the call. It keeps what HTTP/2 needs
// (stream states, both directions' flow-control windows, the peer's settings, HPACK's decoder
// through nghttp2's nghttp2_hd_inflate) and checks what RFC 9113 asks of a server: frame sizes
// and order, stream identifiers, window overflow, header blocks split only by CONTINUATION,
// field names and values (§8.2), pseudo-headers (§8.3), content-length (§8.1.1). Our own code
// rather than nghttp2's session: a unary gRPC call through nghttp2's session cost about
// 1.1 µs of the server's time, three quarters of it in the session's queues, per-stream
// allocations and HPACK encoder; responses here are written straight into the output with
// pre-encoded fields (h2_wire.hpp).
//
// The bounds a server owes its peers are here too where they are HTTP/2's: the rate of streams
// reset by either side (rapid reset, and resets a peer provokes), CONTINUATIONs per header
// block, empty frames, streams past SETTINGS_MAX_CONCURRENT_STREAMS (refused before the peer
// acknowledged it, a protocol error after). PING and SETTINGS floods
// are the handler's to judge (its policy is gRPC's), through on_ping and on_settings.

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/token_bucket.hpp"
#include "grpc/grpc_memory.hpp"
#include "grpc/h2_wire.hpp"
#include "grpc/hpack_repeats.hpp"

namespace ringrpc::detail::grpc {

/// What HTTP/2 keeps of one stream; the handler's record of the stream derives from it and
/// lives until on_closed.
struct h2_stream {
  std::int32_t id = 0;
  std::int64_t send_window = 0;  ///< what the peer lets us send on it
  std::int64_t recv_window = 0;  ///< what the peer may still send on it
  std::uint64_t recv_consumed = 0;  ///< bytes the handler took, not yet given back with WINDOW_UPDATE
  std::uint64_t content_length = ~std::uint64_t{0};  ///< the request's content-length, if it said one
  std::uint64_t data_received = 0;
  bool remote_closed = false;  ///< the peer's END_STREAM came
  bool local_closed = false;   ///< ours went, or waits behind `pending`
  bool closing = false;        ///< out of the stream table; on_closed comes at the end of the call
  bool closed_by_reset = false;
  bool blocked = false;  ///< in the list of streams whose DATA waits for a window
  // Our DATA the peer's windows hold back, and the trailers' header block that follows it.
  std::vector<std::byte> pending;
  std::size_t pending_sent = 0;
  std::vector<std::byte> pending_trailers;
  h2_stream* blocked_prev = nullptr;
  h2_stream* blocked_next = nullptr;
  h2_stream* closing_next = nullptr;
  // The request's fields as they are checked (RFC 9113 §8.3.1).
  std::uint8_t pseudo_seen = 0;
  bool regular_seen = false;
  bool malformed = false;
  bool in_trailers = false;
};

/// What the connection tells the server's side of it. Any callback may throw std::bad_alloc,
/// which ends the connection (receive() and the senders pass it on).
class h2_handler {
 public:
  /// A request's HEADERS opened stream `id`: the record that stands for it, its h2_stream part
  /// default-constructed (the connection fills it).
  virtual h2_stream& on_open(std::int32_t id) = 0;
  /// One field of a request's header block (or of its trailers), after the checks of §8.2.
  virtual void on_field(h2_stream& s, std::string_view name, std::string_view value, bool trailer) = 0;
  /// A request's opening header block is one kept before (hpack_repeats), and whose fields
  /// this handler already took one by one into a request it remembered (remember_block) as
  /// `id`: it may apply what they meant then in one step and return true instead of taking
  /// them again by on_field (false). Called before any field of the block was taken.
  virtual bool on_known_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) = 0;
  /// The fields of kept block `id` were each taken by on_field into the fresh stream `s` and
  /// passed HTTP/2's checks: the handler may remember their outcome for on_known_block.
  virtual void remember_block(h2_stream& s, std::uint64_t id, std::uint8_t slot) = 0;
  /// The request's header block is whole and well-formed (not called for trailers).
  virtual void on_headers(h2_stream& s) = 0;
  virtual void on_data(h2_stream& s, std::span<const std::byte> data) = 0;
  /// The peer's END_STREAM: the request is whole.
  virtual void on_request_end(h2_stream& s) = 0;
  /// `n` bytes of the stream's DATA went out (for the handler's own flow of credit).
  virtual void on_sent(h2_stream& s, std::size_t n) = 0;
  /// The stream is closed: by both ends, by a reset of either side, or with the connection.
  /// The record is the handler's again. `by_peer` is true when the peer reset it.
  virtual void on_closed(h2_stream& s, bool by_peer) noexcept = 0;
  /// A PING or a SETTINGS from the peer (not an acknowledgement), before it is answered: the
  /// handler may end the connection with fail().
  virtual void on_ping() = 0;
  virtual void on_settings() = 0;

 protected:
  ~h2_handler() = default;
};

/// The server's settings and the bounds it holds peers to.
struct h2_limits {
  std::uint32_t max_concurrent_streams = 100;
  std::uint32_t max_header_list_bytes = 16 * 1024;  ///< advertised; the handler enforces it
  unsigned max_continuations = 8;                   ///< CONTINUATIONs after one HEADERS
  unsigned reset_burst = 1000;                      ///< RST_STREAMs in a burst (either side's), then ...
  unsigned resets_per_second = 33;                  ///< ... per second
  unsigned empty_frame_burst = 1000;                ///< empty DATA / CONTINUATION frames in a burst, then ...
  unsigned empty_frames_per_second = 100;           ///< ... per second
};

class h2_server {
 public:
  /// Throws std::bad_alloc.
  h2_server(h2_handler& handler, const h2_limits& limits, library_memory& memory);
  ~h2_server();
  h2_server(const h2_server&) = delete;
  h2_server& operator=(const h2_server&) = delete;

  /// Where this call's bytes for the peer go; every call below writes there. The session lends
  /// its caller's buffer for the length of each of its own calls.
  void set_output(std::vector<std::byte>* out) noexcept { _out = out; }

  /// The server's connection preface: its SETTINGS (once; receive() sends it if this did not).
  void start();
  /// The peer's bytes, the client preface first. Stops at the first connection error (then
  /// failed() is true and a GOAWAY is written).
  void receive(std::span<const std::byte> in);

  // Our side of a stream. Each writes at once what the windows allow; DATA beyond them, and
  // trailers behind such DATA, wait in the stream and go as the peer's WINDOW_UPDATEs come.
  void send_headers(h2_stream& s, std::span<const h2_field> fields, bool end_stream);
  /// One DATA payload gathered from `a` then `b` (a gRPC message's prefix and body).
  void send_data(h2_stream& s, std::span<const std::byte> a, std::span<const std::byte> b);
  void send_trailers(h2_stream& s, std::span<const h2_field> fields);
  void reset(h2_stream& s, std::uint32_t code);
  /// The handler took `n` bytes of the stream's DATA: the peer may send as many more.
  void consume(h2_stream& s, std::size_t n);

  /// Ends the connection: GOAWAY with `code` and `debug`; receive() takes no more.
  void fail(std::uint32_t code, std::string why, std::string_view debug = {});
  /// GOAWAY `code` (NO_ERROR: the server ends the connection in order): no new streams; those
  /// open run to their end.
  void shut_down(std::uint32_t code = h2::e_no_error, std::string_view debug = {});
  /// The handler's on_closed for the streams closed in this call. The session calls it at the
  /// end of each of its calls, so that a record stays whole while a call works on it.
  void settle();

  bool failed() const noexcept { return !_error.empty(); }
  /// A frame, or a header block, only part-received (the frame-stall timeout's business).
  bool holds_partial_frame() const noexcept { return !_partial.empty() || _in_block; }
  const std::string& error() const noexcept { return _error; }
  /// The peer sent GOAWAY (or we did) and no stream is left: the connection is done.
  bool done() const noexcept;
  h2_stream* find(std::int32_t id) noexcept;
  std::size_t open_streams() const noexcept { return _streams.size(); }
  /// DATA and trailers waiting for the peer's windows.
  std::size_t pending_bytes() const noexcept { return _pending_bytes; }
  /// What this connection holds beyond its streams' records: pending_bytes(), a frame being
  /// received, the stream table.
  std::size_t held_bytes() const noexcept {
    return _pending_bytes + _partial.capacity() + _streams.capacity() * sizeof(h2_stream*) + _repeats.held_bytes();
  }
  /// Header blocks whose fields were replayed from hpack_repeats rather than decoded.
  std::uint64_t repeated_blocks() const noexcept { return _repeated_blocks; }

 private:
  enum class phase : std::uint8_t { preface, first_settings, frames };
  bool take_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p);
  bool on_data(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p);
  bool on_headers(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p);
  bool on_continuation(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p);
  bool on_settings(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> p);
  bool on_window_update(std::uint32_t id, std::span<const std::byte> p);
  bool on_rst_stream(std::uint32_t id, std::span<const std::byte> p);
  bool take_block(std::span<const std::byte> fragment, bool first, bool final);
  bool replay_block(const hpack_repeats::fields& kept);
  bool decode_block(std::span<const std::byte> fragment, bool final);
  bool to_target() const noexcept;
  void take_field(h2_stream& s, std::string_view name, std::string_view value, bool valid);
  void end_block();
  void end_remote(h2_stream& s);
  bool unpad(std::uint8_t flags, std::span<const std::byte>& p);
  void write_data(h2_stream& s, std::size_t n, std::span<const std::byte> a, std::span<const std::byte> b,
                  std::size_t skip);
  void flush(h2_stream& s);
  void flush_blocked();
  void unblock(h2_stream& s) noexcept;
  void write_goaway(std::uint32_t code, std::string_view debug);
  void write_block(std::uint8_t flags, std::uint32_t id, std::span<const std::byte> block);
  bool table_update_due() const noexcept { return _peer_table_least < _table_max; }
  void update_table_size(std::vector<std::byte>& block);
  void encode_fields(std::span<const h2_field> fields, std::vector<std::byte>& block, bool written_now);
  static std::size_t kept_index(const h2_field& f) noexcept;
  bool put_kept(std::size_t i, std::vector<std::byte>& block);
  void close(h2_stream& s, bool by_peer) noexcept;
  void window_update(std::uint32_t id, std::uint32_t n);
  bool connection_error(std::uint32_t code, std::string why);
  bool stream_error(h2_stream& s, std::uint32_t code);
  std::vector<std::byte>& out() noexcept { return *_out; }

  h2_handler& _h;
  h2_limits _limits;
  nghttp2_mem _mem;
  nghttp2_hd_inflater* _inflater = nullptr;
  std::vector<std::byte>* _out = nullptr;
  std::vector<std::byte> _partial;  // a frame (or the preface) not yet whole
  phase _phase = phase::preface;
  std::vector<h2_stream*> _streams;  // open streams, by increasing id
  h2_stream* _last_found = nullptr;
  h2_stream* _blocked = nullptr;  // streams with DATA waiting for a window, oldest first
  h2_stream* _blocked_tail = nullptr;
  h2_stream* _closing = nullptr;  // closed in this call, oldest first: on_closed at settle()
  h2_stream* _closing_tail = nullptr;
  std::uint32_t _last_peer_stream = 0;     // the last stream opened (GOAWAY's last stream id)
  std::uint32_t _highest_peer_stream = 0;  // the highest id the peer's HEADERS used, opened or not
  std::int64_t _send_window = h2::default_window;  // the connection's, both ways
  std::int64_t _recv_window = h2::default_window;
  std::uint64_t _recv_consumed = 0;
  std::uint32_t _peer_initial_window = h2::default_window;
  std::uint32_t _peer_max_frame = h2::default_max_frame;
  bool _started = false;
  bool _settings_acked = false;  // the peer acknowledged ours: MAX_CONCURRENT_STREAMS binds it
  // The peer's HPACK decoder's dynamic table, as our blocks fill it: only kept_fields go in,
  // once each, and it is never smaller than they are, so nothing is ever evicted.
  std::uint32_t _peer_table_limit = h2::default_table_size;  // its SETTINGS_HEADER_TABLE_SIZE
  std::uint32_t _peer_table_least = h2::default_table_size;  // ... the smallest since our last block
  std::uint32_t _table_max = h2::default_table_size;  // the table's size as our blocks set it
  std::uint8_t _inserted = 0;                          // kept fields in it
  std::uint8_t _rank[h2::kept_field_count] = {};       // each one's place in that order (1 = first), or 0
  bool _goaway_received = false;
  bool _goaway_sent = false;
  // A header block being received: its stream (null when it is decoded only to keep HPACK's
  // table in step: a refused or closed stream), and how many CONTINUATIONs it has had.
  bool _in_block = false;
  std::uint32_t _block_stream = 0;
  h2_stream* _block_target = nullptr;
  bool _block_end_stream = false;
  bool _block_trailers = false;
  unsigned _continuations = 0;
  hpack_repeats _repeats;  // whole blocks a client sends again, and their fields
  // What a kept block's fields left of §8.3's checks in a request that opened with it, by its
  // slot (valid while `id` is the slot's block's): a replay of it on a new request's opening
  // block applies them, and the handler's own memory of the block, without a field compared.
  struct known_block {
    std::uint64_t id = 0;
    std::uint64_t content_length = 0;
    std::uint8_t pseudo_seen = 0;
    bool regular_seen = false;
  };
  known_block _known[hpack_repeats::kept];
  std::uint64_t _repeated_blocks = 0;
  token_bucket _resets;        // streams reset, by either side
  token_bucket _empty_frames;
  std::size_t _pending_bytes = 0;
  std::string _error;
};

}  // namespace ringrpc::detail::grpc

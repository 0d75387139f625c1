// libFuzzer target: the streams of one connection as the server keeps them, driven by the frames
// a client sends (docs/protocol.md section 13, docs/design/streams.md).
//
// Why this and not the server itself: the server's stream machine (src/server/stream_state.cpp,
// shard_streams.cpp) lives on a shard's io_uring thread with a pool and a responder; in process
// it needs a running server, and fuzzing it over loopback is slow and not deterministic. What of
// it works on the peer's bytes about streams is, beside decode_frame (frame_fuzz covers it), the
// connection's table keyed by the peer's ids (server/stream_table.hpp: open addressing with
// backward-shift deletion, the ids that ended last) and the credit arithmetic on the peer's
// windows and grants (wire/stream_credit.hpp). This target runs exactly those with the decisions
// shard_streams.cpp takes for each frame, the server's handler and a rule-following client
// around them, and checks them against plain references.
//
// The input is wire bytes (the seeds in corpus/stream are frames), cut into frames by their
// prefixes; what the handlers do between frames (consume, write, read, finish) is drawn from a
// PRNG seeded with a hash of the input, so each input replays deterministically.
//
// Invariants checked (abort on violation):
//  - the table finds exactly the ids a std::map says are open, holds as many, and
//    recently_ended() is true exactly for the last 128 ids erased (forget() remembers nothing);
//  - an arrival is accepted iff a rule-following client's send_credit (fed the same grants)
//    could send it; a grant from the server's receive_credit never exceeds what was consumed,
//    a rule-following sender's grant() of it never fails, and nothing is owed past half a window;
//  - a peer's StreamCredit is refused iff the unused credit would pass the maxima (computed
//    wide), and then changes nothing; otherwise it adds exactly the grant;
//  - a server writing only with credit never overruns the client's window: the client's arrive()
//    accepts every message, unread messages stay within the window (bytes: plus one message);
//  - no deadlock: once the client has read everything, the server may write again;
//  - the StreamCredit frames the library encodes decode to the same grant.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_prng.hpp"
#include "server/stream_table.hpp"
#include "wire/frame_codec.hpp"
#include "wire/stream_credit.hpp"

namespace {

using namespace ringrpc;
using namespace ringrpc::detail;
using wide = __int128;

using fuzz::fnv1a;
using fuzz::prng;

// Caps of shard_streams.cpp.
constexpr std::size_t max_streams_per_connection = 100;
constexpr unsigned max_protocol_errors = 100;

// One stream, both ends of it: the server's credit as stream_state keeps it, and a
// rule-following client's as client_stream_state keeps it.
struct stream {
  std::uint64_t id = 0;
  std::uint8_t kind = 0;
  bool half_closed = false;
  // False once the input sent a grant of its own: the server's credit then passes what the
  // client's receive_credit granted, and the checks that assume a rule-following client stop.
  bool client_follows_rules = true;
  receive_credit server_in{default_stream_window_messages, default_stream_window_bytes};
  send_credit client_out{default_stream_window_messages, default_stream_window_bytes};
  send_credit server_out;
  receive_credit client_in;
  std::deque<std::size_t> server_unread, client_unread;  // message sizes, in order
  wide server_unread_bytes = 0, client_unread_bytes = 0;
  std::size_t largest_in = 0, largest_out = 0;  // the largest message each way so far

  stream(std::uint64_t i, std::uint8_t k, std::uint32_t m, std::uint64_t b)
      : id(i), kind(k),
        server_out(m == 0 ? default_stream_window_messages : m, b == 0 ? default_stream_window_bytes : b),
        client_in(m, b) {}
};

class connection_model {
 public:
  explicit connection_model(std::uint64_t seed) : _rng{seed} {}
  // False once the server would have closed the connection.
  bool on_frame(const frame_view& v);

 private:
  void open(const frame_view& v);
  void on_stream_frame(const frame_view& v);
  // Both false when the frame ended the stream.
  bool on_message(stream& s, std::size_t bytes);
  bool on_credit(stream& s, std::uint32_t messages, std::uint64_t bytes);
  void run_handlers(stream& s);
  void server_consumes(stream& s);
  // Both false when the stream ended (the client saw the server break its window).
  bool server_writes(stream& s);
  bool client_reads(stream& s);
  void end(std::uint64_t id, bool remember);
  void check_table() const;
  void protocol_error() { _closed = _closed || ++_errors > max_protocol_errors; }

  prng _rng;
  stream_table<stream> _table;
  std::map<std::uint64_t, std::unique_ptr<stream>> _open;  // the reference
  std::deque<std::uint64_t> _ended;                       // the last 128 erased, newest last
  unsigned _errors = 0;
  bool _closed = false;
  frame_encoder _enc;
};

bool connection_model::on_frame(const frame_view& v) {
  if (v.call_id == 0 && v.kind != wire::Kind::Cancel) return false;  // answered on id 0, closed
  switch (v.kind) {
    case wire::Kind::StreamOpen: open(v); break;
    case wire::Kind::StreamMessage:
    case wire::Kind::StreamHalfClose:
    case wire::Kind::StreamCredit: on_stream_frame(v); break;
    case wire::Kind::Cancel:
      if (_table.find(v.call_id) != nullptr) end(v.call_id, true);
      break;
    default: break;  // calls: none of the streams' business
  }
  check_table();
  return !_closed;
}

void connection_model::open(const frame_view& v) {
  if (v.stream_kind < 1 || v.stream_kind > 3) {  // a kind mismatch, whatever the method
    protocol_error();
    return;
  }
  if (_table.find(v.call_id) != nullptr) {  // "stream N is open already"
    FUZZ_CHECK(_open.count(v.call_id) == 1);
    protocol_error();
    return;
  }
  if (_table.size() >= max_streams_per_connection) return;  // ServerBusy, no error
  auto s = std::make_unique<stream>(v.call_id, v.stream_kind, v.credit_messages, v.credit_bytes);
  // The peer's window, held to the maxima on both sides alike.
  FUZZ_CHECK(s->server_out.messages() <= max_stream_credit_messages);
  FUZZ_CHECK(s->server_out.bytes() <= max_stream_credit_bytes && s->server_out.bytes() > 0);
  FUZZ_CHECK(s->client_in.window_messages() <= max_stream_credit_messages);
  FUZZ_CHECK(s->client_in.window_bytes() <= static_cast<std::uint64_t>(max_stream_credit_bytes));
  FUZZ_CHECK(_table.insert(v.call_id, s.get()));
  FUZZ_CHECK(!_table.insert(v.call_id, s.get()));
  stream& ref = *s;
  _open.emplace(v.call_id, std::move(s));
  // A pool that is full refuses the open after it was added: forgotten, never remembered.
  if (_rng.below(16) == 0) {
    end(v.call_id, false);
    return;
  }
  run_handlers(ref);
}

void connection_model::on_stream_frame(const frame_view& v) {
  stream* s = _table.find(v.call_id);
  const auto it = _open.find(v.call_id);
  FUZZ_CHECK(s == (it == _open.end() ? nullptr : it->second.get()));
  if (s == nullptr) {
    const bool late = std::find(_ended.begin(), _ended.end(), v.call_id) != _ended.end();
    FUZZ_CHECK(_table.recently_ended(v.call_id) == late);
    if (!late) protocol_error();
    return;
  }
  if (v.kind == wire::Kind::StreamMessage) {
    if (s->kind == 1 || s->half_closed) {  // a server stream takes none; none after the half-close
      end(v.call_id, true);
      protocol_error();
      return;
    }
    if (!on_message(*s, v.payload.size())) return;
  } else if (v.kind == wire::Kind::StreamHalfClose) {
    s->half_closed = true;  // a second one is dropped
  } else if (!on_credit(*s, v.credit_messages, v.credit_bytes)) {
    return;
  }
  run_handlers(*s);
}

bool connection_model::on_message(stream& s, std::size_t bytes) {
  const bool rule_following = s.client_out.can_send();
  const bool accepted = s.server_in.arrive(bytes);
  FUZZ_CHECK(accepted == rule_following);
  if (!accepted) {  // "stream N wrote beyond its credit"
    end(s.id, true);
    protocol_error();
    return false;
  }
  s.client_out.spend(bytes);
  s.server_unread.push_back(bytes);
  s.server_unread_bytes += bytes;
  if (bytes > s.largest_in) s.largest_in = bytes;
  // Within the window: the client may overdraw the bytes by one message only.
  FUZZ_CHECK(s.server_unread.size() <= s.server_in.window_messages());
  FUZZ_CHECK(s.server_unread_bytes < static_cast<wide>(s.server_in.window_bytes()) + s.largest_in + 1);
  return true;
}

bool connection_model::on_credit(stream& s, std::uint32_t messages, std::uint64_t bytes) {
  const std::uint64_t m0 = s.server_out.messages();
  const std::int64_t b0 = s.server_out.bytes();
  const bool fits = static_cast<wide>(m0) + messages <= static_cast<wide>(max_stream_credit_messages) &&
                    static_cast<wide>(b0) + bytes <= static_cast<wide>(max_stream_credit_bytes);
  const bool granted = s.server_out.grant(messages, bytes);
  FUZZ_CHECK(granted == fits);
  if (!granted) {  // "credit overflow": nothing added, the stream ends
    FUZZ_CHECK(s.server_out.messages() == m0 && s.server_out.bytes() == b0);
    end(s.id, true);
    protocol_error();
    return false;
  }
  FUZZ_CHECK(s.server_out.messages() == m0 + messages);
  FUZZ_CHECK(static_cast<wide>(s.server_out.bytes()) == static_cast<wide>(b0) + bytes);
  if (messages != 0 || bytes != 0) s.client_follows_rules = false;
  return true;
}

// Between frames: the server's handler consumes and writes, the client reads, and sometimes the
// server ends the stream. Each step is what a well-behaved side does; the checks are on credit.
void connection_model::run_handlers(stream& s) {
  server_consumes(s);
  if (!server_writes(s) || !client_reads(s)) return;
  if (_rng.below(32) == 0) end(s.id, true);  // finish() or fail()
}

void connection_model::server_consumes(stream& s) {
  for (std::uint64_t n = _rng.below(s.server_unread.size() + 1); n > 0; --n) {
    const std::size_t bytes = s.server_unread.front();
    s.server_unread.pop_front();
    s.server_unread_bytes -= bytes;
    const receive_credit::grant g = s.server_in.consumed(bytes);
    if (g) FUZZ_CHECK(s.client_out.grant(g.messages, g.bytes));  // "this cannot fail"
  }
}

std::size_t pick_size(prng& rng) {
  switch (rng.below(6)) {
    case 0: return 0;
    case 1: return 1 + rng.below(64);
    case 2: return 1 + rng.below(64 * 1024);
    case 3: return 1 + rng.below(std::size_t{1} << 30);  // up to the largest frame a server takes
    default: return 1 + rng.below(4096);
  }
}

bool connection_model::server_writes(stream& s) {
  for (std::uint64_t n = _rng.below(8); n > 0 && s.server_out.can_send(); --n) {
    const std::size_t bytes = pick_size(_rng);
    s.server_out.spend(bytes);
    FUZZ_CHECK(static_cast<wide>(s.server_out.bytes()) > -static_cast<wide>(bytes));
    const bool within = s.client_in.arrive(bytes);
    if (!within) {  // the client ends it (protocol_error, Cancel): only when it granted on its own
      FUZZ_CHECK(!s.client_follows_rules);  // credit followed is never beyond the window
      end(s.id, true);
      return false;
    }
    s.client_unread.push_back(bytes);
    s.client_unread_bytes += bytes;
    if (bytes > s.largest_out) s.largest_out = bytes;
    FUZZ_CHECK(s.client_unread.size() <= s.client_in.window_messages());
    FUZZ_CHECK(s.client_unread_bytes < static_cast<wide>(s.client_in.window_bytes()) + s.largest_out + 1);
  }
  return true;
}

bool connection_model::client_reads(stream& s) {
  const bool all = _rng.below(2) == 0;
  for (std::uint64_t n = all ? s.client_unread.size() : _rng.below(s.client_unread.size() + 1); n > 0; --n) {
    const std::size_t bytes = s.client_unread.front();
    s.client_unread.pop_front();
    s.client_unread_bytes -= bytes;
    const receive_credit::grant g = s.client_in.consumed(bytes);
    if (!g) continue;
    // The grant as the client sends it, and as the server decodes it.
    frame_view f;
    f.call_id = s.id;
    f.kind = wire::Kind::StreamCredit;
    f.credit_messages = g.messages;
    f.credit_bytes = g.bytes;
    std::vector<std::byte> frame;
    _enc.encode_into(f, frame);
    frame_view back;
    FUZZ_CHECK(decode_frame(frame, back) == decode_outcome::ok);
    FUZZ_CHECK(back.kind == wire::Kind::StreamCredit && back.call_id == s.id);
    FUZZ_CHECK(back.credit_messages == g.messages && back.credit_bytes == g.bytes);
    if (!s.server_out.grant(back.credit_messages, back.credit_bytes)) {
      FUZZ_CHECK(!s.client_follows_rules);  // "this cannot fail"
      end(s.id, true);
      return false;
    }
  }
  // Everything read: whatever was not granted back is under half the window, so the server
  // holds credit again. A server that could not write now would wait for ever.
  if (s.client_unread.empty()) FUZZ_CHECK(s.server_out.can_send());
  return true;
}

void connection_model::end(std::uint64_t id, bool remember) {
  stream* s = remember ? _table.erase(id) : _table.forget(id);
  const auto it = _open.find(id);
  FUZZ_CHECK(it != _open.end() && s == it->second.get());
  _open.erase(it);
  if (!remember) return;
  _ended.push_back(id);
  if (_ended.size() > stream_table<stream>::remembered_ends) _ended.pop_front();
}

void connection_model::check_table() const {
  FUZZ_CHECK(_table.size() == _open.size());
  std::size_t seen = 0;
  _table.for_each([&](std::uint64_t id, stream* s) {
    const auto it = _open.find(id);
    FUZZ_CHECK(it != _open.end() && it->second.get() == s && s->id == id);
    ++seen;
  });
  FUZZ_CHECK(seen == _open.size());
  for (const auto& [id, s] : _open) FUZZ_CHECK(_table.find(id) == s.get());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  connection_model conn(fnv1a(raw, size));
  std::size_t pos = 0;
  while (size - pos >= frame_prefix_bytes) {
    const std::uint32_t body = read_frame_length(reinterpret_cast<const std::byte*>(raw + pos));
    if (body > size - pos - frame_prefix_bytes) break;  // the rest is a partial frame
    // An 8-byte aligned copy, as the server decodes (operator new aligns to 16).
    const std::vector<std::byte> frame(reinterpret_cast<const std::byte*>(raw + pos),
                                       reinterpret_cast<const std::byte*>(raw + pos) + frame_prefix_bytes + body);
    pos += frame_prefix_bytes + body;
    frame_view v;
    if (decode_frame(frame, v) != decode_outcome::ok) continue;  // answered BadRequest; no stream
    if (!conn.on_frame(v)) break;
  }
  return 0;
}

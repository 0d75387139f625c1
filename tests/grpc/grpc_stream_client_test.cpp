// gRPC C++ streaming calls (libgrpc++'s generic stub, its async streaming API over
// grpc::ByteBuffer: no protoc step) against stream methods an in-process ringrpc server registers
// with the public API (server::add_stream_method, ringrpc/stream.hpp). A gRPC call to a stream
// method is that stream (docs/grpc.md, docs/protocol.md section 13): gRPC's messages are its
// StreamMessages, the client's END_STREAM its half-close, RST_STREAM its cancel, grpc-timeout its
// deadline, the handler's headers the response headers, its end (status, message, trailers) the
// gRPC trailers, a client stream's reply the one response message, and HTTP/2 flow control its
// credit both ways. On the wire every gRPC streaming kind is the same exchange, so one generic
// bidi call plays each: a server stream writes its request and half-closes, then reads; a client
// stream writes, half-closes and reads its one answer. Every wait is bounded; nothing here
// asserts speed.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ringrpc/server.hpp"
#include "ringrpc/stream.hpp"
#include "../test_support.hpp"

#if defined(RINGRPC_TEST_TSAN)
// As in grpc_client_test.cpp: Debian's libgrpc, libgpr and abseil are not built with
// ThreadSanitizer, so their own synchronization is invisible to it. These match only stacks
// through those libraries.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n"
         "race:libupb.so\n"
         "race:libcares.so\n";
}
#endif

namespace ringrpc::test {
namespace {

using namespace std::chrono_literals;

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// n bytes of a fixed pseudo-random pattern (every byte value occurs).
std::string pattern_bytes(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& ch : s) {
    x = x * 1664525u + 1013904223u;
    ch = static_cast<char>(x >> 24);
  }
  return s;
}

/// Message i of a checked sequence: "i:" then `size` bytes in all of a pattern of its own.
std::string numbered(std::size_t i, std::size_t size) {
  std::string m = std::to_string(i) + ":";
  if (size > m.size()) m += pattern_bytes(size - m.size(), static_cast<unsigned>(i));
  return m;
}

/// Whether `m` is exactly numbered(i, m.size()).
bool is_numbered(std::string_view m, std::size_t i) {
  const std::string head = std::to_string(i) + ":";
  if (!m.starts_with(head)) return false;
  return m.substr(head.size()) == pattern_bytes(m.size() - head.size(), static_cast<unsigned>(i));
}

using grpc_metadata = std::multimap<::grpc::string_ref, ::grpc::string_ref>;

/// The value of `key` in gRPC metadata (the first one), nullopt when absent.
std::optional<std::string> find_md(const grpc_metadata& md, std::string_view key) {
  const auto it = md.find(::grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

std::string describe(const ::grpc::Status& s) {
  return "grpc code " + std::to_string(static_cast<int>(s.error_code())) + " '" + s.error_message() + "'";
}

// --- the gRPC side -----------------------------------------------------------------------------

/// A channel of its own (no subchannel shared with other tests) to 127.0.0.1:port, without
/// gRPC's transparent retries, so each status seen is the one the server gave.
std::shared_ptr<::grpc::Channel> channel_to(std::uint16_t port) {
  ::grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(16 << 20);
  return ::grpc::CreateCustomChannel("ipv4:127.0.0.1:" + std::to_string(port), ::grpc::InsecureChannelCredentials(),
                                     args);
}

/// One streaming gRPC call through GenericStub::PrepareCall, on a completion queue of its own.
/// At most one read and one write (or WritesDone) are outstanding at a time, as gRPC allows.
/// Waits are bounded; on the way out a call that has not finished is cancelled and every
/// completion it still owes is drained before the call and its queue go.
class grpc_call {
 public:
  enum op : int { op_start = 1, op_write, op_writes_done, op_read, op_finish };

  /// `deadline` from now bounds the whole call (every test call ends).
  explicit grpc_call(std::chrono::milliseconds deadline = 60s) {
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  }
  ~grpc_call() { close(); }
  grpc_call(const grpc_call&) = delete;
  grpc_call& operator=(const grpc_call&) = delete;

  /// Metadata and the deadline are set here before start().
  ::grpc::ClientContext ctx;

  /// Starts the call (the request headers go out); whether gRPC took it.
  bool start(::grpc::GenericStub& stub, const std::string& path) {
    _call = stub.PrepareCall(&ctx, path, &_cq);
    if (!_call) return false;
    issue(op_start);
    _call->StartCall(tag(op_start));
    return wait(op_start);
  }

  void start_write(std::string_view m) {
    // gRPC allows one write at a time: a write a wait gave up on is waited for again first.
    if (outstanding(op_write) && !wait(op_write)) return;
    ::grpc::Slice slice(m.data(), m.size());
    _wbuf = ::grpc::ByteBuffer(&slice, 1);
    issue(op_write);
    _call->Write(_wbuf, tag(op_write));
  }
  bool write(std::string_view m, std::chrono::milliseconds limit = 30s) {
    start_write(m);
    return wait(op_write, limit);
  }
  void start_writes_done() {
    if (outstanding(op_write) && !wait(op_write)) return;
    issue(op_writes_done);
    _call->WritesDone(tag(op_writes_done));
  }
  bool writes_done() {
    start_writes_done();
    return wait(op_writes_done);
  }
  void start_read() {
    if (outstanding(op_read)) return;  // a read a wait gave up on: its result is still to come
    _rbuf.Clear();
    issue(op_read);
    _call->Read(&_rbuf, tag(op_read));
  }
  /// The message a completed read brought.
  std::string read_body() {
    std::string out;
    std::vector<::grpc::Slice> slices;
    if (_rbuf.Valid() && _rbuf.Dump(&slices).ok()) {
      for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return out;
  }
  /// The next message; nullopt at the end of the server's messages (or when none came in `limit`).
  std::optional<std::string> read(std::chrono::milliseconds limit = 30s) {
    start_read();
    if (!wait(op_read, limit)) return std::nullopt;
    return read_body();
  }
  /// Reads until the end, at most `max` messages.
  std::vector<std::string> read_all(std::size_t max = 1'000'000) {
    std::vector<std::string> out;
    while (out.size() < max) {
      auto m = read();
      if (!m) break;
      out.push_back(std::move(*m));
    }
    return out;
  }
  /// The call's status (after the server's end has been read; a call stuck past a minute is
  /// cancelled first).
  ::grpc::Status finish() {
    if (!_call) return ::grpc::Status(::grpc::StatusCode::INTERNAL, "the call never started");
    if (!_finish_issued) {
      _finish_issued = true;
      issue(op_finish);
      _call->Finish(&_status, tag(op_finish));
    }
    if (!arrived(op_finish, 60s)) {
      ctx.TryCancel();
      arrived(op_finish, 60s);
    }
    _done.erase(op_finish);
    _finished = true;
    return _status;
  }

  /// Waits up to `limit` for `o` to complete (keeping what else completes meanwhile): whether
  /// it did. Its result stays for wait().
  bool arrived(op o, std::chrono::milliseconds limit) {
    if (!outstanding(o)) return false;  // never issued (or already taken)
    const auto until = std::chrono::system_clock::now() + limit;
    while (!_done.contains(o)) {
      if (!next_event(until)) return false;
    }
    return true;
  }
  /// Waits for `o` (up to `limit`): its ok; false when it did not complete in time (or was
  /// not outstanding).
  bool wait(op o, std::chrono::milliseconds limit = 30s) {
    if (!outstanding(o)) return false;
    if (!arrived(o, limit)) {
      timed_out = true;
      return false;
    }
    const bool ok = _done[o];
    _done.erase(o);
    return ok;
  }
  /// The next completion of any outstanding op within `limit` (one already completed first).
  std::optional<std::pair<op, bool>> next(std::chrono::milliseconds limit = 30s) {
    if (_done.empty() && !next_event(std::chrono::system_clock::now() + limit)) return std::nullopt;
    const auto it = _done.begin();
    const std::pair<op, bool> e{it->first, it->second};
    _done.erase(it);
    return e;
  }
  bool outstanding(op o) const { return _pending.contains(o) || _done.contains(o); }

  /// Set when a wait gave up: the test fails on what it expected, this says why.
  bool timed_out = false;

 private:
  static void* tag(op o) { return reinterpret_cast<void*>(static_cast<std::intptr_t>(o)); }
  void issue(op o) { _pending.insert(o); }
  bool next_event(std::chrono::system_clock::time_point until) {
    void* got = nullptr;
    bool ok = false;
    if (_cq.AsyncNext(&got, &ok, until) != ::grpc::CompletionQueue::GOT_EVENT) return false;
    const auto o = static_cast<op>(reinterpret_cast<std::intptr_t>(got));
    _pending.erase(o);
    _done[o] = ok;
    return true;
  }
  void close() {
    if (_call) {
      if (!_finished) {
        ctx.TryCancel();
        if (!_finish_issued) {
          _finish_issued = true;
          issue(op_finish);
          _call->Finish(&_status, tag(op_finish));
        }
      }
      // A cancelled call completes every op at once; the bound only keeps a broken gRPC from
      // hanging the test.
      const auto until = std::chrono::system_clock::now() + 60s;
      while (!_pending.empty() && next_event(until)) {
      }
      _call.reset();
    }
    _cq.Shutdown();
    void* got = nullptr;
    bool ok = false;
    while (_cq.Next(&got, &ok)) {
    }
  }

  ::grpc::CompletionQueue _cq;
  std::unique_ptr<::grpc::GenericClientAsyncReaderWriter> _call;
  ::grpc::ByteBuffer _wbuf;
  ::grpc::ByteBuffer _rbuf;
  ::grpc::Status _status;
  std::set<op> _pending;
  std::map<op, bool> _done;
  bool _finish_issued = false;
  bool _finished = false;
};

// --- the ringrpc side --------------------------------------------------------------------------

/// What the handlers saw, for the test to check (atomics, or under the mutex).
struct observed {
  std::mutex mu;
  std::vector<std::string> events;                                  // collect and chat: "m:<message>", "half-close"
  std::vector<std::pair<std::string, std::string>> open_metadata;   // watch's open
  std::string last_request;                                         // countdown's request
  std::optional<server_stream> held;                                // hold's stream, paused
  std::atomic<int> opens{0};      // watch streams opened
  std::atomic<int> messages{0};   // messages handed to watch, hold and slow_sum handlers
  std::atomic<int> cancels{0};    // on_cancel, every handler
  std::atomic<int> dones{0};      // on_done, every handler
  std::atomic<int> final_status{-1};
  std::atomic<bool> ended_at_cancel{false};  // server_stream::ended() inside on_cancel
  std::atomic<bool> had_deadline{false};
  std::atomic<std::int64_t> remaining_ms{-1};
  std::atomic<std::uint64_t> written{0};  // firehose's messages taken by write()
  std::atomic<int> blocked{0};            // firehose's writes that said would_block
};

/// Counts every stream's end in `observed`.
class tracked_handler : public stream_handler {
 public:
  explicit tracked_handler(observed& w) : seen(w) {}
  void on_cancel(server_stream& s) override {
    seen.ended_at_cancel = s.ended();
    seen.cancels.fetch_add(1);
  }
  void on_done(status final_status) override {
    seen.final_status = static_cast<int>(final_status);
    seen.dones.fetch_add(1);
  }

 protected:
  observed& seen;
};

/// Client stream: records every message and the half-close; answers at the half-close with
/// "collected N messages, B bytes", a header and a trailer. The message "boom" fails it
/// (PERMISSION_DENIED, with a trailer) before the client is done.
class collect_handler final : public tracked_handler {
 public:
  using tracked_handler::tracked_handler;
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    const std::string text = text_of(m);
    if (text == "boom") {
      s.add_trailer("srv-why", "boom");
      s.fail(status::permission_denied, "no boom allowed: 100% caf\xc3\xa9");
      return;
    }
    {
      std::lock_guard lock(seen.mu);
      seen.events.push_back("m:" + text);
    }
    ++_count;
    _bytes += m.size();
    _last = text;
  }
  void on_half_close(server_stream& s) override {
    {
      std::lock_guard lock(seen.mu);
      seen.events.emplace_back("half-close");
    }
    s.add_header("srv-kind", "client");
    s.add_trailer("srv-count", std::to_string(_count));
    if (_last == "no reply") {
      s.finish();  // no payload: a gRPC client stream still gets its one (empty) message
      return;
    }
    s.finish("collected " + std::to_string(_count) + " messages, " + std::to_string(_bytes) + " bytes");
  }

 private:
  std::size_t _count = 0;
  std::size_t _bytes = 0;
  std::string _last;
};

/// Bidi: answers every message with "re:" + it, in order (keeping what credit does not let out
/// yet), its first frame carrying a header; ends once the client half-closed and everything went
/// out, with a trailer. The message "stop" fails it (ABORTED) before the client is done.
class chat_handler final : public tracked_handler {
 public:
  using tracked_handler::tracked_handler;
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    const std::string text = text_of(m);
    {
      std::lock_guard lock(seen.mu);
      seen.events.push_back("m:" + text);
    }
    if (!_headed) {
      _headed = true;
      s.add_header("srv-kind", "bidi");
    }
    if (text == "stop") {
      s.fail(status::aborted, "stopped by request");
      return;
    }
    ++_count;
    _waiting.push_back("re:" + text);
    on_writable(s);
  }
  void on_writable(server_stream& s) override {
    while (!_waiting.empty() && s.write(_waiting.front()) == write_result::ok) _waiting.pop_front();
    if (_waiting.empty() && _half_closed) end(s);
  }
  void on_half_close(server_stream& s) override {
    {
      std::lock_guard lock(seen.mu);
      seen.events.emplace_back("half-close");
    }
    _half_closed = true;
    if (_waiting.empty()) end(s);
  }

 private:
  void end(server_stream& s) {
    s.add_trailer("srv-echoed", std::to_string(_count));
    s.finish();
  }
  std::deque<std::string> _waiting;
  std::size_t _count = 0;
  bool _half_closed = false;
  bool _headed = false;
};

/// Server stream: request "N" sends "0".."N-1"; "N fail" then ends FAILED_PRECONDITION. A header
/// goes with the first frame, a trailer with the end.
class countdown_handler final : public tracked_handler {
 public:
  countdown_handler(observed& w, std::size_t n, bool fail) : tracked_handler(w), _n(n), _fail(fail) {}
  void on_writable(server_stream& s) override {
    while (_next < _n) {
      if (s.write(std::to_string(_next)) != write_result::ok) return;  // on_writable comes back
      ++_next;
    }
    s.add_trailer("srv-sent", std::to_string(_next));
    if (_fail) {
      s.add_trailer("srv-why", "asked");
      s.fail(status::failed_precondition, "stopped after " + std::to_string(_next) + ": 100% caf\xc3\xa9");
    } else {
      s.finish();
    }
  }

 private:
  std::size_t _n;
  bool _fail;
  std::size_t _next = 0;
};

/// Server stream: request "N SIZE" sends numbered(i, SIZE) for i < N, then ends; counts what
/// write() took and how often it said would_block.
class firehose_handler final : public tracked_handler {
 public:
  firehose_handler(observed& w, std::size_t n, std::size_t size) : tracked_handler(w), _n(n), _size(size) {}
  void on_writable(server_stream& s) override {
    while (_next < _n) {
      if (_message.empty()) _message = numbered(_next, _size);
      const write_result r = s.write(_message);
      if (r == write_result::would_block) seen.blocked.fetch_add(1);
      if (r != write_result::ok) return;
      _message.clear();
      ++_next;
      seen.written.fetch_add(1);
    }
    s.finish();
  }

 private:
  std::size_t _n;
  std::size_t _size;
  std::size_t _next = 0;
  std::string _message;
};

/// Bidi that only watches: its open's metadata and deadline, its messages, its end. It never
/// ends the stream itself.
class watch_handler final : public tracked_handler {
 public:
  using tracked_handler::tracked_handler;
  void on_message(server_stream&, std::span<const std::byte>) override { seen.messages.fetch_add(1); }
};

/// Client stream that checks every message is numbered(i, ...) in order and answers at the
/// half-close with "count=N bytes=B bad=K". `hold` pauses its reading at the first message and
/// hands the test its stream (seen.held) to resume; `slow` sleeps at every message.
class checking_handler final : public tracked_handler {
 public:
  checking_handler(observed& w, bool hold, bool slow) : tracked_handler(w), _hold(hold), _slow(slow) {}
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    seen.messages.fetch_add(1);
    if (!is_numbered(text_of(m), _count)) ++_bad;
    ++_count;
    _bytes += m.size();
    if (_hold && _count == 1) {
      s.pause_reading();
      std::lock_guard lock(seen.mu);
      seen.held = s;
    }
    if (_slow) std::this_thread::sleep_for(_count % 50 == 0 ? 50ms : 1ms);
  }
  void on_half_close(server_stream& s) override {
    s.finish("count=" + std::to_string(_count) + " bytes=" + std::to_string(_bytes) + " bad=" + std::to_string(_bad));
  }

 private:
  bool _hold;
  bool _slow;
  std::size_t _count = 0;
  std::size_t _bytes = 0;
  std::size_t _bad = 0;
};

/// The decimal words of a request ("N", "N fail", "N SIZE"), in order; other words are skipped.
std::vector<std::size_t> numbers_of(std::string_view request) {
  std::vector<std::size_t> out;
  std::size_t at = 0;
  while (at < request.size()) {
    const std::size_t end = std::min(request.find(' ', at), request.size());
    const std::string word(request.substr(at, end - at));
    if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      out.push_back(std::stoull(word));
    }
    at = end + 1;
  }
  return out;
}

/// A started server with the test's stream methods (and a unary echo), and a gRPC channel and
/// generic stub to it.
struct served {
  explicit served(server_options o = {}) {
    o.readers = 1;
    o.handlers = 4;  // a slow or waiting handler holds one while others go on
    srv = std::make_unique<server>(o);
    srv->add_method("echo", [](call_context& c) { c.reply(c.payload()); });
    srv->add_stream_method("collect", stream_kind::client, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<collect_handler>(seen);
    });
    srv->add_stream_method("chat", stream_kind::bidi, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<chat_handler>(seen);
    });
    srv->add_stream_method("countdown", stream_kind::server, [this](server_stream& st, std::span<const std::byte> req) {
      const std::string text = text_of(req);
      {
        std::lock_guard lock(seen.mu);
        seen.last_request = text;
      }
      const auto n = numbers_of(text);
      if (n.size() != 1) {
        st.fail(status::bad_request, "countdown takes \"N\" or \"N fail\"");
        return std::make_unique<stream_handler>();
      }
      st.add_header("srv-total", std::to_string(n[0]));
      auto h = std::make_unique<countdown_handler>(seen, n[0], text.ends_with(" fail"));
      h->on_writable(st);
      return std::unique_ptr<stream_handler>(std::move(h));
    });
    srv->add_stream_method("firehose", stream_kind::server, [this](server_stream& st, std::span<const std::byte> req) {
      const auto n = numbers_of(text_of(req));
      if (n.size() != 2) {
        st.fail(status::bad_request, "firehose takes \"N SIZE\"");
        return std::make_unique<stream_handler>();
      }
      auto h = std::make_unique<firehose_handler>(seen, n[0], n[1]);
      h->on_writable(st);
      return std::unique_ptr<stream_handler>(std::move(h));
    });
    srv->add_stream_method("watch", stream_kind::bidi, [this](server_stream& st, std::span<const std::byte>) {
      {
        std::lock_guard lock(seen.mu);
        seen.open_metadata.clear();
        for (const metadata_entry& m : st.metadata()) seen.open_metadata.emplace_back(m.key, m.value);
      }
      const auto left = st.remaining();
      seen.had_deadline = left != std::chrono::nanoseconds::max();
      seen.remaining_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
      seen.opens.fetch_add(1);
      return std::make_unique<watch_handler>(seen);
    });
    srv->add_stream_method("hold", stream_kind::client, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<checking_handler>(seen, true, false);
    });
    srv->add_stream_method("slow_sum", stream_kind::client, [this](server_stream&, std::span<const std::byte>) {
      return std::make_unique<checking_handler>(seen, false, true);
    });
    srv->start();
    channel = channel_to(srv->port());
    stub = std::make_unique<::grpc::GenericStub>(channel);
  }

  ~served() {
    // The channel goes before the server: nothing of gRPC's waits on a stopped port.
    stub.reset();
    channel.reset();
    srv.reset();
  }

  /// A unary call of `path` (the unary path next to the streams).
  std::pair<::grpc::Status, std::string> unary(const std::string& path, std::string_view request) {
    grpc_call c(30s);
    if (!c.start(*stub, path)) return {::grpc::Status(::grpc::StatusCode::INTERNAL, "no call"), ""};
    c.write(request);
    c.writes_done();
    auto body = c.read();
    const auto st = c.finish();
    return {st, body.value_or("")};
  }
  std::vector<std::string> events() {
    std::lock_guard lock(seen.mu);
    return seen.events;
  }
  std::uint64_t counter(server_counter which) const { return srv->stats()[which]; }

  observed seen;
  std::unique_ptr<server> srv;
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<::grpc::GenericStub> stub;
};

// --- 1. client stream --------------------------------------------------------------------------

TEST(grpc_streams, a_client_stream_hands_the_messages_in_order_then_the_half_close_and_answers_once) {
  served s;
  std::vector<std::string> sent;
  {
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/collect"));
    for (std::size_t i = 0; i < 100; ++i) {
      sent.push_back("m" + std::to_string(i) + "-" + pattern_bytes(i * 13 % 300, static_cast<unsigned>(i)));
      ASSERT_TRUE(c.write(sent.back())) << "write " << i;
    }
    ASSERT_TRUE(c.writes_done());
    std::size_t bytes = 0;
    for (const auto& m : sent) bytes += m.size();
    const auto reply = c.read();
    ASSERT_TRUE(reply.has_value()) << "no response message";
    EXPECT_EQ(*reply, "collected 100 messages, " + std::to_string(bytes) + " bytes");
    EXPECT_EQ(c.read(), std::nullopt) << "a client stream answers with one message";
    const auto st = c.finish();
    ASSERT_TRUE(st.ok()) << describe(st);
    EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-kind"), std::optional<std::string>("client"));
    EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-count"), std::optional<std::string>("100"));
    EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-kind"), std::nullopt) << "a header came as a trailer";
    EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-count"), std::nullopt) << "a trailer came as a header";
  }
  auto events = s.events();
  ASSERT_EQ(events.size(), 101u);
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_TRUE(events[i] == "m:" + sent[i]) << "message " << i << " arrived out of order or altered";
  }
  EXPECT_EQ(events.back(), "half-close") << "the half-close came before a message";
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 1; }));
  EXPECT_EQ(s.seen.final_status.load(), static_cast<int>(status::ok));
  EXPECT_EQ(s.seen.cancels.load(), 0);

  // No message at all: END_STREAM alone is the half-close, and the answer still comes.
  {
    std::lock_guard lock(s.seen.mu);
    s.seen.events.clear();
  }
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/collect"));
  ASSERT_TRUE(c.writes_done());
  EXPECT_EQ(c.read(), std::optional<std::string>("collected 0 messages, 0 bytes"));
  const auto st = c.finish();
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(s.events(), std::vector<std::string>{"half-close"});

  // A handler that finishes without a reply: the one response message is empty (docs/grpc.md,
  // "Streams": an empty protobuf is a message), not missing.
  grpc_call e;
  ASSERT_TRUE(e.start(*s.stub, "/collect"));
  ASSERT_TRUE(e.write("no reply"));
  ASSERT_TRUE(e.writes_done());
  EXPECT_EQ(e.read(), std::optional<std::string>(""));
  EXPECT_EQ(e.read(), std::nullopt);
  const auto est = e.finish();
  EXPECT_TRUE(est.ok()) << describe(est);
}

// --- 2. server stream --------------------------------------------------------------------------

TEST(grpc_streams, a_server_stream_sends_its_messages_with_the_headers_first_and_the_trailers_at_the_end) {
  served s;
  {
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/countdown"));
    ASSERT_TRUE(c.write("200"));
    ASSERT_TRUE(c.writes_done());
    const auto got = c.read_all();
    const auto st = c.finish();
    ASSERT_TRUE(st.ok()) << describe(st);
    ASSERT_EQ(got.size(), 200u);
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::to_string(i));
    EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-total"), std::optional<std::string>("200"));
    EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-sent"), std::optional<std::string>("200"));
    std::lock_guard lock(s.seen.mu);
    EXPECT_EQ(s.seen.last_request, "200") << "the one request message is the stream's request";
  }
  // No message: the end alone carries the header (gRPC C++ may hand a trailers-only response's
  // headers over as trailing metadata).
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/countdown"));
  ASSERT_TRUE(c.write("0"));
  ASSERT_TRUE(c.writes_done());
  EXPECT_EQ(c.read(), std::nullopt);
  const auto st = c.finish();
  ASSERT_TRUE(st.ok()) << describe(st);
  auto all = c.ctx.GetServerTrailingMetadata();
  all.insert(c.ctx.GetServerInitialMetadata().begin(), c.ctx.GetServerInitialMetadata().end());
  EXPECT_EQ(find_md(all, "srv-total"), std::optional<std::string>("0"));
  EXPECT_EQ(find_md(all, "srv-sent"), std::optional<std::string>("0"));
}

// --- 3. bidi stream ----------------------------------------------------------------------------

TEST(grpc_streams, a_bidi_stream_answers_in_lockstep_and_ends_after_the_half_close) {
  served s;
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/chat"));
  for (int i = 0; i < 50; ++i) {
    const std::string m = "line " + std::to_string(i);
    ASSERT_TRUE(c.write(m)) << i;
    const auto r = c.read();
    ASSERT_TRUE(r.has_value()) << "no answer to " << i;
    EXPECT_EQ(*r, "re:" + m);
    if (i == 0) {
      EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-kind"), std::optional<std::string>("bidi"))
          << "the first message carries the handler's header";
    }
  }
  ASSERT_TRUE(c.writes_done());
  EXPECT_EQ(c.read(), std::nullopt);
  const auto st = c.finish();
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-echoed"), std::optional<std::string>("50"));
  const auto events = s.events();
  ASSERT_EQ(events.size(), 51u);
  EXPECT_EQ(events.front(), "m:line 0");
  EXPECT_EQ(events[49], "m:line 49");
  EXPECT_EQ(events.back(), "half-close");
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 1; }));
  EXPECT_EQ(s.seen.final_status.load(), static_cast<int>(status::ok));
}

TEST(grpc_streams, a_bidi_stream_pipelined_both_ways_keeps_every_message_in_order) {
  served s;
  constexpr std::size_t n = ringrpc::test::sanitized ? 100 : 300;
  const auto message = [](std::size_t i) { return numbered(i, (i * 7919) % (64 * 1024)); };
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/chat"));
  std::size_t sent = 1, got = 0, wrong = 0;
  bool writes_done = false;
  c.start_read();
  c.start_write(message(0));
  // One write and one read outstanding at all times, each reissued as it completes.
  while (got < n || !writes_done) {
    const auto e = c.next(30s);
    ASSERT_TRUE(e.has_value()) << "stuck: " << sent << " sent, " << got << " received";
    ASSERT_TRUE(e->second) << "op " << e->first << " failed: " << sent << " sent, " << got << " received";
    if (e->first == grpc_call::op_write) {
      if (sent < n) {
        c.start_write(message(sent++));
      } else {
        c.start_writes_done();
      }
    } else if (e->first == grpc_call::op_writes_done) {
      writes_done = true;
    } else if (e->first == grpc_call::op_read) {
      if (c.read_body() != "re:" + message(got)) ++wrong;
      if (++got < n) c.start_read();
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(c.read(), std::nullopt);
  const auto st = c.finish();
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-echoed"), std::optional<std::string>(std::to_string(n)));
}

// --- 4. a handler's error ----------------------------------------------------------------------

TEST(grpc_streams, a_handlers_error_ends_the_call_with_its_status_message_and_trailers) {
  served s;
  {
    // After five messages, FAILED_PRECONDITION with a message that needs percent-encoding.
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/countdown"));
    ASSERT_TRUE(c.write("5 fail"));
    ASSERT_TRUE(c.writes_done());
    EXPECT_EQ(c.read_all(), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::FAILED_PRECONDITION) << describe(st);
    EXPECT_EQ(st.error_message(), "stopped after 5: 100% caf\xc3\xa9");
    EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-total"), std::optional<std::string>("5"));
    EXPECT_EQ(find_md(c.ctx.GetServerTrailingMetadata(), "srv-why"), std::optional<std::string>("asked"));
  }
  {
    // An error before any message.
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/countdown"));
    ASSERT_TRUE(c.write("0 fail"));
    ASSERT_TRUE(c.writes_done());
    EXPECT_EQ(c.read(), std::nullopt);
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::FAILED_PRECONDITION) << describe(st);
    EXPECT_EQ(st.error_message(), "stopped after 0: 100% caf\xc3\xa9");
    auto all = c.ctx.GetServerTrailingMetadata();
    all.insert(c.ctx.GetServerInitialMetadata().begin(), c.ctx.GetServerInitialMetadata().end());
    EXPECT_EQ(find_md(all, "srv-total"), std::optional<std::string>("0"));
    EXPECT_EQ(find_md(all, "srv-why"), std::optional<std::string>("asked"));
  }
  {
    // A client stream the handler fails before the client has half-closed: the client reads
    // the end without having finished sending.
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/collect"));
    ASSERT_TRUE(c.write("a"));
    c.write("boom");  // may already find the call ended
    EXPECT_EQ(c.read(), std::nullopt);
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::PERMISSION_DENIED) << describe(st);
    EXPECT_EQ(st.error_message(), "no boom allowed: 100% caf\xc3\xa9");
    auto all = c.ctx.GetServerTrailingMetadata();
    all.insert(c.ctx.GetServerInitialMetadata().begin(), c.ctx.GetServerInitialMetadata().end());
    EXPECT_EQ(find_md(all, "srv-why"), std::optional<std::string>("boom"));
    EXPECT_FALSE(c.timed_out);
  }
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 3; }));
  EXPECT_EQ(s.seen.final_status.load(), static_cast<int>(status::permission_denied));
  {
    // A bidi stream that answered once, then fails while the client still may send.
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/chat"));
    ASSERT_TRUE(c.write("hi"));
    EXPECT_EQ(c.read(), std::optional<std::string>("re:hi"));
    c.write("stop");
    EXPECT_EQ(c.read(), std::nullopt);
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::ABORTED) << describe(st);
    EXPECT_EQ(st.error_message(), "stopped by request");
    EXPECT_EQ(find_md(c.ctx.GetServerInitialMetadata(), "srv-kind"), std::optional<std::string>("bidi"));
  }
  // The channel serves on.
  const auto [st, body] = s.unary("/echo", "still here");
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(body, "still here");
}

// --- 5. cancellation ---------------------------------------------------------------------------

TEST(grpc_streams, try_cancel_reaches_the_handler_of_a_bidi_and_of_a_server_stream) {
  served s;
  {
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/watch"));
    ASSERT_TRUE(c.write("hello"));
    ASSERT_TRUE(eventually([&] { return s.seen.messages.load() == 1; }, 20s)) << "the handler never got the message";
    c.start_read();
    c.ctx.TryCancel();
    EXPECT_FALSE(c.wait(grpc_call::op_read));
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::CANCELLED) << describe(st);
  }
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 1; }, 10s)) << "the stream never ended on the server";
  EXPECT_EQ(s.seen.cancels.load(), 1) << "on_cancel did not run";
  EXPECT_TRUE(s.seen.ended_at_cancel.load());
  EXPECT_EQ(s.seen.final_status.load(), static_cast<int>(status::cancelled));

  // A server stream that would go on for a long time, cancelled mid-way.
  {
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, "/firehose"));
    ASSERT_TRUE(c.write("1000000 1000"));
    ASSERT_TRUE(c.writes_done());
    for (std::size_t i = 0; i < 10; ++i) {
      const auto m = c.read();
      ASSERT_TRUE(m.has_value()) << i;
      EXPECT_TRUE(is_numbered(*m, i)) << i;
    }
    c.ctx.TryCancel();
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::CANCELLED) << describe(st);
  }
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 2; }, 10s)) << "the server stream never ended";
  EXPECT_EQ(s.seen.cancels.load(), 2);
  EXPECT_EQ(s.seen.final_status.load(), static_cast<int>(status::cancelled));
  const auto written = s.seen.written.load();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(s.seen.written.load(), written) << "the handler still writes";
  EXPECT_LT(written, 1'000'000u);
  std::printf("grpc_cancels counted: %llu\n",
              static_cast<unsigned long long>(s.counter(server_counter::grpc_cancels)));

  const auto [st, body] = s.unary("/echo", "next");
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(body, "next");
  EXPECT_TRUE(eventually([&] { return s.counter(server_counter::streams_open) == 0; }));
}

// --- 6. flow control ---------------------------------------------------------------------------

TEST(grpc_streams, a_handler_that_reads_slowly_still_gets_every_message_of_a_large_client_stream) {
  served s;
  constexpr std::size_t n = ringrpc::test::sanitized ? 100 : 300;
  constexpr std::size_t size = 16 * 1024;  // 4.8 MB in all: many windows of either kind of credit
  grpc_call c(120s);
  ASSERT_TRUE(c.start(*s.stub, "/slow_sum"));
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(c.write(numbered(i, size), 60s)) << "write " << i;
  ASSERT_TRUE(c.writes_done());
  const auto reply = c.read(60s);
  const auto st = c.finish();
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(reply, std::optional<std::string>("count=" + std::to_string(n) + " bytes=" + std::to_string(n * size) +
                                              " bad=0"));
  EXPECT_EQ(s.seen.messages.load(), static_cast<int>(n));
}

TEST(grpc_streams, a_handler_that_stops_reading_holds_the_client_back_and_loses_nothing) {
  served s;
  constexpr std::size_t n = 1000;
  constexpr std::size_t size = 64 * 1024;  // 64 MiB in all: past any window and in-flight cap
  grpc_call c(180s);
  ASSERT_TRUE(c.start(*s.stub, "/hold"));
  // Write until a write stays outstanding for 2 s once the handler has its first message (and
  // has paused): then only HTTP/2's window can be holding the client. (Before that, a slow
  // machine's delay is no stall.)
  std::size_t taken = 0;
  bool stalled = false;
  while (taken < n) {
    c.start_write(numbered(taken, size));
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    bool written = false;
    while (!(written = c.arrived(grpc_call::op_write, 2s))) {
      if (s.seen.messages.load() >= 1 || std::chrono::steady_clock::now() > give_up) break;
    }
    if (!written) {
      stalled = true;
      break;
    }
    ASSERT_TRUE(c.wait(grpc_call::op_write)) << "write " << taken << " failed";
    ++taken;
  }
  ASSERT_TRUE(stalled) << "all " << n << " messages of 64 KiB went out to a handler that read one";
  EXPECT_LT(taken, n);
  EXPECT_EQ(s.seen.messages.load(), 1) << "the paused handler was handed more messages";
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(s.seen.mu);
    return s.seen.held.has_value();
  }));
  std::printf("the client was held back after %zu of %zu messages\n", taken, n);
  {
    std::lock_guard lock(s.seen.mu);
    s.seen.held->resume_reading();
  }
  ASSERT_TRUE(c.wait(grpc_call::op_write, 60s)) << "the stalled write never completed";
  for (++taken; taken < n; ++taken) ASSERT_TRUE(c.write(numbered(taken, size), 60s)) << "write " << taken;
  ASSERT_TRUE(c.writes_done());
  const auto reply = c.read(60s);
  const auto st = c.finish();
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(reply, std::optional<std::string>("count=" + std::to_string(n) + " bytes=" + std::to_string(n * size) +
                                              " bad=0"));
}

TEST(grpc_streams, a_client_that_does_not_read_holds_the_handlers_writes_back_through_credit) {
  served s;
  // A stream far longer than any window (HTTP/2's, the kernel's socket buffers, the server's
  // queued replies) can hold: the handler may only get ahead of the client by that much.
  constexpr std::size_t n = 1'000'000;
  constexpr std::size_t size = 64 * 1024;
  grpc_call c(180s);
  ASSERT_TRUE(c.start(*s.stub, "/firehose"));
  ASSERT_TRUE(c.write(std::to_string(n) + " " + std::to_string(size)));
  ASSERT_TRUE(c.writes_done());
  const auto first = c.read();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(is_numbered(*first, 0));
  // The client reads nothing more: the handler's writes must come to would_block and stay there.
  const auto limit = std::chrono::steady_clock::now() + 30s;
  auto last = s.seen.written.load();
  auto since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(100ms);
    const auto now = s.seen.written.load();
    if (now != last) {
      last = now;
      since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - since >= 1s && s.seen.blocked.load() > 0) {
      break;
    }
  }
  ASSERT_GT(s.seen.blocked.load(), 0) << "no write of the handler was ever held back (" << last << " written)";
  EXPECT_LT(last, 4096u) << "the handler got 256 MiB ahead of a client that read one message";
  EXPECT_EQ(s.seen.dones.load(), 0);
  EXPECT_GT(s.counter(server_counter::stream_writes_blocked_credit) +
                s.counter(server_counter::stream_writes_blocked_buffer),
            0u);
  std::printf("the handler was held back after %llu messages of 64 KiB\n", static_cast<unsigned long long>(last));
  // Now it reads: the messages go on in order, nothing lost, and the handler writes again.
  const std::size_t more = last + 300;
  std::size_t got = 1, wrong = 0;
  while (got < more) {
    const auto m = c.read(60s);
    ASSERT_TRUE(m.has_value()) << "the stream ended after " << got << " messages";
    if (m->size() != size || !is_numbered(*m, got)) ++wrong;
    ++got;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(eventually([&] { return s.seen.written.load() > last; })) << "reading gave the handler no credit back";
  c.ctx.TryCancel();
  const auto st = c.finish();
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::CANCELLED) << describe(st);
  EXPECT_TRUE(eventually([&] { return s.seen.dones.load() == 1; })) << "the stream never ended on the server";
}

TEST(grpc_streams, a_stream_message_past_max_frame_bytes_ends_that_stream_and_the_connection_serves_on) {
  server_options o;
  o.max_frame_bytes = 64 * 1024;
  served s(o);
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/chat"));
  ASSERT_TRUE(c.write("small"));
  EXPECT_EQ(c.read(), std::optional<std::string>("re:small"));
  c.write(std::string(100 * 1024, 'y'));  // may find the stream ended already
  EXPECT_EQ(c.read(), std::nullopt);
  const auto st = c.finish();
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << describe(st);
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == 1; })) << "the handler's stream never ended";
  EXPECT_EQ(s.events(), std::vector<std::string>{"m:small"}) << "the handler was handed the oversized message";
  const auto [ust, body] = s.unary("/echo", "after");
  EXPECT_TRUE(ust.ok()) << describe(ust);
  EXPECT_EQ(body, "after");
  EXPECT_EQ(s.counter(server_counter::grpc_connections), 1u) << "the connection was replaced";
}

// --- 7. deadline -------------------------------------------------------------------------------

TEST(grpc_streams, grpc_timeout_is_the_streams_deadline_and_ends_a_stream_the_handler_keeps_open) {
  served s;
  // On a machine busy enough that the open waits out its 300 ms before the server takes it,
  // the server refuses it unrun: then it is tried again, a few times.
  bool ran = false;
  for (int attempt = 1; attempt <= 5 && !ran; ++attempt) {
    grpc_call c(300ms);
    if (c.start(*s.stub, "/watch")) {
      c.write("m", 10s);
      EXPECT_EQ(c.read(30s), std::nullopt);
    }
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED) << describe(st);
    ran = eventually([&] { return s.seen.opens.load() >= 1; }, 2s);
  }
  ASSERT_TRUE(ran) << "the stream never opened in 5 attempts";
  EXPECT_TRUE(s.seen.had_deadline.load()) << "grpc-timeout did not become the stream's deadline";
  // gRPC C-core rounds the grpc-timeout it sends up (to the millisecond, and to three
  // significant figures past 1 s): the server may see a hair more than the client set.
  EXPECT_LE(s.seen.remaining_ms.load(), 303);
  // Ended on the server: by its deadline, or by the RST_STREAM gRPC sends when it gives up,
  // whichever came first; the handler heard of it either way.
  ASSERT_TRUE(eventually([&] { return s.seen.dones.load() == s.seen.opens.load(); }, 10s))
      << "the stream outlived its deadline on the server";
  const auto how = static_cast<status>(s.seen.final_status.load());
  EXPECT_TRUE(how == status::deadline_exceeded || how == status::cancelled) << to_string(how);
  EXPECT_EQ(s.seen.cancels.load(), s.seen.opens.load()) << "on_cancel did not run";

  const auto [st, body] = s.unary("/echo", "after the deadline");
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(body, "after the deadline");
}

// --- 8. request metadata -----------------------------------------------------------------------

TEST(grpc_streams, request_metadata_reaches_the_stream_handler) {
  served s;
  const std::string binary("\x00\xff\x80\x01 not utf-8 \xc3\x28", 15);
  grpc_call c;
  c.ctx.AddMetadata("tenant", "blue");
  c.ctx.AddMetadata("trace-bin", binary);
  c.ctx.AddMetadata("request-id", "r-42");
  ASSERT_TRUE(c.start(*s.stub, "/watch"));
  ASSERT_TRUE(c.write("x"));
  ASSERT_TRUE(eventually([&] { return s.seen.messages.load() == 1; }, 20s));
  std::vector<std::pair<std::string, std::string>> md;
  {
    std::lock_guard lock(s.seen.mu);
    md = s.seen.open_metadata;
  }
  std::vector<std::pair<std::string, std::string>> ours;
  for (const auto& [k, v] : md) {
    EXPECT_FALSE(k.starts_with(":")) << k;
    EXPECT_FALSE(k.starts_with("grpc-")) << k;
    EXPECT_NE(k, "te");
    EXPECT_NE(k, "content-type");
    EXPECT_NE(k, "user-agent");
    if (k == "tenant" || k == "trace-bin" || k == "request-id") ours.emplace_back(k, v);
  }
  std::sort(ours.begin(), ours.end());
  const std::vector<std::pair<std::string, std::string>> expected{
      {"request-id", "r-42"}, {"tenant", "blue"}, {"trace-bin", binary}};
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(ours.size(), md.size()) << "the handler saw pairs the caller did not send";
  // The call's 60 s deadline came along as grpc-timeout (which gRPC C-core rounds up to three
  // significant figures: 60,001 ms goes as "60100m").
  EXPECT_TRUE(s.seen.had_deadline.load());
  EXPECT_LE(s.seen.remaining_ms.load(), 60'100);
  EXPECT_GT(s.seen.remaining_ms.load(), 0);
}

// --- 9. many streams, unary calls beside them ---------------------------------------------------

TEST(grpc_streams, a_unary_call_goes_through_while_a_stream_is_open) {
  served s;
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/chat"));
  ASSERT_TRUE(c.write("before"));
  EXPECT_EQ(c.read(), std::optional<std::string>("re:before"));
  const auto [st, body] = s.unary("/echo", "in between");
  EXPECT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(body, "in between");
  ASSERT_TRUE(c.write("after"));
  EXPECT_EQ(c.read(), std::optional<std::string>("re:after"));
  ASSERT_TRUE(c.writes_done());
  EXPECT_EQ(c.read(), std::nullopt);
  const auto end = c.finish();
  EXPECT_TRUE(end.ok()) << describe(end);
}

TEST(grpc_streams, concurrent_streams_of_every_kind_and_unary_calls_share_one_channel) {
  served s;
  constexpr int chats = ringrpc::test::sanitized ? 6 : 12;
  constexpr int countdowns = 4;
  constexpr int collects = 4;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < chats; ++t) {
    threads.emplace_back([&, t] {
      grpc_call c;
      if (!c.start(*s.stub, "/chat")) return;
      for (int i = 0; i < 30; ++i) {
        const std::string m = std::to_string(t) + "/" + std::to_string(i) +
                              pattern_bytes(static_cast<std::size_t>(t * 97 + i * 31), static_cast<unsigned>(t));
        if (!c.write(m) || c.read() != "re:" + m) return;
      }
      if (!c.writes_done() || c.read().has_value() || !c.finish().ok()) return;
      ++good;
    });
  }
  for (int t = 0; t < countdowns; ++t) {
    threads.emplace_back([&, t] {
      grpc_call c;
      const std::size_t n = 100 + static_cast<std::size_t>(t);
      if (!c.start(*s.stub, "/countdown") || !c.write(std::to_string(n)) || !c.writes_done()) return;
      const auto got = c.read_all();
      if (!c.finish().ok() || got.size() != n) return;
      for (std::size_t i = 0; i < n; ++i) {
        if (got[i] != std::to_string(i)) return;
      }
      ++good;
    });
  }
  for (int t = 0; t < collects; ++t) {
    threads.emplace_back([&, t] {
      grpc_call c;
      if (!c.start(*s.stub, "/collect")) return;
      std::size_t bytes = 0;
      for (int i = 0; i < 20 + t; ++i) {
        const std::string m = "c" + std::to_string(t) + "." + std::to_string(i);
        bytes += m.size();
        if (!c.write(m)) return;
      }
      if (!c.writes_done()) return;
      const auto reply = c.read();
      if (!c.finish().ok()) return;
      if (reply != "collected " + std::to_string(20 + t) + " messages, " + std::to_string(bytes) + " bytes") return;
      ++good;
    });
  }
  int unary_good = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string m = "u" + std::to_string(i);
    const auto [st, body] = s.unary("/echo", m);
    if (st.ok() && body == m) ++unary_good;
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), chats + countdowns + collects);
  EXPECT_EQ(unary_good, 20);
  EXPECT_TRUE(eventually([&] { return s.counter(server_counter::streams_open) == 0; }));
  EXPECT_GE(s.counter(server_counter::streams_opened), static_cast<std::uint64_t>(chats + countdowns + collects));
}

// --- 10. unknown methods, unary methods through the streaming API ------------------------------

TEST(grpc_streams, unknown_methods_are_unimplemented_and_unary_methods_still_take_one_message) {
  served s;
  for (const char* path : {"/no_such_stream", "/NoSuchService/Stream", "/a/b/c"}) {
    grpc_call c;
    ASSERT_TRUE(c.start(*s.stub, path));
    c.write("x");
    c.writes_done();
    EXPECT_EQ(c.read(), std::nullopt) << path;
    const auto st = c.finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED) << path << ": " << describe(st);
  }
  // A unary method through the streaming API: one message is its request.
  {
    const auto [st, body] = s.unary("/echo", "one");
    EXPECT_TRUE(st.ok()) << describe(st);
    EXPECT_EQ(body, "one");
  }
  // Two messages are not a unary request (docs/grpc.md, "The mapping"): refused, unrun.
  grpc_call c;
  ASSERT_TRUE(c.start(*s.stub, "/echo"));
  c.write("one");
  c.write("two");
  c.writes_done();
  EXPECT_EQ(c.read(), std::nullopt);
  const auto st = c.finish();
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED) << describe(st);
}

}  // namespace
}  // namespace ringrpc::test

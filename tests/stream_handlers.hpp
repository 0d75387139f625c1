#pragma once
// Stream handlers that the stream tests share (tests/server/streams_test.cpp speaks raw frames
// to them, tests/client/client_streams_test.cpp the client's API): a server stream that counts,
// a client stream that sums, a bidi stream that echoes, a bidi stream that only watches.

#include <atomic>
#include <cstddef>
#include <deque>
#include <span>
#include <string>

#include "ringrpc/stream.hpp"
#include "test_support.hpp"

namespace ringrpc::test {

inline std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// Client stream: counts the messages and their bytes; answers at the half-close with "sum of N"
/// and both as trailers.
class sum_handler final : public stream_handler {
 public:
  void on_message(server_stream&, std::span<const std::byte> m) override {
    ++_count;
    _bytes += m.size();
  }
  void on_half_close(server_stream& s) override {
    s.add_trailer("count", std::to_string(_count));
    s.add_trailer("bytes", std::to_string(_bytes));
    s.finish("sum of " + std::to_string(_count));
  }

 private:
  std::size_t _count = 0;
  std::size_t _bytes = 0;
};

/// Bidi: echoes every message in order, keeping what credit does not let out yet; finishes once
/// the client half-closed and everything went out.
class echo_handler final : public stream_handler {
 public:
  void on_message(server_stream& s, std::span<const std::byte> m) override {
    if (_waiting.empty() && s.write(m) == write_result::ok) return;
    _waiting.emplace_back(text_of(m));
  }
  void on_writable(server_stream& s) override {
    while (!_waiting.empty() && s.write(_waiting.front()) == write_result::ok) _waiting.pop_front();
    if (_waiting.empty() && _half_closed) s.finish();
  }
  void on_half_close(server_stream& s) override {
    _half_closed = true;
    if (_waiting.empty()) s.finish();
  }

 private:
  std::deque<std::string> _waiting;
  bool _half_closed = false;
};

/// Server stream: `n` messages "0".."n-1" (padded with '.' to `bytes` when that is longer),
/// then finish; waits for credit when it runs out, counting in `blocked` (if given) how often.
class count_handler final : public stream_handler {
 public:
  explicit count_handler(int n, std::size_t bytes = 0, std::atomic<int>* blocked = nullptr)
      : _n(n), _bytes(bytes), _blocked(blocked) {}
  void start(server_stream& s) { on_writable(s); }
  void on_writable(server_stream& s) override {
    while (_next < _n) {
      std::string m = std::to_string(_next);
      if (_bytes > m.size()) m.resize(_bytes, '.');
      const write_result r = s.write(m);
      if (r == write_result::would_block && _blocked != nullptr) _blocked->fetch_add(1);
      if (r != write_result::ok) return;  // on_writable comes back
      ++_next;
    }
    s.finish();
  }

 private:
  int _n;
  std::size_t _bytes;
  std::atomic<int>* _blocked;
  int _next = 0;
};

/// What a watch_handler saw, for the test to look at. The first message may wait at a gate (so
/// later ones stay unconsumed).
struct watch {
  std::atomic<int> opens{0};
  std::atomic<int> messages{0};
  std::atomic<int> cancels{0};
  std::atomic<int> dones{0};
  std::atomic<status> final_status{status::ok};
  // Atomic: the handler's thread learns of the test's frames through the kernel, which the
  // thread sanitizer cannot see as an ordering.
  std::atomic<gate*> first{nullptr};
};

/// Bidi that only watches.
class watch_handler final : public stream_handler {
 public:
  explicit watch_handler(watch& w) : _w(w) { _w.opens.fetch_add(1); }
  void on_message(server_stream&, std::span<const std::byte>) override {
    gate* first = _w.first.load();
    if (_w.messages.fetch_add(1) == 0 && first != nullptr) first->wait();
  }
  void on_cancel(server_stream&) override { _w.cancels.fetch_add(1); }
  void on_done(status s) override {
    _w.final_status.store(s);
    _w.dones.fetch_add(1);
  }

 private:
  watch& _w;
};

}  // namespace ringrpc::test

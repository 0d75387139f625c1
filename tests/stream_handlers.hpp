#pragma once
// Stream handlers that the stream tests share (tests/server/streams_test.cpp speaks raw frames
// to them, tests/client/client_streams_test.cpp the client's API): a client stream that sums,
// a bidi stream that echoes.

#include <cstddef>
#include <deque>
#include <span>
#include <string>

#include "ringrpc/stream.hpp"

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

}  // namespace ringrpc::test

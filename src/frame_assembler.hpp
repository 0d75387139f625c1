#pragma once
// Splits a byte stream into frames, keeping the tail of a frame that spans receive buffers.

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "frame_codec.hpp"

namespace ringrpc::detail {

/// Reassembles length-prefixed frames from arbitrary slices of a stream. Owned by one thread.
///
/// Bytes are only copied when a frame spans slices (or delivery is paused): a frame that lies
/// whole inside a slice is handed to the sink in place, and a frame that spans slices is
/// completed with just the bytes it lacks. The length prefix is checked against
/// the limit before anything is reserved for the body, so a hostile prefix costs nothing.
class frame_assembler {
 public:
  enum class result {
    ok,               ///< everything consumed or kept for later
    paused,           ///< the sink asked to stop; the rest is kept, call drain() later
    frame_too_large,  ///< a prefix exceeded the limit; the stream cannot be trusted any more
  };

  explicit frame_assembler(std::uint32_t max_body_bytes) noexcept : _max_body(max_body_bytes) {}

  /// Feeds one slice. `sink(std::span<const std::byte> frame)` gets each complete frame, prefix
  /// included, and returns false to pause delivery. The span is valid only during the call.
  template <class Sink>
  result feed(std::span<const std::byte> data, Sink&& sink) {
    if (_paused) {
      append(data);
      return drain(sink);
    }
    if (_end > _start) {
      // Complete the kept frame with just the bytes it lacks; the rest of the slice is then
      // delivered in place like any other.
      const std::size_t header_missing =
          _end - _start < frame_prefix_bytes ? frame_prefix_bytes - (_end - _start) : 0;
      if (header_missing > 0) {
        const std::size_t take = std::min(header_missing, data.size());
        append(data.first(take));
        data = data.subspan(take);
        if (_end - _start < frame_prefix_bytes) return result::ok;
      }
      const std::uint32_t body = read_frame_length(_buf.data() + _start);
      if (body > _max_body) {
        _rejected = body;
        _start = _end = 0;
        return result::frame_too_large;
      }
      const std::size_t whole = frame_prefix_bytes + body;
      _need = whole;
      const std::size_t take = std::min(whole - (_end - _start), data.size());
      append(data.first(take));
      data = data.subspan(take);
      if (_end - _start < whole) return result::ok;
      const bool go_on = sink(std::span<const std::byte>(_buf.data() + _start, whole));
      _start = _end = 0;
      _need = 0;
      if (!go_on) {
        append(data);
        _paused = true;
        return result::paused;
      }
    }
    std::size_t used = 0;
    const result r = deliver(data, used, sink);
    append(data.subspan(used));
    return r;
  }

  /// Keeps a slice without delivering anything (the owner has paused this stream).
  void hold(std::span<const std::byte> data) {
    append(data);
    _paused = true;
  }

  /// Delivers frames kept from earlier slices (after a pause).
  template <class Sink>
  result drain(Sink&& sink) {
    _paused = false;
    std::size_t used = 0;
    const result r = deliver(std::span<const std::byte>(_buf.data() + _start, _end - _start), used, sink);
    _start += used;
    if (_start == _end) {
      _start = _end = 0;
      // A connection that once carried a huge frame should not pin that memory forever.
      if (_buf.size() > shrink_above) std::vector<std::byte>().swap(_buf);
    }
    return r;
  }

  /// True while delivery is paused with bytes kept (hold(), or a sink that returned false).
  bool holding() const noexcept { return _paused && _end > _start; }

  /// Bytes held back: an incomplete frame, or complete ones not delivered because of a pause.
  std::size_t buffered() const noexcept { return _end - _start; }

  /// After frame_too_large: the offending length prefix.
  std::uint32_t rejected_length() const noexcept { return _rejected; }

  std::uint32_t max_body_bytes() const noexcept { return _max_body; }

 private:
  static constexpr std::size_t shrink_above = 256 * 1024;

  template <class Sink>
  result deliver(std::span<const std::byte> data, std::size_t& used, Sink& sink) {
    _need = 0;
    while (data.size() - used >= frame_prefix_bytes) {
      const std::uint32_t body = read_frame_length(data.data() + used);
      if (body > _max_body) {
        _rejected = body;
        used = data.size();  // nothing after a bad prefix can be framed
        return result::frame_too_large;
      }
      const std::size_t whole = frame_prefix_bytes + body;
      if (data.size() - used < whole) {
        _need = whole;
        break;
      }
      const bool go_on = sink(data.subspan(used, whole));
      used += whole;
      if (!go_on) {
        _paused = true;
        return result::paused;
      }
    }
    return result::ok;
  }

  void append(std::span<const std::byte> data) {
    if (data.empty()) return;
    if (_start > 0 && _start == _end) _start = _end = 0;
    if (_start > 0 && _end + data.size() > _buf.size()) {
      // Slide the kept bytes to the front before growing, so a long-lived connection's buffer
      // stays one frame in size.
      std::memmove(_buf.data(), _buf.data() + _start, _end - _start);
      _end -= _start;
      _start = 0;
    }
    std::size_t want = _end + data.size();
    // Reserve the whole pending frame at once; _need <= prefix + max body, checked before set.
    if (want < _start + _need) want = _start + _need;
    if (want > _buf.size()) _buf.resize(want);
    std::memcpy(_buf.data() + _end, data.data(), data.size());
    _end += data.size();
  }

  std::uint32_t _max_body;
  std::uint32_t _rejected = 0;
  std::size_t _need = 0;
  bool _paused = false;
  std::vector<std::byte> _buf;
  std::size_t _start = 0;
  std::size_t _end = 0;
};

}  // namespace ringrpc::detail

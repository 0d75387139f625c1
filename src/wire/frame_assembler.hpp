#pragma once
// Splits a byte stream into frames, keeping the tail of a frame that spans receive buffers.

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "wire/frame_codec.hpp"

namespace ringrpc::detail {

/// Reassembles length-prefixed frames from arbitrary slices of a stream. Owned by one thread.
///
/// Bytes are only copied when a frame spans slices (or delivery is paused): a frame that lies
/// whole inside a slice is handed to the sink in place, and a frame that spans slices is
/// completed with just the bytes it lacks. Memory follows the bytes that arrived, never what a
/// length prefix claims: the buffer grows geometrically from a small start as bytes come in, so
/// a peer claiming 16 MiB and sending 100 bytes costs a few KiB. A buffer above `keep_bytes` is
/// freed as soon as it holds nothing, so one huge frame does not pin its memory afterwards.
class frame_assembler {
 public:
  enum class result {
    ok,               ///< everything consumed or kept for later
    paused,           ///< the sink asked to stop; the rest is kept, call drain() later
    frame_too_large,  ///< a prefix exceeded the limit; the stream cannot be trusted any more
    no_memory,        ///< the buffer could not grow; what was kept is dropped, like the stream
  };

  /// Smallest buffer allocated, and the largest one kept while empty.
  static constexpr std::size_t initial_bytes = 512;
  static constexpr std::size_t keep_bytes = 4096;

  explicit frame_assembler(std::uint32_t max_body_bytes) noexcept : _max_body(max_body_bytes) {}
  frame_assembler(const frame_assembler&) = delete;
  frame_assembler& operator=(const frame_assembler&) = delete;

  /// Feeds one slice. `sink(std::span<const std::byte> frame)` gets each complete frame, prefix
  /// included, and returns false to pause delivery. The span is valid only during the call.
  template <class Sink>
  result feed(std::span<const std::byte> data, Sink&& sink) {
    if (_paused) {
      if (!append(data)) return out_of_memory();
      return drain(sink);
    }
    if (_end > _start) {
      // Complete the kept frame with just the bytes it lacks; the rest of the slice is then
      // delivered in place like any other.
      const std::size_t header_missing =
          _end - _start < frame_prefix_bytes ? frame_prefix_bytes - (_end - _start) : 0;
      if (header_missing > 0) {
        const std::size_t take = std::min(header_missing, data.size());
        if (!append(data.first(take))) return out_of_memory();
        data = data.subspan(take);
        if (_end - _start < frame_prefix_bytes) return result::ok;
      }
      const std::uint32_t body = read_frame_length(_buf.get() + _start);
      if (body > _max_body) {
        _rejected = body;
        reset();
        return result::frame_too_large;
      }
      const std::size_t whole = frame_prefix_bytes + body;
      const std::size_t take = std::min(whole - (_end - _start), data.size());
      if (!append(data.first(take), whole)) return out_of_memory();
      data = data.subspan(take);
      if (_end - _start < whole) return result::ok;
      const bool go_on = sink(std::span<const std::byte>(_buf.get() + _start, whole));
      _start = _end = 0;
      if (!go_on) {
        if (!append(data)) return out_of_memory();
        _paused = true;
        return result::paused;
      }
      release_if_big();
    }
    std::size_t used = 0;
    const result r = deliver(data, used, sink);
    if (!append(data.subspan(used))) return out_of_memory();
    return r;
  }

  /// Keeps a slice without delivering anything (the owner has paused this stream). False when
  /// the buffer could not grow (nothing is kept then: treat it like no_memory).
  bool hold(std::span<const std::byte> data) {
    _paused = true;
    if (append(data)) return true;
    out_of_memory();
    return false;
  }

  /// Delivers frames kept from earlier slices (after a pause).
  template <class Sink>
  result drain(Sink&& sink) {
    _paused = false;
    std::size_t used = 0;
    const result r = deliver(std::span<const std::byte>(_buf.get() + _start, _end - _start), used, sink);
    _start += used;
    if (_start == _end) {
      _start = _end = 0;
      release_if_big();
    }
    return r;
  }

  /// True while delivery is paused with bytes kept (hold(), or a sink that returned false).
  bool holding() const noexcept { return _paused && _end > _start; }

  /// Bytes held back: an incomplete frame, or complete ones not delivered because of a pause.
  std::size_t buffered() const noexcept { return _end - _start; }

  /// Bytes allocated for the buffer now (what a memory budget should count).
  std::size_t capacity() const noexcept { return _cap; }

  /// After frame_too_large: the offending length prefix.
  std::uint32_t rejected_length() const noexcept { return _rejected; }

  std::uint32_t max_body_bytes() const noexcept { return _max_body; }

  /// Drops everything kept and frees the buffer.
  void reset() noexcept {
    _start = _end = 0;
    _buf.reset();
    _cap = 0;
  }

 private:
  template <class Sink>
  result deliver(std::span<const std::byte> data, std::size_t& used, Sink& sink) {
    while (data.size() - used >= frame_prefix_bytes) {
      const std::uint32_t body = read_frame_length(data.data() + used);
      if (body > _max_body) {
        _rejected = body;
        used = data.size();  // nothing after a bad prefix can be framed
        return result::frame_too_large;
      }
      const std::size_t whole = frame_prefix_bytes + body;
      if (data.size() - used < whole) break;
      const bool go_on = sink(data.subspan(used, whole));
      used += whole;
      if (!go_on) {
        _paused = true;
        return result::paused;
      }
    }
    return result::ok;
  }

  result out_of_memory() noexcept {
    reset();
    return result::no_memory;
  }

  void release_if_big() noexcept {
    if (_start == _end && _cap > keep_bytes) reset();
  }

  // Appends, growing by doubling: the bytes copied over a frame's life stay below twice its
  // size, and the allocation never runs ahead of what arrived by more than that factor.
  // `frame_bytes`, when the kept bytes are one frame of that known size, caps the growth at it
  // (a 16 MiB frame gets 16 MiB, not the next power of two).
  bool append(std::span<const std::byte> data, std::size_t frame_bytes = 0) noexcept {
    if (data.empty()) return true;
    if (_start > 0 && _start == _end) _start = _end = 0;
    if (_end + data.size() > _cap && _start > 0) {
      // Slide the kept bytes to the front before growing, so a long-lived connection's buffer
      // stays one frame in size.
      std::memmove(_buf.get(), _buf.get() + _start, _end - _start);
      _end -= _start;
      _start = 0;
    }
    const std::size_t want = _end + data.size();
    if (want > _cap) {
      std::size_t cap = std::max(_cap * 2, initial_bytes);
      while (cap < want) cap *= 2;
      if (frame_bytes >= want && cap > frame_bytes) cap = frame_bytes;
      // Uninitialised on purpose: zero-filling would touch (and so commit) every page at once.
      std::unique_ptr<std::byte[]> grown(new (std::nothrow) std::byte[cap]);
      if (!grown) return false;
      if (_end > 0) std::memcpy(grown.get(), _buf.get(), _end);
      _buf = std::move(grown);
      _cap = cap;
    }
    std::memcpy(_buf.get() + _end, data.data(), data.size());
    _end += data.size();
    return true;
  }

  std::uint32_t _max_body;
  std::uint32_t _rejected = 0;
  bool _paused = false;
  std::unique_ptr<std::byte[]> _buf;
  std::size_t _cap = 0;
  std::size_t _start = 0;
  std::size_t _end = 0;
};

}  // namespace ringrpc::detail

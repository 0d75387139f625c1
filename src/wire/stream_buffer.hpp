#pragma once
// The unparsed bytes of one connection's input: the store behind basic_frame_assembler, for the
// server's and client's frames and ringrpc-load's replies alike.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <span>

namespace ringrpc::detail {

/// Memory follows the bytes that arrived, never what a peer claims: the buffer grows
/// geometrically from InitialBytes as bytes are appended, and one grown past KeepBytes is freed
/// as soon as everything in it has been consumed (or moved to a buffer the size of what is
/// left once three quarters are consumed), so one huge frame does not pin its size for the
/// rest of a connection's life. Owned by one thread.
template <std::size_t InitialBytes, std::size_t KeepBytes>
class stream_buffer {
 public:
  static constexpr std::size_t initial_bytes = InitialBytes;
  static constexpr std::size_t keep_bytes = KeepBytes;

  std::span<const std::byte> data() const noexcept { return {_buf.get() + _start, _end - _start}; }
  bool empty() const noexcept { return _start == _end; }
  std::size_t size() const noexcept { return _end - _start; }
  std::size_t capacity() const noexcept { return _cap; }

  /// Appends, growing by doubling: the bytes copied over a frame's life stay below twice its
  /// size, and the allocation never runs ahead of what arrived by more than that factor.
  /// `frame_bytes`, when the kept bytes are one frame of that known size, caps the growth at it
  /// (a 16 MiB frame gets 16 MiB, not the next power of two). False when memory ran out;
  /// nothing was appended then.
  bool append(std::span<const std::byte> bytes, std::size_t frame_bytes = 0) noexcept {
    if (bytes.empty()) return true;
    if (_start > 0 && _start == _end) _start = _end = 0;
    if (_end + bytes.size() > _cap && _start > 0) {
      // Slide the kept bytes to the front before growing, so a long-lived connection's buffer
      // stays one frame in size.
      std::memmove(_buf.get(), _buf.get() + _start, _end - _start);
      _end -= _start;
      _start = 0;
    }
    const std::size_t want = _end + bytes.size();
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
    std::memcpy(_buf.get() + _end, bytes.data(), bytes.size());
    _end += bytes.size();
    return true;
  }

  /// Drops `n` consumed bytes from the front.
  void consume(std::size_t n) noexcept {
    _start += n;
    const std::size_t kept = _end - _start;
    if (kept == 0) {
      _start = _end = 0;
      if (_cap > keep_bytes) clear();
    } else if (_cap > keep_bytes && kept * 4 <= _cap) {
      // Mostly consumed: move the tail into a buffer its size, if memory allows.
      const std::size_t cap = std::max(initial_bytes, std::bit_ceil(kept));
      std::unique_ptr<std::byte[]> smaller(new (std::nothrow) std::byte[cap]);
      if (!smaller) return;
      std::memcpy(smaller.get(), _buf.get() + _start, kept);
      _buf = std::move(smaller);
      _cap = cap;
      _start = 0;
      _end = kept;
    }
  }

  /// Drops everything kept; frees a buffer grown past keep_bytes.
  void clear() noexcept {
    _start = _end = 0;
    if (_cap > keep_bytes) release();
  }

  /// Drops everything kept and frees the buffer whatever its size.
  void release() noexcept {
    _start = _end = 0;
    _buf.reset();
    _cap = 0;
  }

 private:
  std::unique_ptr<std::byte[]> _buf;
  std::size_t _cap = 0;
  std::size_t _start = 0;
  std::size_t _end = 0;
};

}  // namespace ringrpc::detail

#pragma once
// Splits a byte stream into frames, keeping the tail of a frame that spans receive buffers.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "wire/frame_codec.hpp"
#include "wire/stream_buffer.hpp"

namespace ringrpc::detail {

/// What a framer says about the bytes at the front of a stream.
struct frame_measure {
  enum class kind : std::uint8_t {
    need_more,  ///< no whole frame yet; `bytes`: the frame's whole size when known, else 0
    whole,      ///< `bytes`: the size of the whole frame at the front
    invalid,    ///< the bytes cannot start a frame; `bytes`: the offending length, if any
  };
  kind what = kind::need_more;
  std::size_t bytes = 0;
};

/// Reassembles frames from arbitrary slices of a stream. Owned by one thread. The Framer says
/// where frames end (`frame_measure measure(std::span<const std::byte> front)`), and its
/// `initial_bytes` / `keep_bytes` size the buffer (stream_buffer). A framer that can tell a
/// frame's size before the frame is whole (a length prefix) sets `sizes_ahead`, so a spanning
/// frame is completed with just the bytes it lacks. ringrpc's frames (frame_assembler below)
/// and ringrpc-load's replies of every protocol (tools/load/engine.cpp) share this; a template
/// rather than virtual hooks because it runs once per frame on both hot paths.
///
/// Bytes are only copied when a frame spans slices (or delivery is paused): a frame that lies
/// whole inside a slice is handed to the sink in place. Memory follows the bytes that arrived,
/// never what a length prefix claims (see stream_buffer), so a peer claiming 16 MiB and
/// sending 100 bytes costs a few KiB.
template <class Framer>
class basic_frame_assembler {
 public:
  enum class result {
    ok,               ///< everything consumed or kept for later
    paused,           ///< the sink asked to stop; the rest is kept, call drain() later
    frame_too_large,  ///< the framer rejected the bytes (a prefix over the limit); the stream cannot be trusted any more
    no_memory,        ///< the buffer could not grow; what was kept is dropped, like the stream
  };

  /// Smallest buffer allocated, and the largest one kept while empty.
  static constexpr std::size_t initial_bytes = Framer::initial_bytes;
  static constexpr std::size_t keep_bytes = Framer::keep_bytes;

  explicit basic_frame_assembler(Framer framer) noexcept : _framer(std::move(framer)) {}
  basic_frame_assembler(const basic_frame_assembler&) = delete;
  basic_frame_assembler& operator=(const basic_frame_assembler&) = delete;
  basic_frame_assembler(basic_frame_assembler&&) noexcept = default;
  basic_frame_assembler& operator=(basic_frame_assembler&&) noexcept = default;

  /// Feeds one slice. `sink(std::span<const std::byte> frame)` gets each complete frame, prefix
  /// included, and returns false to pause delivery. The span is valid only during the call.
  template <class Sink>
  result feed(std::span<const std::byte> data, Sink&& sink) {
    if (_paused) {
      if (!_buf.append(data)) return out_of_memory();
      return drain(sink);
    }
    // Outside a pause the buffer holds at most the start of one frame: complete it first (with
    // just the bytes it lacks, when the framer knows how many); the rest of the slice is then
    // delivered in place like any other.
    while (!_buf.empty() && !data.empty()) {
      std::size_t take = data.size();
      std::size_t frame_bytes = 0;
      if constexpr (Framer::sizes_ahead) {
        const frame_measure m = _framer.measure(_buf.data());
        if (m.what == frame_measure::kind::invalid) return reject(m.bytes);
        frame_bytes = m.bytes;
        if (frame_bytes > _buf.size()) take = std::min(frame_bytes - _buf.size(), data.size());
      }
      if (!_buf.append(data.first(take), frame_bytes)) return out_of_memory();
      data = data.subspan(take);
      if (frame_bytes != 0 && _buf.size() < frame_bytes) continue;  // still short (or only the prefix came)
      const result r = deliver_kept(sink);
      if (r == result::paused && !_buf.append(data)) return out_of_memory();
      if (r != result::ok) return r;
    }
    std::size_t used = 0;
    const result r = deliver(data, used, sink);
    if (!_buf.append(data.subspan(used))) return out_of_memory();
    return r;
  }

  /// Keeps a slice without delivering anything (the owner has paused this stream). False when
  /// the buffer could not grow (nothing is kept then: treat it like no_memory).
  bool hold(std::span<const std::byte> data) {
    _paused = true;
    if (_buf.append(data)) return true;
    out_of_memory();
    return false;
  }

  /// Delivers frames kept from earlier slices (after a pause).
  template <class Sink>
  result drain(Sink&& sink) {
    _paused = false;
    return deliver_kept(sink);
  }

  /// True while delivery is paused with bytes kept (hold(), or a sink that returned false).
  bool holding() const noexcept { return _paused && !_buf.empty(); }

  /// Bytes held back: an incomplete frame, or complete ones not delivered because of a pause.
  std::size_t buffered() const noexcept { return _buf.size(); }

  /// Bytes allocated for the buffer now (what a memory budget should count).
  std::size_t capacity() const noexcept { return _buf.capacity(); }

  /// After frame_too_large: the offending length (a length prefix's claim).
  std::size_t rejected_length() const noexcept { return _rejected; }

  Framer& framer() noexcept { return _framer; }
  const Framer& framer() const noexcept { return _framer; }

  /// Drops everything kept and frees the buffer.
  void reset() noexcept { _buf.release(); }

  /// Drops everything kept and any pause, ready for a new stream (a reconnection); keeps a
  /// buffer of at most keep_bytes.
  void restart() noexcept {
    _buf.clear();
    _paused = false;
  }

 private:
  template <class Sink>
  result deliver(std::span<const std::byte> data, std::size_t& used, Sink& sink) {
    while (used < data.size()) {
      const frame_measure m = _framer.measure(data.subspan(used));
      if (m.what == frame_measure::kind::invalid) {
        _rejected = m.bytes;
        used = data.size();  // nothing after a bad frame can be framed
        return result::frame_too_large;
      }
      if (m.what == frame_measure::kind::need_more) break;
      const bool go_on = sink(data.subspan(used, m.bytes));
      used += m.bytes;
      if (!go_on) {
        _paused = true;
        return result::paused;
      }
    }
    return result::ok;
  }

  // Delivers what the buffer holds, drops what was delivered.
  template <class Sink>
  result deliver_kept(Sink& sink) {
    std::size_t used = 0;
    const result r = deliver(_buf.data(), used, sink);
    if (used > 0 || _buf.empty()) _buf.consume(used);  // consume(0) could shrink mid-frame
    return r;
  }

  result reject(std::size_t claimed) noexcept {
    _rejected = claimed;
    reset();
    return result::frame_too_large;
  }

  result out_of_memory() noexcept {
    reset();
    return result::no_memory;
  }

  std::size_t _rejected = 0;  // before the framer: a 4-byte framer then packs with _paused
  Framer _framer;
  bool _paused = false;
  stream_buffer<Framer::initial_bytes, Framer::keep_bytes> _buf;
};

/// ringrpc's framing: a length prefix (frame_codec.hpp) checked against a limit before a byte
/// of the body is kept.
struct length_prefix_framer {
  static constexpr std::size_t initial_bytes = 512;
  static constexpr std::size_t keep_bytes = 4096;
  static constexpr bool sizes_ahead = true;

  std::uint32_t max_body_bytes;

  frame_measure measure(std::span<const std::byte> front) const noexcept {
    if (front.size() < frame_prefix_bytes) return {frame_measure::kind::need_more, frame_prefix_bytes};
    const std::uint32_t body = read_frame_length(front.data());
    if (body > max_body_bytes) return {frame_measure::kind::invalid, body};
    const std::size_t whole = frame_prefix_bytes + body;
    return {front.size() < whole ? frame_measure::kind::need_more : frame_measure::kind::whole, whole};
  }
};

/// The server's and the client's reassembly of ringrpc frames.
class frame_assembler : public basic_frame_assembler<length_prefix_framer> {
 public:
  explicit frame_assembler(std::uint32_t max_body_bytes) noexcept
      : basic_frame_assembler(length_prefix_framer{max_body_bytes}) {}

  std::uint32_t rejected_length() const noexcept {
    return static_cast<std::uint32_t>(basic_frame_assembler::rejected_length());
  }
  std::uint32_t max_body_bytes() const noexcept { return framer().max_body_bytes; }
};

}  // namespace ringrpc::detail

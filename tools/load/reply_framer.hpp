#pragma once
// How ringrpc-load finds replies in a connection's input: the shared reassembly
// (wire/frame_assembler.hpp) with the protocol's codec as its framer.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "protocol.hpp"
#include "wire/frame_assembler.hpp"
#include "wire/stream_buffer.hpp"

namespace ringrpc::load {

/// ringrpc-load's framing for the shared reassembly (wire/frame_assembler.hpp): the
/// connection's codec finds where a reply ends, whatever the protocol, and the reply it parsed
/// waits in `last` for the sink, so each reply is parsed once.
struct reply_framer {
  static constexpr std::size_t initial_bytes = 4096;
  static constexpr std::size_t keep_bytes = 64 * 1024;
  static constexpr bool sizes_ahead = false;  // HTTP and RESP replies do not say their size first

  /// How many bytes of a reply that did not parse are kept for the diagnosis of what the
  /// server speaks instead.
  static constexpr std::size_t kept_bad_bytes = 64;

  connection_codec* codec = nullptr;
  reply last;
  std::vector<std::byte> bad_front;  ///< the front of the last input that did not parse

  detail::frame_measure measure(std::span<const std::byte> front) {
    last = codec->parse_reply(front);
    switch (last.status) {
      case reply_status::incomplete: return {detail::frame_measure::kind::need_more, 0};
      case reply_status::protocol_error:
        bad_front.assign(front.begin(), front.begin() + static_cast<std::ptrdiff_t>(std::min(front.size(), kept_bad_bytes)));
        return {detail::frame_measure::kind::invalid, 0};
      case reply_status::ok:
      case reply_status::error_reply:
      case reply_status::no_reply: break;
    }
    if (last.consumed == 0) return {detail::frame_measure::kind::invalid, 0};  // would never advance
    return {detail::frame_measure::kind::whole, last.consumed};
  }
};

/// One connection's input: replies are handed over in place where they lie whole in a receive
/// buffer; only a reply's unparsed start is kept, in a receive_buffer.
using reply_assembler = detail::basic_frame_assembler<reply_framer>;
/// The unparsed bytes of one connection's input (memory follows the bytes that arrived; see
/// stream_buffer).
using receive_buffer = detail::stream_buffer<reply_framer::initial_bytes, reply_framer::keep_bytes>;

}  // namespace ringrpc::load

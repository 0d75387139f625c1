#pragma once
// What the ringrpc-load reply targets (load_reply_fuzz, h2_reply_fuzz) share: a codec with
// requests written, fed a server's bytes one read at a time the way the engine feeds it, with
// the checks every protocol's replies owe: each consumes bytes it was given and no more, and a
// protocol error's diagnosis is one printable line. What a reply must say beyond that is the
// target's own check.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "protocol.hpp"
#include "sniff.hpp"

namespace ringrpc::fuzz {

class reply_rig {
 public:
  /// A codec of `t`'s protocol (an 8-byte payload, replies capped at 64 KiB; with `stream`, its
  /// --stream codec) with requests 0 .. outstanding - 1 of its first default kind written.
  reply_rig(const load::target& t, unsigned outstanding, bool stream = false) : _t(t) {
    load::codec_options options;
    options.stream = stream;
    options.stream_depth = outstanding;
    options.payload.assign(8, std::byte{'x'});
    options.max_reply_bytes = 1 << 16;
    _proto = load::make_protocol(_t, options);
    _codec = _proto->new_connection();
    _kinds = _proto->default_kinds();
    std::vector<std::byte> out;
    for (unsigned i = 0; i < outstanding; ++i) _codec->write_request(out, i, _kinds[0]);
  }

  load::connection_codec& codec() { return *_codec; }

  /// One read's bytes: appended to what is left, then every whole reply is parsed and handed
  /// to check(reply). False once a reply is a protocol error: the engine ends the connection.
  template <class Check>
  bool feed(std::span<const std::byte> part, const Check& check) {
    _buffer.insert(_buffer.end(), part.begin(), part.end());
    while (!_buffer.empty()) {
      const load::reply r = _codec->parse_reply(_buffer);
      if (r.status == load::reply_status::incomplete) break;
      if (r.status == load::reply_status::protocol_error) {
        // What the engine does with it: the diagnosis of the bytes, one printable line.
        const auto head = std::span(_buffer).first(std::min<std::size_t>(_buffer.size(), 64));
        const std::string line = load::diagnose_reply(_t, head, r.error);
        for (const char c : line) {
          if (c == '\n' || c == '\r' || c == '\0') bug("a diagnosis spans lines");
        }
        return false;
      }
      if (r.consumed == 0 || r.consumed > _buffer.size()) bug("a reply consumed nothing or more than it was given");
      check(r);
      _buffer.erase(_buffer.begin(), _buffer.begin() + static_cast<std::ptrdiff_t>(r.consumed));
    }
    return true;
  }

 private:
  load::target _t;
  std::unique_ptr<load::protocol> _proto;  // before the codec, which it outlives
  // The kinds the requests were written with: a codec keeps a reference to its request's kind
  // until the request is sent (h2 submits it later, from write_pending), so they live as long.
  std::vector<load::request_kind> _kinds;
  std::unique_ptr<load::connection_codec> _codec;
  std::vector<std::byte> _buffer;
};

}  // namespace ringrpc::fuzz

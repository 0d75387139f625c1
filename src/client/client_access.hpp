#pragma once
// What the library's layers above a client (the channel, src/channel) may do with one that its
// public API does not offer. Friend of client and client_runtime; nothing here is public.

#include <memory>
#include <span>
#include <string_view>

#include "ringrpc/client.hpp"
#include "ringrpc/client_stream.hpp"

namespace ringrpc::detail {

struct client_stream_state;

struct client_access {
  /// client::open_stream, with two additions for a channel (channel_streams.cpp): the stream
  /// keeps `hold` until its end (the loop releases it in end_stream, on the runtime's thread;
  /// a stream that never opened lets go of it before this returns), and `refused` says why the
  /// client refused the stream at once (client_busy, client_closed, timeout, intercepted), or
  /// call_error::none when the open was handed to the connection.
  static client_stream open_stream(client& c, std::string_view method, stream_kind kind,
                                   std::span<const std::byte> request, const stream_options& options,
                                   std::shared_ptr<void> hold, call_error& refused);
  /// A handle whose stream ended before it opened, with that end (its code set, as for a
  /// client's own ends).
  static client_stream ended_stream(stream_kind kind, call_error e, status code, std::string_view why);
  /// The state a handle names (null for a default-made one).
  static client_stream_state* state_of(client_stream& s) noexcept { return s._state.get(); }
};

}  // namespace ringrpc::detail

#pragma once
// The server's interceptor chain (ringrpc/interceptor.hpp) around one call's handler. Engaged
// only when server_options::interceptors is non-empty: server_calls.cpp keeps it in a
// std::optional, so a server without interceptors pays two tests per call (and an
// empty optional's destruction) and nothing else.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ringrpc/interceptor.hpp"
#include "ringrpc/metadata.hpp"

namespace ringrpc {
class call_context;
}

namespace ringrpc::detail {

struct call;

/// Key/value notes server interceptors attach to a call for its handler
/// (call_context::annotate / annotation).
struct call_annotations {
  std::vector<metadata_entry> items;
};

/// One call going through the chain: before_call in order on construction, after_call in
/// reverse for those that ran (complete(), or deferred_complete() for a deferred answer).
class intercepted_call {
 public:
  /// Runs the chain's before_call; a refusal or a throw answers the call through `ctx`.
  intercepted_call(const server_interceptors& chain, call_context& ctx, call& c) noexcept;
  intercepted_call(const intercepted_call&) = delete;
  intercepted_call& operator=(const intercepted_call&) = delete;
  /// True when every before_call let the call through: run the handler.
  bool admitted() const noexcept { return _admitted; }
  /// The handler has returned (not deferred) and the answer is encoded: after_call, each.
  void complete(call_context& ctx, call& c) noexcept;

  /// The chain's before_call in order with `notes` as the call's annotations, counting in `ran`
  /// each that ran; the first refusal (a throw is one, `internal`), else proceed. Calls and
  /// stream opens both go through here.
  static call_verdict run_before(const server_interceptors& chain, call_context& ctx, call_annotations& notes,
                                 std::uint32_t& ran) noexcept;

 private:
  const server_interceptors& _chain;
  call_annotations _notes;
  bool _admitted = true;
};

/// A deferred call of an intercepted chain was answered (its reply encoded, not yet sent):
/// after_call for each interceptor whose before_call ran. `c.intercepted_count` says how many.
void deferred_complete(const server_interceptors& chain, call& c) noexcept;

/// A stream's open and end going through the chain (docs/design/streams.md, "Interceptors"):
/// the open gets the before_call a call gets, on the StreamOpen's call, and the stream's end
/// the after_call, once, with its final status. Made by the stream's lane only when the server
/// has interceptors; only the lane touches it.
class intercepted_stream {
 public:
  /// before_call in order on `open` (its context `ctx`); the refusal, if one refused (or threw).
  /// `metadata` is the open's, kept for the end's summary (the open call goes before the end).
  call_verdict open(const server_interceptors& chain, call_context& ctx, call& open,
                    std::span<const metadata_entry> metadata) noexcept;
  /// after_call, in reverse, for each interceptor whose before_call ran. The end has gone to
  /// the client already: a throw is dropped.
  void end(const server_interceptors& chain, std::string_view method, std::uint64_t id, status final_status,
           const peer_identity* peer) noexcept;
  /// The annotations the open's interceptors attached, taken for the stream's handles
  /// (server_stream::annotation).
  std::vector<metadata_entry> take_notes() noexcept { return std::move(_notes.items); }

 private:
  std::uint32_t _ran = 0;
  std::int64_t _received_ns = 0;
  std::int64_t _start_ns = 0;  // 0: no interceptor wants timing
  // The open's metadata as a small encoded frame, for the end's metadata_view (which reads a
  // wire vector); empty when the open had none or memory ran out (the end then shows none).
  std::vector<std::byte> _metadata_frame;
  call_annotations _notes;
};

}  // namespace ringrpc::detail

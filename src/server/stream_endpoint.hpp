#pragma once
// A stream method as the dispatcher sees it (server::add_stream_method): an endpoint like any
// other, so a StreamOpen meets every check a Request meets on its way there; the shard then
// opens the stream from the kind and factory kept here. A unary Request that reaches it is
// answered BadRequest with the way to open it.

#include <memory>
#include <string>
#include <string_view>

#include "ringrpc/endpoint.hpp"
#include "ringrpc/stream.hpp"

namespace ringrpc::detail {

/// "method 'M' is a bidi stream; open it with StreamOpen stream_kind 3" (docs/design/
/// streams.md, "Kind check").
std::string stream_kind_mismatch(std::string_view method, stream_kind kind);

class stream_endpoint final : public endpoint {
 public:
  stream_endpoint(stream_kind kind, stream_factory factory)
      : _kind(kind), _factory(std::make_shared<const stream_factory>(std::move(factory))) {}

  void receive_and_reply(call_context& call) override;
  /// A one-way message to a stream method: nothing goes back, so nothing runs.
  void receive(call_context& message) override { (void)message; }
  bool hears_connection_events() const override { return false; }

  stream_kind kind() const noexcept { return _kind; }
  /// Shared with each stream: a stream outlives its method's unregistration.
  const std::shared_ptr<const stream_factory>& factory() const noexcept { return _factory; }

 private:
  const stream_kind _kind;
  const std::shared_ptr<const stream_factory> _factory;
};

}  // namespace ringrpc::detail

#pragma once
/// \file The incoming call a client call is made for: its deadline and cancellation pass on.
///
/// A call made by a handler while it runs (on the handler's thread) has that handler's call as
/// its parent without being told; a call made later or elsewhere for the same incoming call
/// (from a deferred reply's worker, a callback) names it:
///
///     ringrpc::call_options o;
///     o.parent = later;  // a deferred_reply (or a call_context, while its handler runs)
///     backend.call_async("Store.get", key, done, std::move(o));
///
/// A call with a parent ends no later than the parent's deadline (the shorter of its own and
/// the parent's), and is cancelled (call_error::cancelled, a Cancel frame to its server) when
/// the parent is: a Cancel frame from the parent's caller, its connection gone, its server
/// stopping past the drain timeout. call_options::detached opts out. docs/execution.md,
/// "Deadlines and cancellation".

#include "ringrpc/cxx20.hpp"

#include <memory>
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

class call_context;
class deferred_reply;

namespace detail {
class cancel_hub;
}  // namespace detail

class call_parent {
 public:
  /// No parent.
  call_parent() noexcept = default;
  /// The call `call`'s handler serves. Only on the handler's thread while it runs (as
  /// call_context itself); from other threads, or later, name the deferred_reply instead.
  call_parent(const call_context& call);  // NOLINT: implicit, `o.parent = ctx`
  /// The call `reply` still owes an answer to; no parent once it is answered (or empty).
  call_parent(const deferred_reply& reply);  // NOLINT: implicit, `o.parent = later`

  /// True when there is a parent call to follow.
  explicit operator bool() const noexcept { return _hub != nullptr; }

 private:
  friend struct call_parent_access;
  std::shared_ptr<detail::cancel_hub> _hub;
};

}  // namespace ringrpc

RINGRPC_API_END

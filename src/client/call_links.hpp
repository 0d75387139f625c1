#pragma once
// What ties a client call to things outside its connection: the parent call it is made for
// (call_options::parent, or the handler's call this thread runs), and the rule for callbacks
// that throw, the same wherever they run.

#include <cstdio>
#include <exception>
#include <memory>
#include <new>

#include "base/cancel_hub.hpp"
#include "client/client_loop.hpp"
#include "ringrpc/call_parent.hpp"
#include "ringrpc/client.hpp"

namespace ringrpc {

/// Reads a call_parent's hub (the class keeps it private to the library).
struct call_parent_access {
  static const std::shared_ptr<detail::cancel_hub>& hub(const call_parent& p) noexcept { return p._hub; }
  static void set(call_parent& p, std::shared_ptr<detail::cancel_hub> h) noexcept { p._hub = std::move(h); }
};

namespace detail {

/// The parent a call follows: none when detached, else the one named, else the call whose
/// handler runs on this thread (if any).
inline std::shared_ptr<cancel_hub> resolve_parent(const call_options& o) {
  if (o.detached) return nullptr;
  if (o.parent) return call_parent_access::hub(o.parent);
  return current_parent_hub();
}

/// Links pending call `p` to `parent`: the parent's cancellation cancels it. Without memory
/// for the link the call simply does not follow the parent.
inline void arm_parent(client_loop& loop, pending* p, std::shared_ptr<cancel_hub> parent) noexcept {
  p->parent = std::move(parent);
  try {
    const auto r = p->parent->listen(cancel_trigger<cancel_reason::parent>{&loop, p}, p->parent_token, true);
    if (r == cancel_hub::listen_result::closed) p->parent.reset();  // answered: nothing to follow
  } catch (const std::bad_alloc&) {
    p->parent.reset();
  }
}

/// One rule for a callback that throws, on the runtime thread or inline on the caller's
/// (client_busy, client_closed, a call refused before it was sent): the exception is caught
/// and reported on stderr, never passed on (client.hpp).
inline void run_callback(const call_callback& done, const call_outcome& o) noexcept {
  if (!done) return;
  try {
    done(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrpc: a call callback threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "ringrpc: a call callback threw\n");
  }
}
inline void run_inline_callback(const call_callback& done, const call_outcome& o) noexcept { run_callback(done, o); }

}  // namespace detail
}  // namespace ringrpc

#pragma once
/// \file Endpoints: named receivers of calls and events (Spark's RpcEndpoint), and how their
/// work is dispatched to threads (Dubbo's dispatch policies).
///
/// A call whose method is "NAME" or "NAME.anything" goes to the endpoint registered as NAME.
/// The table in docs/execution.md says which event runs on which thread under each policy.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ringrpc/authorizer.hpp"
#include "ringrpc/call_context.hpp"
#include "ringrpc/peer_identity.hpp"
#include "ringrpc/thread_pool.hpp"
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

/// The client connection an event is about.
struct peer_info {
  std::uint64_t connection_id = 0;  ///< unique for the server's life
  std::string address;              ///< "127.0.0.1:53412"
  /// What the connection proved (TLS, once its handshake verified the peer) as the event was
  /// delivered; null for plaintext, and for on_connected before a handshake finished. Bearer
  /// tokens are per call: they show in call_context::peer(), not here.
  std::shared_ptr<const peer_identity> identity;
};

/// Override what you need. Handlers run on the thread the endpoint's dispatch policy picks; an
/// exception escaping any of them goes to on_error (and a call gets an `internal` reply).
class endpoint {
 public:
  virtual ~endpoint() = default;

  /// Runs before anything else reaches this endpoint (on the thread that registers it, or in
  /// server::start() for endpoints registered before it). A server::stop() called from here
  /// during server::start() stops the server when start() has finished.
  virtual void on_start() {}
  /// Runs last and alone: after every message already accepted for this endpoint has been
  /// handled, and nothing of this endpoint runs after it. Deferred replies may still be
  /// answered afterwards.
  virtual void on_stop() {}
  /// A call that expects a reply. The default answers unknown_method.
  virtual void receive_and_reply(call_context& call);
  /// A one-way message (from a client, or server::post). Its answer, if any, is discarded.
  virtual void receive(call_context& message) { (void)message; }
  /// Connection events. For each connection they run in order (on_connected first, then
  /// on_network_error if it failed, then on_disconnected, each after the previous returned), on
  /// the thread the policy names, and are never refused: a full pool delays them, it does not
  /// drop them or move them onto the I/O thread (docs/execution.md).
  virtual void on_connected(const peer_info& peer) { (void)peer; }
  virtual void on_disconnected(const peer_info& peer) { (void)peer; }
  /// The connection failed (reset, unreadable frame, failed write) rather than closing cleanly.
  virtual void on_network_error(const peer_info& peer, std::string_view what) {
    (void)peer;
    (void)what;
  }
  /// False: this endpoint never hears on_connected / on_disconnected / on_network_error, and
  /// costs nothing per connection (each connection event is otherwise a task on its policy's
  /// thread). Read once, at registration.
  virtual bool hears_connection_events() const { return true; }
  /// An exception escaped one of this endpoint's handlers; `what` is its what() or a
  /// description. Must not throw (what it throws is dropped).
  virtual void on_error(std::string_view what) { (void)what; }
};

/// Which thread runs which event (Dubbo's dispatchers, mapped onto our pipeline).
enum class dispatch_policy {
  all,         ///< calls, one-way messages and connection events on the endpoint's pool
  direct,      ///< everything on the reader (I/O) thread that received it: no hand-off at all
  message,     ///< calls and one-way messages on the pool; connection events on the I/O thread
  execution,   ///< calls on the pool; one-way messages and connection events on the I/O thread
  connection,  ///< calls and one-way messages on the pool; connection events in order on one
               ///< dedicated thread shared by all endpoints with this policy
};

std::string_view to_string(dispatch_policy p) noexcept;
bool parse_dispatch_policy(std::string_view name, dispatch_policy& out) noexcept;

/// Spark's two kinds of endpoint.
enum class endpoint_concurrency {
  /// Handlers may run on several threads at once. [Spark: RpcEndpoint]
  concurrent,
  /// One message at a time, in arrival order, whatever the policy and pool. [Spark:
  /// ThreadSafeRpcEndpoint]
  serial,
};

struct endpoint_options {
  dispatch_policy policy = dispatch_policy::all;
  endpoint_concurrency concurrency = endpoint_concurrency::concurrent;
  /// Name of a pool registered with server::add_pool; empty = the server's "default" pool.
  std::string pool;
  /// A pool for this endpoint alone (named after it); overrides `pool`.
  std::optional<pool_options> own_pool;
  /// Serial endpoints: messages waiting in the inbox before new ones get SERVER_BUSY.
  unsigned inbox_capacity = 4096;
  /// Admits or refuses each call for this endpoint, after the server's authorizer (see
  /// ringrpc/authorizer.hpp: it runs on the reader thread, so cheap and non-blocking). Null:
  /// none. Kept when a configuration file overrides this endpoint's other options.
  std::shared_ptr<const ringrpc::authorizer> authorizer;
};

}  // namespace ringrpc

RINGRPC_API_END

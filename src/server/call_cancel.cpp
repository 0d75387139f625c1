// A call's cancellation as the code listening to it sees it: the hub made on first use
// (call_context::on_cancel, a client call with this call as its parent), registered with the
// call's shard so that a Cancel frame, a lost connection or a stop past the drain timeout
// fires it, and closed when the call is answered (base/cancel_hub.hpp has the thread rules).

#include "server/server_core.hpp"

namespace ringrpc::detail {

std::shared_ptr<cancel_hub> server_core::hub_of(call& c) {
  if (c.hub) return c.hub;
  auto h = std::make_shared<cancel_hub>(c.deadline_ns);
  if (c.conn != nullptr) c.conn->owner->hubs().add(c.conn, c.id, h);
  c.hub = h;
  // Listed first, then looked at: a cancellation noted before the listing is seen here, one
  // noted after it finds the hub listed (both sides take the registry's lock in between).
  if (c.abandoned.load(std::memory_order_relaxed) || abandoning() ||
      (c.conn != nullptr && c.conn->is_cancelled(c.id))) {
    h->fire();
  }
  return h;
}

void server_core::close_hub(call& c) noexcept {
  if (!c.hub) return;
  if (c.conn != nullptr) c.conn->owner->hubs().remove(c.hub.get());
  c.hub->close();
  c.hub.reset();
}

void server_core::fire_all_hubs() noexcept {
  for (auto& s : _shards) s->hubs().fire(nullptr, 0);
}

void server_core::stand_in_for(call* c, call* s) noexcept {
  s->conn = c->conn;
  s->id = c->id;
  s->method_name = c->method_name;
  s->purpose = c->purpose;
  s->target = c->target;
  s->peer = c->peer;
  s->received_ns = c->received_ns;
  s->request_charged = c->request_charged;
  s->share_counted = c->share_counted;
  s->cost_units = c->cost_units;
  s->over_share = c->over_share;
}

}  // namespace ringrpc::detail

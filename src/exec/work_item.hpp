#pragma once
// What the execution layer schedules: one piece of work for one endpoint. The server's call
// (src/server/call.hpp) is one; exec sees only this part of it and hands the rest back to its
// host (exec_host::run_item), so it knows nothing of connections, budgets or write queues.

#include <cstdint>

#include "base/mpsc_queue.hpp"
#include "exec/worker_pool.hpp"

namespace ringrpc::detail {

class endpoint_slot;

/// What a work item carries to its endpoint. Connection events and local posts travel as work
/// items too, so they share the inbox order and the pools' machinery.
enum class call_purpose : std::uint8_t {
  request,         // a call from a client: exactly one reply or error goes back
  one_way,         // a one-way message from a client: nothing goes back
  local_message,   // server::post(): no connection, nothing goes back
  connected,       // endpoint events about a connection
  disconnected,
  network_error,
};

/// As an mpsc_node it sits in a serial endpoint's inbox or event lane (or, once it belongs to
/// the host again, in the host's own queues); as a pool_task it waits in a thread pool.
struct work_item : mpsc_node, pool_task {
  endpoint_slot* target = nullptr;  // the endpoint it is for
  call_purpose purpose = call_purpose::request;

  static work_item* from_node(mpsc_node* n) noexcept { return static_cast<work_item*>(n); }
  static work_item* from_task(pool_task* t) noexcept { return static_cast<work_item*>(t); }
};

}  // namespace ringrpc::detail

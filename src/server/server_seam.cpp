// The server's side of seam/server_seam.hpp: each function reads or sets one thing of the
// server_core behind a public ringrpc::server. The seam's types are copies, made on the
// caller's (admin) thread, so nothing of the core's own layout leaks to ops.

#include "seam/server_seam.hpp"

#include <stdexcept>

#include "server/registration_attachment.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {

static_assert(status_kinds == status_count, "seam/server_seam.hpp counts statuses as the metrics do");

// Every part added through the seam, as one attachment: the core runs it where the first part
// was attached, and the parts start and stop in the order they were added.
class seam_parts final : public server_attachment {
 public:
  void add(std::unique_ptr<server_part> p) { _parts.push_back(std::move(p)); }
  server_part* at(std::size_t i) const noexcept { return i < _parts.size() ? _parts[i].get() : nullptr; }
  void start() override {
    for (auto& p : _parts) p->start();
  }
  void stop() noexcept override {
    for (auto& p : _parts) p->stop();
  }

 private:
  std::vector<std::unique_ptr<server_part>> _parts;
};

server_phase phase_of(server_state s) noexcept {
  switch (s) {
    case server_state::configured: return server_phase::configured;
    case server_state::running: return server_phase::running;
    case server_state::draining: return server_phase::draining;
    case server_state::stopped: break;
  }
  return server_phase::stopped;
}

// The endpoint a method name reaches in `table`; "" for none (and for the per-thread "(other)").
std::string endpoint_of(const dispatcher::table* table, const std::string& method) {
  if (table == nullptr || method == "(other)") return {};
  const endpoint_slot* slot = table->find(method);
  return slot != nullptr ? std::string(slot->name()) : std::string();
}

}  // namespace

void server_seam::set_endpoint_override(server& s, std::string name, endpoint_options options) {
  s._core->set_endpoint_override(std::move(name), std::move(options));
}

void server_seam::set_event_log(server& s, std::size_t queue_capacity, log_level level,
                                std::chrono::milliseconds warning_interval) {
  s._core->set_event_log(queue_capacity, level, warning_interval);
}

void server_seam::attach(server& s, std::unique_ptr<server_part> part) {
  server_core& core = *s._core;
  if (core.state() != server_state::configured) throw std::logic_error("attach() after start()");
  seam_parts* parts = core.attachment<seam_parts>();
  if (parts == nullptr) {
    auto fresh = std::make_unique<seam_parts>();
    parts = fresh.get();
    core.attach(std::move(fresh));
  }
  parts->add(std::move(part));
}

server_part* server_seam::part_at(const server& s, std::size_t i) noexcept {
  const seam_parts* parts = s._core->attachment<seam_parts>();
  return parts != nullptr ? parts->at(i) : nullptr;
}

server_core& server_seam::core_of(server& s) noexcept { return *s._core; }
const server_core& server_seam::core_of(const server& s) noexcept { return *s._core; }

server_phase server_seam::phase(const server& s) noexcept { return phase_of(s._core->state()); }

std::int64_t server_seam::started_ns(const server& s) noexcept { return s._core->started_ns(); }

call_totals server_seam::call_metrics(const server& s) {
  const server_core& core = *s._core;
  call_totals out;
  if (!core.options().metrics) return out;
  call_metrics_snapshot m = core.metrics().snapshot();
  out.by_status = m.by_status;
  out.queue_time = m.queue_time;
  out.processing_time = m.processing_time;
  const auto table = core.endpoints().current();
  out.methods.reserve(m.methods.size());
  for (auto& meth : m.methods) {
    method_calls c;
    c.endpoint = endpoint_of(table.get(), meth.name);
    c.name = std::move(meth.name);
    c.by_status = meth.by_status;
    c.processing = meth.processing;
    c.stalls = meth.stalls;
    c.stall_ns = meth.stall_ns;
    out.methods.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> server_seam::describe_endpoints(const server& s) {
  return s._core->endpoints().describe_endpoints();
}

std::vector<event_queue_stats> server_seam::event_queues(const server& s) { return s._core->events().stats(); }

std::vector<connection_row> server_seam::connections(const server& s) {
  std::vector<connection_info> all;
  s._core->snapshot_connections(all);
  std::vector<connection_row> out;
  out.reserve(all.size());
  for (auto& c : all) {
    out.push_back({c.id, std::move(c.peer), c.accepted_ns, c.calls_in_flight, c.queued_reply_bytes, c.paused,
                   c.reader});
  }
  return out;
}

std::string server_seam::registration_metrics_text(const server& s) {
  const auto* reg = s._core->attachment<registration_attachment>();
  return reg != nullptr ? reg->hook().metrics_text() : std::string();
}

}  // namespace ringrpc::detail

#include "closed_loop.hpp"

#include <atomic>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "ringrpc/client.hpp"

namespace ringrpc::tools {

namespace {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Everything one runtime thread touches; only that thread writes it while the load runs.
struct worker {
  detail::latency_histogram latency_ns{1, 60'000'000'000ull, 3};
  std::uint64_t calls_ok = 0;
  std::map<std::string, std::uint64_t> errors;
  std::atomic<std::uint64_t> in_flight{0};
};

// One in-flight slot (a connection x depth position). The completion callback captures only a
// pointer to it, which fits std::function's inline storage: no allocation per call.
struct slot {
  worker* w = nullptr;
  client* conn = nullptr;
  std::int64_t sent_ns = 0;
};

struct shared_state {
  const closed_loop_config* config = nullptr;
  std::vector<std::byte> payload;
  std::atomic<std::int64_t> measure_from{0};
  std::atomic<std::int64_t> measure_until{0};
  std::atomic<bool> stopping{false};
};

void issue(shared_state& s, slot* sl);

void on_done(shared_state& s, slot* sl, const call_outcome& o) {
  const std::int64_t now = now_ns();
  worker& w = *sl->w;
  const bool measured = now >= s.measure_from.load(std::memory_order_relaxed) &&
                        now <= s.measure_until.load(std::memory_order_relaxed);
  if (measured) {
    if (o.ok()) {
      ++w.calls_ok;
      w.latency_ns.record(static_cast<std::uint64_t>(now - sl->sent_ns));
    } else {
      const std::string kind = o.error == call_error::server_status
                                   ? std::string(to_string(o.code))
                                   : std::string(to_string(o.error));
      ++w.errors[kind];
    }
  }
  if (s.stopping.load(std::memory_order_relaxed) || o.error == call_error::connection_closed ||
      o.error == call_error::client_closed || o.error == call_error::protocol_error) {
    w.in_flight.fetch_sub(1, std::memory_order_release);
    return;
  }
  issue(s, sl);
}

void issue(shared_state& s, slot* sl) {
  sl->sent_ns = now_ns();
  call_options opts;
  opts.timeout = s.config->call_timeout;
  sl->conn->call_async(
      s.config->method, s.payload, [&s, sl](const call_outcome& o) { on_done(s, sl, o); }, opts);
}

}  // namespace

closed_loop_report run_closed_loop(const closed_loop_config& config) {
  shared_state s;
  s.config = &config;
  s.payload.assign(config.payload_bytes, std::byte{'x'});
  const unsigned threads = config.threads == 0 ? 1 : config.threads;

  std::vector<std::shared_ptr<client_runtime>> runtimes;
  std::vector<std::unique_ptr<worker>> workers;
  for (unsigned i = 0; i < threads; ++i) {
    runtimes.push_back(client_runtime::create());
    workers.push_back(std::make_unique<worker>());
  }
  std::vector<std::unique_ptr<client>> clients;
  for (unsigned i = 0; i < config.connections; ++i) {
    client_options co;
    clients.push_back(std::make_unique<client>(
        client::connect(config.host, config.port, co, runtimes[i % threads])));
  }
  std::vector<slot> slots(static_cast<std::size_t>(config.connections) * config.depth);

  const std::int64_t start = now_ns();
  const std::int64_t warm = std::chrono::nanoseconds(config.warmup).count();
  const std::int64_t run = std::chrono::nanoseconds(config.duration).count();
  s.measure_from.store(start + warm);
  s.measure_until.store(start + warm + run);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const unsigned c = static_cast<unsigned>(i / config.depth);
    slots[i].w = workers[c % threads].get();
    slots[i].conn = clients[c].get();
    slots[i].w->in_flight.fetch_add(1);
    issue(s, &slots[i]);
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(warm + run));
  s.stopping.store(true);
  // Let the calls in flight finish (bounded), so the workers are quiet before we read them.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& w : workers) {
    while (w->in_flight.load(std::memory_order_acquire) != 0 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& c : clients) c->close();  // fails what is left, joins nothing else
  clients.clear();

  closed_loop_report r;
  r.seconds = static_cast<double>(run) / 1e9;
  for (auto& w : workers) {
    r.calls_ok += w->calls_ok;
    r.latency_ns.merge(w->latency_ns);
    for (const auto& [k, v] : w->errors) r.errors[k] += v;
  }
  return r;
}

}  // namespace ringrpc::tools

// The server's parts wired together: construction, what a configuration adds, start-up and the
// derived limits, local posts and the stats. Stopping is in server_stop.cpp, running calls in
// server_calls.cpp.

#include "server/server_core.hpp"

#include "ringrpc/record_layer.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/cpu_affinity.hpp"
#include "log/event_log.hpp"
#include "log/log.hpp"
#include "server/user_code.hpp"

namespace ringrpc::detail {

namespace {

// RINGRPC_INLINE_REPLIES=0 turns handlers' own reply writes off (server_core::inline_replies).
bool inline_replies_wanted() noexcept {
  const char* v = std::getenv("RINGRPC_INLINE_REPLIES");
  return v == nullptr || std::string_view(v) != "0";
}

std::unique_ptr<event_bus> make_bus(std::chrono::milliseconds warning_interval) {
  event_bus_options o;
  o.logger = log::event_bus_logger();
  o.warning_interval = warning_interval;
  return std::make_unique<event_bus>(std::move(o));
}

}  // namespace

server_core::server_core(server_options options)
    : _options(std::move(options)),
      _bus(make_bus(std::chrono::minutes(1))),
      _slow_call_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(_options.slow_call_threshold).count()),
      _inline_replies(inline_replies_wanted()) {}

server_core::~server_core() {
  stop();
  join_async_stop();
}

void server_core::set_endpoint_override(std::string name, endpoint_options options) {
  if (state() != server_state::configured) throw std::logic_error("set_endpoint_override() after start()");
  _endpoint_overrides[std::move(name)] = std::move(options);
}

void server_core::set_event_log(std::size_t queue_capacity, log_level level,
                                std::chrono::milliseconds warning_interval) {
  if (state() != server_state::configured) throw std::logic_error("set_event_log() after start()");
  _log_queue_capacity = queue_capacity;
  _log_level = level;
  // Nobody can have used the bus yet (this runs right after construction): rebuild it with the
  // configured warning interval.
  _bus = make_bus(warning_interval);
}

void server_core::attach(std::unique_ptr<server_attachment> part) {
  if (state() != server_state::configured) throw std::logic_error("attach() after start()");
  _attachments.push_back(std::move(part));
}

void server_core::snapshot_connections(std::vector<connection_info>& out) const {
  for (const auto& r : _shards) r->snapshot_connections(out);
}

const endpoint_options* server_core::endpoint_override(std::string_view name) const noexcept {
  auto it = _endpoint_overrides.find(name);
  return it == _endpoint_overrides.end() ? nullptr : &it->second;
}

std::unique_ptr<thread_pool> server_core::make_pool(const std::string& name,
                                                    const pool_options& options, bool quiet) {
  pool_report_sink sink;
  if (!quiet) {
    sink = [this, name](std::string_view report) {
      log::warn("pool_exhausted", {{"pool", name}, {"msg", report}});
      post_event(event_kind::pool_exhausted, [&] {
        event e;
        e.name = name;
        e.detail = std::string(report);
        return e;
      });
    };
  }
  return std::make_unique<thread_pool>(
      name, options,
      [] {
        time_next_call();
        flush_reply_wakeups();
      },
      std::move(sink));
}

std::string server_core::pool_state(const thread_pool& p) const {
  const auto s = p.stats();
  std::string out = std::to_string(s.active) + "/" + std::to_string(s.max_threads) +
                    " threads busy, " + std::to_string(s.queued) + " queued";
  if (s.queue_capacity > 0) out += " of " + std::to_string(s.queue_capacity);
  return out;
}

void server_core::start() {
  if (_state.load() != server_state::configured) {
    throw std::logic_error("ringrpc::server::start: the server was already started");
  }
  if (_options.max_frame_bytes < 16) throw std::invalid_argument("max_frame_bytes must be >= 16");
  if (_options.handler_queue_size == 0) throw std::invalid_argument("handler_queue_size must be >= 1");
  if (_options.max_queued_reply_bytes == 0) throw std::invalid_argument("max_queued_reply_bytes must be >= 1");
  if (_options.max_streams == 0) throw std::invalid_argument("max_streams must be >= 1");
  if (_options.max_inflight_bytes_per_connection == 0) {
    throw std::invalid_argument("max_inflight_bytes_per_connection must be >= 1");
  }
  _features = probe_io_uring();
  // The structured log hears the server's events through its own queue: posting threads
  // (readers among them) never write a log line themselves.
  _bus->add_queue("log", _log_queue_capacity);
  _bus->subscribe("log", log::make_event_log_listener(), log::logged_event_kinds(_log_level));

  const unsigned cpus = usable_cpus();
  const unsigned readers = _options.readers != 0 ? _options.readers : cpus;
  const unsigned handlers = _options.handlers != 0 ? _options.handlers : cpus;
  const std::size_t queue = static_cast<std::size_t>(handlers) * _options.handler_queue_size;
  resolve_limits(queue);
  _budget = std::make_unique<memory_budget>(_options.max_buffered_bytes);
  _peers = std::make_unique<peer_limits>(_options.max_connections_per_address,
                                         _options.accept_rate_per_address,
                                         _options.accept_rate_per_address,
                                         _options.tls ? _options.max_tls_handshakes_per_address : 0);
  _pool = std::make_unique<call_pool>(queue + 4096);

  try {
    // Pools and endpoints (on_start) before the readers: a call can only reach a started one.
    // on_start() runs under the dispatcher's mutex, which stop() takes after its own: a stop()
    // from there is kept for the end of start() (see server_core::stop()).
    {
      starting_server = this;
      struct clear_starting {
        ~clear_starting() { starting_server = nullptr; }
      } clear;
      _dispatcher.start();
    }
    for (unsigned i = 0; i < readers; ++i) {
      _shards.push_back(std::make_unique<shard>(*this, i));
      _shards.back()->start(_features);
    }
    _acceptor = std::make_unique<acceptor>(*this);
    _state.store(server_state::running, std::memory_order_release);
    _acceptor->start(_features);
    _started_at = std::chrono::system_clock::now();
    _started_ns = now_ns();
    for (auto& part : _attachments) part->start();
    _bus->start();
    post_event(event_kind::server_started, [&] {
      event e;
      const bool v6 = _options.host.find(':') != std::string::npos;
      e.detail = (v6 ? "[" + _options.host + "]" : _options.host) + ":" + std::to_string(port());
      if (_options.tls) {
        e.detail.append(", TLS on port ").append(std::to_string(tls_port())).append(" (record layer: ")
            .append(_options.tls->name()).append(")");
      }
      return e;
    });
  } catch (...) {
    _state.store(server_state::running, std::memory_order_release);
    stop();
    throw;
  }
  if (_stop_after_start) stop();
}

void server_core::resolve_limits(std::size_t default_queue) {
  // Derived defaults (0 in the options), each explained in docs/operations.md.
  if (_options.max_buffered_bytes == 0) _options.max_buffered_bytes = default_memory_budget();
  if (_options.max_inflight_per_connection == 0) {
    _options.max_inflight_per_connection =
        static_cast<unsigned>(std::clamp<std::size_t>(default_queue, 1, 256));
  }
  if (_options.max_connections == 0) {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
      // Keep some fds for the rings, eventfds, the listener, the admin server and log files.
      constexpr rlim_t reserve = 64;
      _options.max_connections =
          static_cast<unsigned>(std::clamp<rlim_t>(files.rlim_cur > reserve * 2 ? files.rlim_cur - reserve
                                                                                 : files.rlim_cur / 2,
                                                   1, 16'777'216));
    }
  }
  if (_options.max_tls_handshakes == 0) _options.max_tls_handshakes = 1024;
  if (_options.max_tls_handshakes_per_address == 0) {
    _options.max_tls_handshakes_per_address = std::max(1u, _options.max_tls_handshakes / 2);
  }
  if (_options.max_connections_per_address == 0 && _options.max_connections != 0) {
    _options.max_connections_per_address =
        std::max(1u, _options.max_connections - _options.max_connections / 10);
  }
  if (_options.max_streams_per_address == 0) {
    _options.max_streams_per_address = std::max(1u, _options.max_streams - _options.max_streams / 10);
  }
}

namespace {

bool post_to(call_pool& pool, endpoint_slot* slot,
             std::span<const std::byte> payload) {
  call* c = pool.get();
  c->conn = nullptr;
  c->purpose = call_purpose::local_message;
  c->target = slot;
  c->id = 0;
  c->deadline_ns = 0;
  c->received_ns = now_ns();
  c->method_name = slot->name();
  c->reply.clear();
  c->request.assign(payload.begin(), payload.end());
  c->payload = c->request;
  switch (slot->admit(c)) {
    case endpoint_slot::admit_result::submitted: slot->pool()->wake(1); return true;
    case endpoint_slot::admit_result::ran:
    case endpoint_slot::admit_result::taken: return true;
    case endpoint_slot::admit_result::answered: return false;
    case endpoint_slot::admit_result::busy:
    case endpoint_slot::admit_result::stopped: break;
  }
  pool.put(c);
  return false;
}

}  // namespace

bool server_core::post_local(std::string_view endpoint_name, std::span<const std::byte> payload) {
  if (state() != server_state::running) return false;
  auto table = _dispatcher.current();
  auto it = table->by_name.find(endpoint_name);
  if (it == table->by_name.end()) return false;
  return post_to(*_pool, it->second, payload);
}

std::size_t server_core::post_local_to_all(std::span<const std::byte> payload) {
  if (state() != server_state::running) return 0;
  auto table = _dispatcher.current();
  std::size_t n = 0;
  for (endpoint_slot* slot : table->all) n += post_to(*_pool, slot, payload) ? 1 : 0;
  return n;
}

std::uint64_t server_core::calls_created() const noexcept {
  std::uint64_t n = 0;
  for (const auto& r : _shards) n += r->calls_created();
  return n;
}

std::uint64_t server_core::calls_enqueued() const noexcept {
  std::uint64_t n = 0;
  for (const auto& r : _shards) n += r->calls_enqueued();
  return n;
}

server_stats server_core::stats() const {
  // The table's shard-owned counters are one loop; the few kept elsewhere (the core, the
  // responders, the memory budget, the call guard) are set by name after it.
  using sc = server_counter;
  std::vector<std::uint64_t> v(server_counter_count, 0);
  auto at = [&v](sc c) -> std::uint64_t& { return v[static_cast<std::size_t>(c)]; };
  std::uint64_t finished = 0;
  for (const auto& r : _shards) {
    finished += r->finished();  // before accepted: a connection that comes and goes between
    r->counts().add_to(v);      // the two reads must not make connections_open negative
    at(sc::partial_writes) += r->replies().partial_writes();
    at(sc::bytes_out) += r->replies().bytes_out();
  }
  at(sc::connections_open) = at(sc::connections_accepted) - finished;
  at(sc::tls_handshakes_in_progress) = _tls_handshakes.load(std::memory_order_relaxed);
  at(sc::calls_rejected_busy) += _refused_busy.get();
  at(sc::out_of_memory) = _out_of_memory.get();
  at(sc::streams_open) = open_streams();
  at(sc::stream_writes_blocked_credit) = _stream_blocked_credit.get();
  at(sc::stream_writes_blocked_buffer) = _stream_blocked_buffer.get();
  at(sc::calls_bad_metadata) = _guard.bad_metadata();
  at(sc::calls_unauthenticated) = _guard.unauthenticated();
  at(sc::calls_permission_denied) = _guard.permission_denied();
  at(sc::calls_auth_limited) = _guard.auth_limited();
  at(sc::connections_auth_closed) = _guard.auth_closed();
  if (_budget) {
    at(sc::buffered_bytes) = static_cast<std::uint64_t>(std::max<std::int64_t>(_budget->used(), 0));
    at(sc::buffered_bytes_peak) = static_cast<std::uint64_t>(std::max<std::int64_t>(_budget->peak(), 0));
    at(sc::buffered_bytes_limit) = _budget->limit();
  }
  at(sc::calls_completed) = calls_released();
  return server_stats(std::move(v));
}

std::uint64_t server_core::calls_released() const noexcept {
  std::uint64_t n = 0;
  for (const auto& r : _shards) n += r->replies().released();
  return n;
}

}  // namespace ringrpc::detail

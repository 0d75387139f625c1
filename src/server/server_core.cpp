#include "server/server_core.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "base/cpu_affinity.hpp"
#include "base/thread_name.hpp"
#include "log/log.hpp"
#include "log/event_log.hpp"

namespace ringrpc::detail {

namespace {

bool from_client(const call* c) noexcept {
  return c->purpose == call_purpose::request || c->purpose == call_purpose::one_way;
}

}  // namespace

namespace {

std::unique_ptr<event_bus> make_bus(std::chrono::milliseconds warning_interval) {
  event_bus_options o;
  o.logger = log::event_bus_logger();
  o.warning_interval = warning_interval;
  return std::make_unique<event_bus>(std::move(o));
}

// The clock is the largest cost of per-call metrics (a steady_clock read is ~27 ns here, and
// timing every call cost ~11% of echo throughput on one core). So counts are exact, but only
// one call in `timing_sample` per thread is timed precisely for the histograms; slow calls are
// caught with one read of the coarse clock (a few ns, a few ms resolution), which suits
// thresholds that are milliseconds anyway. The first call after a thread was idle is always
// timed, so a lightly loaded server has every call timed.
constexpr unsigned timing_sample = 8;  // a power of two
thread_local unsigned timing_tick = 0;
}  // namespace

void time_next_call() noexcept { timing_tick = timing_sample - 1; }

namespace {
// The server whose user code (a handler, an event) this thread is running, if any: stop()
// called from there cannot wait for that very code to finish.
thread_local const server_core* running_user_code_of = nullptr;
// The server this thread is stopping: stop() from on_stop or a listener during it returns.
thread_local const server_core* stopping = nullptr;

struct user_code_scope {
  const server_core* previous;
  explicit user_code_scope(const server_core* s) noexcept : previous(running_user_code_of) {
    running_user_code_of = s;
  }
  ~user_code_scope() { running_user_code_of = previous; }
};
}  // namespace

std::size_t sharded_counter::slot_of_this_thread() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine % 16;
}

server_core::server_core(server_options options)
    : _options(std::move(options)),
      _bus(make_bus(std::chrono::minutes(1))),
      _slow_call_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(_options.slow_call_threshold).count()) {}

server_core::~server_core() {
  stop();
  join_async_stop();
}

void server_core::join_async_stop() noexcept {
  std::thread t;
  {
    std::lock_guard lock(_async_stop_mu);
    if (!_async_stop.joinable() || _async_stop.get_id() == std::this_thread::get_id()) return;
    t = std::move(_async_stop);
  }
  t.join();
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
  for (const auto& r : _readers) r->snapshot_connections(out);
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
      [this] {
        time_next_call();
        if (_responder) _responder->notify();
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
                                         _options.accept_rate_per_address);
  _pool = std::make_unique<call_pool>(queue + 4096);

  try {
    _responder = std::make_unique<responder>(*this);
    _responder->start(_features);
    // Pools and endpoints (on_start) before the readers: a call can only reach a started one.
    _dispatcher.start();
    for (unsigned i = 0; i < readers; ++i) {
      _readers.push_back(std::make_unique<reader>(*this, i));
      _readers.back()->start(_features);
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
      return e;
    });
  } catch (...) {
    _state.store(server_state::running, std::memory_order_release);
    stop();
    throw;
  }
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
  if (_options.max_connections_per_address == 0 && _options.max_connections != 0) {
    _options.max_connections_per_address =
        std::max(1u, _options.max_connections - _options.max_connections / 10);
  }
}

template <class Pred>
bool server_core::wait_until(Pred pred, std::chrono::steady_clock::time_point deadline) {
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void server_core::stop() {
  if (stopping == this) return;  // from on_stop() or a listener while this thread stops us
  if (running_user_code_of == this) {
    // A handler cannot wait for itself: stop on a thread of its own, which drains as usual
    // (this handler's call included) while the handler returns. ~server joins it.
    std::lock_guard lock(_async_stop_mu);
    if (!_async_stop.joinable() && state() == server_state::running) {
      try {
        _async_stop = std::thread([this] {
          name_this_thread("rr-stop");
          stop_blocking();
        });
      } catch (const std::system_error& e) {
        log::warn("stop_failed", {{"msg", std::string("cannot start the stopping thread: ") + e.what()}});
      }
    }
    return;
  }
  stop_blocking();
  join_async_stop();  // a stop a handler asked for has finished too when this returns
}

void server_core::stop_blocking() {
  // Several threads may call stop(): one stops, the others wait until it has finished.
  std::lock_guard serial(_stop_mu);
  stopping = this;
  struct clear_stopping {
    ~clear_stopping() { stopping = nullptr; }
  } clear;
  auto expected = server_state::running;
  if (!_state.compare_exchange_strong(expected, server_state::draining)) return;
  const auto deadline = std::chrono::steady_clock::now() + _options.drain_timeout;
  post_event(event_kind::server_stopping, [] { return event{}; });

  // 1. No new connections.
  if (_acceptor) _acceptor->stop_and_join();
  // 2. New frames are answered SHUTTING_DOWN by the readers from now on (state is draining);
  //    calls already admitted run to completion.
  bool drained = wait_until([&] { return _settled.get() == calls_enqueued(); }, deadline);
  // 3. Stop reading, then wait until every call ever created has been answered and written
  //    (deferred replies included).
  for (auto& r : _readers) r->quiesce();
  wait_until(
      [&] {
        for (auto& r : _readers) {
          if (!r->quiesced()) return false;
        }
        return true;
      },
      deadline);
  drained = drained && wait_until(
                           [&] {
                             // Released first: if it equals created read afterwards, nothing
                             // was outstanding at the moment released was read.
                             const auto released = _responder ? _responder->released() : 0;
                             return released == calls_created();
                           },
                           deadline);
  if (!drained) {
    log::warn("drain_timeout", {{"drain_timeout_ms", static_cast<std::int64_t>(_options.drain_timeout.count())},
                                {"msg", "cancelling what is left"}});
    // Calls still queued run as SHUTTING_DOWN answers (execute checks the flag); running ones
    // see cancelled(); unanswered deferred replies are answered here.
    _abandon.store(true, std::memory_order_release);
    abandon_deferred();
    // Calls queued behind handlers that do not finish are answered from here, unrun.
    _dispatcher.run_queued_here();
    if (_responder) _responder->notify();
    // Everything but the calls whose handlers are still running gets its answer written; those
    // cannot be abandoned safely (their user code still holds them), so they are waited for
    // below, with a line per second saying which.
    wait_until(
        [&] {
          std::uint64_t running = 0;
          for (const auto& p : _dispatcher.stats()) running += p.active;
          return _responder->released() + running >= calls_created();
        },
        std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  // 4. Close every connection (endpoints hear on_disconnected); readers exit once every
  //    connection is gone, which needs the pools still running.
  for (auto& r : _readers) r->close_all();
  if (_responder) _responder->shut_down_writers();
  const auto waiting_since = std::chrono::steady_clock::now();
  for (;;) {
    const bool all_exited = wait_until(
        [&] {
          for (auto& r : _readers) {
            if (!r->exited()) return false;
          }
          return true;
        },
        std::chrono::steady_clock::now() + std::chrono::seconds(1));
    if (all_exited) break;
    // Only user code that ignores cancelled() keeps a connection alive now.
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - waiting_since);
    for (const std::string& busy : _dispatcher.busy_pools()) {
      log::warn("stop_waiting_for_handler", {{"waited_ms", static_cast<std::int64_t>(waited.count())},
                                             {"pool", busy},
                                             {"msg", "a handler ignores cancelled(); stop waits for it"}});
    }
  }
  for (auto& r : _readers) r->join();
  // 5. on_stop for each endpoint, once it is idle; then the pools' threads are joined.
  if (!_dispatcher.stop_endpoints(std::max(deadline, std::chrono::steady_clock::now() +
                                                         std::chrono::seconds(1)))) {
    log::warn("endpoint_stop_timeout", {{"msg", "an endpoint is still busy; stopping its pool regardless"}});
  }
  _dispatcher.shut_down_pools();
  if (_responder) _responder->stop_and_join();
  _state.store(server_state::stopped, std::memory_order_release);
  post_event(event_kind::server_stopped, [] { return event{}; });
  _bus->stop();  // delivers what is queued, then joins its threads
  // Last: the admin server's readiness page said "draining" until the end.
  for (auto& part : _attachments) part->stop();
}

void server_core::run_call(endpoint_slot& slot, call* c) noexcept {
  const user_code_scope scope(this);
  switch (c->purpose) {
    case call_purpose::request:
    case call_purpose::one_way:
    case call_purpose::local_message: execute(slot, c); return;
    case call_purpose::connected:
    case call_purpose::disconnected:
    case call_purpose::network_error: {
      const peer_info peer{c->conn->id, c->conn->peer};
      endpoint& ep = slot.target();
      switch (c->purpose) {
        case call_purpose::connected:
          guarded(slot, "on_connected", [&] { ep.on_connected(peer); });
          break;
        case call_purpose::disconnected:
          guarded(slot, "on_disconnected", [&] { ep.on_disconnected(peer); });
          break;
        default:
          guarded(slot, "on_network_error", [&] { ep.on_network_error(peer, c->event_text); });
          break;
      }
      connection* conn = c->conn;
      _pool->put(c);
      release(conn);
      return;
    }
  }
}

void server_core::execute(endpoint_slot& slot, call* c) noexcept {
  // Once the handler has deferred, the call may be answered and recycled by another thread
  // before the handler even returns: read what is needed afterwards now.
  const bool client = from_client(c);
  const bool request = c->purpose == call_purpose::request;
  const std::string_view method = c->method_name;
  const std::int64_t received = c->received_ns;
  bool precise = _options.metrics && (++timing_tick & (timing_sample - 1)) == 0;
  bool sample_event = false;
  if (const unsigned every = _options.sample_completions_every; every != 0 && client) {
    thread_local unsigned seen = 0;
    if (++seen >= every) {
      seen = 0;
      sample_event = precise = true;
    }
  }
  const std::int64_t start = precise ? now_ns() : 0;
  call_context ctx(*c, this);
  if (abandoning()) {
    ctx.fail(status::shutting_down, "server stopped before the call could run");
  } else if (const std::int64_t now = c->deadline_ns == 0 ? 0 : precise ? start : now_ns();
             c->deadline_ns != 0 && now > c->deadline_ns) {
    ctx.fail(status::deadline_exceeded,
             "deadline passed after " + std::to_string((now - received) / 1000) +
                 " us in the server's queue; not run");
  } else if (c->conn != nullptr && c->conn->is_cancelled(c->id)) {
    ctx.fail(status::cancelled, "cancelled by the caller before it ran");
  } else {
    endpoint& ep = slot.target();
    try {
      if (c->purpose == call_purpose::request) {
        ep.receive_and_reply(ctx);
      } else {
        ep.receive(ctx);
      }
    } catch (const std::exception& e) {
      report_error(slot, "handler", e.what());
      if (!ctx._deferred) ctx.fail(status::internal, e.what());
    } catch (...) {
      report_error(slot, "handler", "a non-standard exception");
      if (!ctx._deferred) ctx.fail(status::internal, "handler threw a non-standard exception");
    }
  }
  const std::int64_t end = precise ? now_ns() : 0;
  if (client) _settled.add();
  if (ctx._deferred) return;  // the deferred_reply owns the call now
  if (!ctx._answered && request) ctx.reply(std::span<const std::byte>{});
  if (_options.metrics && client) {
    thread_metrics& m = _metrics.local();
    m.completed(method, c->answer_status);
    if (precise) m.timed(method, start - received, end - start);
  }
  if (_slow_call_ns > 0 && client) {
    // Time in the server, queue included, against one coarse read: the coarse clock lags the
    // precise one by at most its resolution, so a reported call was slow for sure.
    if (const std::int64_t in_server = (precise ? end : coarse_now_ns()) - received;
        in_server > _slow_call_ns) {
      note_slow_call(c, in_server);
    }
  }
  if (sample_event) {
    post_event(event_kind::call_completed, [&] {
      event e;
      e.peer = c->conn->peer;
      e.name = std::string(method);
      e.duration_ns = static_cast<std::uint64_t>(end - start);
      e.detail = std::string(to_string(c->answer_status));
      e.id = c->id;
      return e;
    });
  }
  finish(c);
}

void server_core::note_slow_call(call* c, std::int64_t processing_ns) noexcept {
  post_event(event_kind::slow_call, [&] {
    event e;
    e.peer = c->conn != nullptr ? c->conn->peer : std::string();
    e.name = std::string(c->method_name);
    e.duration_ns = static_cast<std::uint64_t>(processing_ns);
    e.value = static_cast<std::uint64_t>(_slow_call_ns);
    e.id = c->id;
    return e;
  });
}

void server_core::record_completion(call* c) noexcept {
  if (!_options.metrics || !from_client(c)) return;
  // A deferred reply's time is from receipt to answer: there is no separate queue time.
  thread_metrics& m = _metrics.local();
  m.completed(c->method_name, c->answer_status);
  m.timed(c->method_name, 0, now_ns() - c->received_ns);
}

void server_core::finish(call* c) noexcept {
  if (c->conn == nullptr) {  // a local post: nobody to answer
    _pool->put(c);
    return;
  }
  if (c->purpose != call_purpose::request) c->reply.clear();
  _responder->post(c);
}

void server_core::refuse(call* c, status code, const std::string& message) noexcept {
  if (c->purpose == call_purpose::request) encode_error(*c, code, message);
  if (code == status::server_busy) _refused_busy.add();
  if (from_client(c)) _settled.add();
  finish(c);
  _responder->notify();
}

void server_core::report_error(endpoint_slot& slot, const char* what,
                               std::string_view message) noexcept {
  try {
    slot.target().on_error(message);
  } catch (...) {
    log::error("endpoint_on_error_threw", {{"endpoint", slot.name()}, {"during", what}});
  }
}

void server_core::endpoint_started(endpoint_slot& slot) noexcept {
  post_event(event_kind::endpoint_started, [&] {
    event e;
    e.name = slot.name();
    e.detail = slot.describe();
    return e;
  });
}

void server_core::endpoint_stopped(endpoint_slot& slot) noexcept {
  post_event(event_kind::endpoint_stopped, [&] {
    event e;
    e.name = slot.name();
    return e;
  });
}

std::shared_ptr<deferred_state> server_core::defer(call* c) {
  auto s = std::make_shared<deferred_state>();
  s->c = c;
  s->core = this;
  std::lock_guard lock(_deferred_mu);
  s->listed = true;
  _deferred.insert(s.get());
  return s;
}

void server_core::deferred_answered(deferred_state& s, call* c) noexcept {
  record_completion(c);
  {
    std::lock_guard lock(_deferred_mu);
    if (s.listed) {
      s.listed = false;
      _deferred.erase(&s);
    }
  }
}

void server_core::abandon_deferred() noexcept {
  std::vector<std::shared_ptr<deferred_state>> pending;
  {
    std::lock_guard lock(_deferred_mu);
    // A listed state is alive: its handle unlists it (under this mutex) before letting go.
    for (deferred_state* s : _deferred) {
      s->listed = false;
      pending.push_back(s->shared_from_this());
    }
    _deferred.clear();
  }
  for (auto& s : pending) {
    std::lock_guard lock(s->mu);
    if (s->c == nullptr) continue;
    call* c = std::exchange(s->c, nullptr);
    c->abandoned.store(true, std::memory_order_relaxed);
    if (c->purpose == call_purpose::request) {
      encode_error(*c, status::shutting_down, "server stopped before the deferred reply came");
    }
    finish(c);
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
  for (const auto& r : _readers) n += r->calls_created();
  return n;
}

std::uint64_t server_core::calls_enqueued() const noexcept {
  std::uint64_t n = 0;
  for (const auto& r : _readers) n += r->calls_enqueued();
  return n;
}

server_stats server_core::stats() const {
  server_stats s;
  for (const auto& r : _readers) {
    s.connections_accepted += r->accepted();
    s.connections_refused += r->refused();
    s.connections_refused_per_address += r->refused_per_address();
    s.connections_idle_closed += r->idle_closed();
    s.connections_dead_closed += r->dead_closed();
    s.event_loop_stalls += r->stalls();
    s.connections_open += r->accepted() - r->finished();
    s.calls_received += r->calls_received();
    s.calls_rejected_busy += r->rejected_busy();
    s.calls_rejected_stopping += r->rejected_stopping();
    s.calls_unknown += r->unknown();
    s.cancel_requests += r->cancels();
    s.bad_frames += r->bad_frames();
    s.reads_paused += r->pauses();
    s.bytes_in += r->bytes_in();
    s.budget_pauses += r->budget_pauses();
    s.calls_rejected_memory += r->rejected_memory();
    s.connections_write_stalled += r->write_stalled();
    s.connections_frame_stalled += r->frame_stalled();
  }
  s.calls_rejected_busy += _refused_busy.get();
  s.out_of_memory = _out_of_memory.get();
  if (_budget) {
    s.buffered_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(_budget->used(), 0));
    s.buffered_bytes_peak = static_cast<std::uint64_t>(std::max<std::int64_t>(_budget->peak(), 0));
    s.buffered_bytes_limit = _budget->limit();
  }
  if (_responder) {
    s.calls_completed = _responder->released();
    s.partial_writes = _responder->partial_writes();
    s.bytes_out = _responder->bytes_out();
  }
  return s;
}

}  // namespace ringrpc::detail

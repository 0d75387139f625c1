#include "server_core.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "cpu_affinity.hpp"

namespace ringrpc::detail {

server_core::server_core(server_options options) : _options(std::move(options)) {}

server_core::~server_core() { stop(); }

void server_core::start() {
  if (_state.load() != server_state::configured) {
    throw std::logic_error("ringrpc::server::start: the server was already started");
  }
  if (_options.max_frame_bytes < 16) throw std::invalid_argument("max_frame_bytes must be >= 16");
  if (_options.handler_queue_size == 0) throw std::invalid_argument("handler_queue_size must be >= 1");
  if (_options.max_inflight_per_connection == 0) {
    throw std::invalid_argument("max_inflight_per_connection must be >= 1");
  }
  if (_options.max_queued_reply_bytes == 0) throw std::invalid_argument("max_queued_reply_bytes must be >= 1");
  _features = probe_io_uring();

  const unsigned cpus = usable_cpus();
  const unsigned readers = _options.readers != 0 ? _options.readers : cpus;
  const unsigned handlers = _options.handlers != 0 ? _options.handlers : cpus;
  const std::size_t capacity = static_cast<std::size_t>(handlers) * _options.handler_queue_size;
  _call_queue = std::make_unique<mpmc_queue<call*>>(capacity);
  _pool = std::make_unique<call_pool>(capacity + 4096);

  try {
    _responder = std::make_unique<responder>(*this);
    _responder->start(_features);
    for (unsigned i = 0; i < readers; ++i) {
      _readers.push_back(std::make_unique<reader>(*this, i));
      _readers.back()->start(_features);
    }
    // Every counter exists before any handler starts: they read the vector while it runs.
    for (unsigned i = 0; i < handlers; ++i) _executed.push_back(std::make_unique<counter>());
    for (unsigned i = 0; i < handlers; ++i) _handlers.emplace_back([this, i] { handler_loop(i); });
    _acceptor = std::make_unique<acceptor>(*this);
    _state.store(server_state::running, std::memory_order_release);
    _acceptor->start(_features);
  } catch (...) {
    _state.store(server_state::running, std::memory_order_release);
    stop();
    throw;
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
  auto expected = server_state::running;
  if (!_state.compare_exchange_strong(expected, server_state::draining)) return;
  const auto deadline = std::chrono::steady_clock::now() + _options.drain_timeout;

  // 1. No new connections.
  if (_acceptor) _acceptor->stop_and_join();
  // 2. New frames are answered SHUTTING_DOWN by the readers from now on (state is draining);
  //    calls already queued run to completion.
  bool drained = wait_until([&] { return calls_executed() == calls_enqueued(); }, deadline);
  // 3. Stop reading, then wait until every call ever created has been answered and written.
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
    std::fprintf(stderr, "ringrpc: drain timeout (%lld ms) passed; cancelling what is left\n",
                 static_cast<long long>(_options.drain_timeout.count()));
    _abandon.store(true, std::memory_order_release);
    // Calls still queued will not run. Answer them here, so each gets SHUTTING_DOWN before the
    // sockets close; then give the responder a bounded moment to write those answers.
    frame_encoder encoder;
    std::uint64_t answered_here = 0;
    call* c = nullptr;
    while (_call_queue->try_pop(c)) {
      execute(c, encoder);
      ++answered_here;
    }
    _responder->notify();
    wait_until(
        [&] {
          const auto released = _responder->released();
          const auto running = calls_enqueued() - calls_executed() - answered_here;
          return released + running >= calls_created();
        },
        std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  // 4. Close every connection; handlers finish what is queued (answering SHUTTING_DOWN when
  //    abandoning), then every thread is joined.
  for (auto& r : _readers) r->close_all();
  if (_responder) _responder->shut_down_writers();
  _handlers_stop.store(true, std::memory_order_release);
  _parking.wake_all();
  for (auto& t : _handlers) t.join();
  _handlers.clear();
  for (auto& r : _readers) r->join();
  if (_responder) _responder->stop_and_join();
  _state.store(server_state::stopped, std::memory_order_release);
}

void server_core::handler_loop(unsigned index) {
  frame_encoder encoder;
  counter& executed = *_executed[index];
  for (;;) {
    call* c = nullptr;
    unsigned batch = 0;
    while (_call_queue->try_pop(c)) {
      execute(c, encoder);
      executed.add();
      // Wake the responder once per batch, not per reply; a long batch still gets its first
      // replies on the wire early.
      if (++batch == 32) {
        _responder->notify();
        batch = 0;
      }
    }
    if (batch != 0) _responder->notify();
    const auto epoch = _parking.prepare_wait();
    if (!_call_queue->empty_approx()) {
      _parking.cancel_wait();
      continue;
    }
    if (_handlers_stop.load(std::memory_order_acquire)) {
      _parking.cancel_wait();
      return;
    }
    _parking.wait(epoch);
  }
}

void server_core::execute(call* c, frame_encoder& encoder) noexcept {
  const bool one_way = c->kind == wire::Kind::OneWay;
  call_context ctx(*c, encoder);
  if (abandoning()) {
    ctx.fail(status::shutting_down, "server stopped before the call could run");
  } else if (c->deadline_ns != 0 && now_ns() > c->deadline_ns) {
    ctx.fail(status::deadline_exceeded,
             "deadline passed after " + std::to_string((now_ns() - c->received_ns) / 1000) +
                 " us in the server's queue; not run");
  } else {
    try {
      _methods.handler(c->method)(ctx);
      if (!ctx._answered) ctx.reply(std::span<const std::byte>{});
    } catch (const std::exception& e) {
      ctx.fail(status::internal, e.what());
    } catch (...) {
      ctx.fail(status::internal, "handler threw a non-standard exception");
    }
  }
  if (one_way) c->reply.clear();
  _responder->post(c);
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

std::uint64_t server_core::calls_executed() const noexcept {
  std::uint64_t n = 0;
  for (const auto& e : _executed) n += e->get();
  return n;
}

server_stats server_core::stats() const {
  server_stats s;
  for (const auto& r : _readers) {
    s.connections_accepted += r->accepted();
    s.connections_open += r->accepted() - r->finished();
    s.calls_received += r->calls_received();
    s.calls_rejected_busy += r->rejected_busy();
    s.bad_frames += r->bad_frames();
    s.reads_paused += r->pauses();
    s.bytes_in += r->bytes_in();
  }
  if (_responder) {
    s.calls_completed = _responder->released();
    s.partial_writes = _responder->partial_writes();
    s.bytes_out = _responder->bytes_out();
  }
  return s;
}

}  // namespace ringrpc::detail

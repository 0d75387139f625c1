#include "ringrpc/client.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "base/clock.hpp"
#include "client/call_deadline.hpp"
#include "client/call_links.hpp"
#include "client/client_interceptors.hpp"
#include "client/client_loop.hpp"
#include "client/request_encoder.hpp"
#include "client/tcp_connect.hpp"

#include <unistd.h>

namespace ringrpc {

std::string_view to_string(call_error e) noexcept {
  switch (e) {
    case call_error::none: return "none";
    case call_error::server_status: return "server_status";
    case call_error::timeout: return "timeout";
    case call_error::connection_closed: return "connection_closed";
    case call_error::protocol_error: return "protocol_error";
    case call_error::client_closed: return "client_closed";
    case call_error::client_busy: return "client_busy";
    case call_error::cancelled: return "cancelled";
    case call_error::intercepted: return "intercepted";
  }
  return "unknown";
}

call_result call_result::from(const call_outcome& o) {
  call_result r;
  r.error = o.error;
  r.code = o.code;
  r.message.assign(o.message);
  r.payload.assign(o.payload.begin(), o.payload.end());
  r.retry_after_ms = o.retry_after_ms;
  // Response metadata and details: only answers that carry some pay for the copies.
  auto copy = [](metadata_view from, std::vector<metadata_entry>& to) {
    if (from.empty()) return;
    to.reserve(from.size());
    for (const metadata_item item : from) to.push_back({std::string(item.key), std::string(item.value)});
  };
  copy(o.headers, r.headers);
  copy(o.trailers, r.trailers);
  r.details.assign(o.details.begin(), o.details.end());
  return r;
}

namespace {
const std::string* find_entry(const std::vector<metadata_entry>& list, std::string_view key) noexcept {
  for (const metadata_entry& e : list) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}
}  // namespace

const std::string* call_result::find_header(std::string_view key) const noexcept {
  return find_entry(headers, key);
}
const std::string* call_result::find_trailer(std::string_view key) const noexcept {
  return find_entry(trailers, key);
}

// --- client_runtime

client_runtime::client_runtime() : _loop(std::make_unique<detail::client_loop>()) {}
client_runtime::~client_runtime() {
  if (_loop && _loop->in_loop_thread()) {
    // The last handle went away inside a callback: the loop cannot join its own thread, so a
    // helper thread does it once the callback has returned.
    std::thread([loop = std::move(_loop)]() mutable { loop.reset(); }).detach();
  }
}

std::shared_ptr<client_runtime> client_runtime::create() {
  return std::shared_ptr<client_runtime>(new client_runtime());
}

bool client_runtime::in_runtime_thread() const noexcept { return _loop->in_loop_thread(); }

bool detail::on_client_runtime_thread() noexcept { return client_loop::on_any_loop_thread(); }

// --- client

namespace {

int connect_socket(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  const int fd = detail::connect_tcp(host, port, timeout);
  if (fd < 0) {
    throw std::system_error(-fd, std::system_category(),
                            (fd == -EHOSTUNREACH ? "cannot resolve or reach " : "connect ") + host +
                                ":" + std::to_string(port));
  }
  return fd;
}

using detail::encode_request;

std::string busy_message(const detail::client_conn& c) {
  return "client_busy: " + std::to_string(c.max_pending_calls) +
         " calls or " + std::to_string(c.max_pending_bytes) +
         " request bytes already queued or in flight on this connection "
         "(client_options::max_pending_calls / max_pending_bytes)";
}

}  // namespace

client client::connect(const std::string& host, std::uint16_t port, client_options options,
                       std::shared_ptr<client_runtime> runtime) {
  if (detail::client_loop::on_any_loop_thread()) {
    throw std::logic_error("ringrpc::client::connect: called on a client runtime's thread (in a "
                           "callback); connecting blocks and would stall every connection of that "
                           "runtime: connect from another thread");
  }
  if (!runtime) runtime = client_runtime::create();
  auto home = std::make_shared<detail::object_home<client>>();  // before anything needs undoing
  const int fd = connect_socket(host, port, options.connect_timeout);
  auto* conn = new detail::client_conn(fd, options);
  if (options.tls) {
    try {
      detail::attach_tls(*conn, *options.tls, host);  // tls_client_setup.cpp
    } catch (...) {
      ::close(fd);
      delete conn;
      throw;
    }
  }
  detail::client_loop& loop = *runtime->_loop;
  detail::pending* p = loop.get_pending();
  p->kind = detail::pending::what::attach;
  p->conn = conn;
  loop.post(p);
  return client(std::move(runtime), conn, std::move(home));
}

client::client(std::shared_ptr<client_runtime> rt, detail::client_conn* conn,
               std::shared_ptr<detail::object_home<client>> home) noexcept
    : _runtime(std::move(rt)), _conn(conn), _home(std::move(home)) {
  _home->at.store(this, std::memory_order_release);
}

// Typed stubs follow the connection: its home cell moves along and points at the new owner.
client::client(client&& o) noexcept : _runtime(std::move(o._runtime)), _conn(o._conn), _home(std::move(o._home)) {
  o._conn = nullptr;
  if (_home) _home->at.store(this, std::memory_order_release);
}

client& client::operator=(client&& o) noexcept {
  if (this != &o) {
    close();
    if (_home) _home->at.store(nullptr, std::memory_order_release);  // this connection's stubs: closed
    _runtime = std::move(o._runtime);
    _conn = o._conn;
    o._conn = nullptr;
    _home = std::move(o._home);
    if (_home) _home->at.store(this, std::memory_order_release);
  }
  return *this;
}

client::~client() {
  close();
  if (_home) _home->at.store(nullptr, std::memory_order_release);
}

bool client::connected() const noexcept {
  return _conn != nullptr && _conn->open.load(std::memory_order_acquire);
}

void client::call_async(std::string_view method, std::span<const std::byte> payload,
                        call_callback done, call_options options) {
  if (_conn == nullptr) {
    call_outcome o;
    o.error = call_error::client_closed;
    o.message = "client is closed";
    detail::run_inline_callback(done, o);
    return;
  }
  // Deadline and cancellation first: a call that cannot run is refused before anything is
  // encoded (docs/execution.md, "Deadlines and cancellation").
  std::shared_ptr<detail::cancel_hub> parent = detail::resolve_parent(options);
  const detail::call_deadline d = detail::call_deadline::of(options.timeout, _conn->default_timeout, parent.get());
  if (d.expired || (parent && parent->fired()) || options.cancel.stop_requested()) {
    call_outcome o;
    if (d.expired) {
      o.error = call_error::timeout;
      o.code = status::deadline_exceeded;
      o.message = "deadline passed before the call was made; not sent";
    } else {
      o.error = call_error::cancelled;
      o.code = status::cancelled;
      o.message = options.cancel.stop_requested() ? "cancelled by the caller before it was sent"
                                                  : "cancelled: the parent call was cancelled before this call was sent";
    }
    detail::run_inline_callback(done, o);
    return;
  }
  if (_conn->interceptors) [[unlikely]] {  // client_interceptors.cpp; refused: done has run
    const auto t = options.timeout.count() > 0 ? options.timeout : _conn->default_timeout;
    if (!detail::intercept_call(_conn->interceptors, t, method, payload, done, options.metadata)) return;
  }
  detail::client_loop& loop = *_runtime->_loop;
  detail::pending* p = loop.get_pending();
  p->kind = detail::pending::what::call;
  p->conn = _conn;
  p->id = _conn->next_id.fetch_add(1, std::memory_order_relaxed);
  detail::frame_view f;
  f.call_id = p->id;
  f.kind = wire::Kind::Request;
  f.method = method;
  f.timeout_us = d.wire_timeout_us();
  f.payload = payload;
  // Only calls that send metadata pay for it; the others pass a null pointer.
  const detail::metadata_to_send md{_conn->metadata, options.metadata};
  if (!md.defaults.empty() || !md.pairs.empty()) f.metadata_out = &md;
  encode_request(f, p->frame);
  if (!_conn->admit(p->frame.size())) {
    // Refused before the loop ever sees it: the pool takes the pending back from any thread.
    loop.recycle(p);
    const std::string why = busy_message(*_conn);
    call_outcome o;
    o.error = call_error::client_busy;
    o.message = why;
    detail::run_inline_callback(done, o);
    return;
  }
  p->counted = true;
  p->deadline_ns = d.at_ns;
  p->done = std::move(done);
  // Armed before the post: a trigger that runs before the loop took the call sets its flag,
  // which accept_work honours (the call is then never sent).
  if (parent) detail::arm_parent(loop, p, std::move(parent));
  if (options.cancel.stop_possible()) {
    p->stop.emplace(options.cancel, detail::cancel_trigger<detail::cancel_reason::stop_token>{&loop, p});
  }
  loop.post(p);
}

reply_future<call_result> client::call_future(std::string_view method,
                                             std::span<const std::byte> payload,
                                             call_options options) {
  auto promise = std::make_shared<std::promise<call_result>>();
  auto future = promise->get_future();
  call_async(
      method, payload,
      [promise](const call_outcome& o) { promise->set_value(call_result::from(o)); }, options);
  return future;
}

call_result client::call(std::string_view method, std::span<const std::byte> payload,
                         call_options options) {
  if (detail::client_loop::on_any_loop_thread()) {
    throw std::logic_error("ringrpc::client::call: synchronous call from a client runtime's thread "
                           "would wait forever; use call_async");
  }
  if (_conn != nullptr && options.timeout.count() == 0 && _conn->default_timeout.count() == 0) {
    options.timeout = _conn->sync_call_timeout;
  }
  // Shared, not on this stack frame: the callback still touches the flag to wake us after we
  // could already have seen it set and returned.
  struct waiter {
    call_result result;
    std::atomic<bool> done{false};
  };
  auto w = std::make_shared<waiter>();
  call_async(
      method, payload,
      [w](const call_outcome& o) {
        w->result = call_result::from(o);
        w->done.store(true, std::memory_order_release);
        w->done.notify_one();
      },
      options);
  w->done.wait(false, std::memory_order_acquire);
  return std::move(w->result);
}

namespace {

bool post_one_way(detail::client_loop& loop, detail::client_conn* conn, std::string_view method,
                  std::span<const std::byte> payload, std::span<const metadata_entry> pairs, std::uint64_t timeout_us) {
  detail::pending* p = loop.get_pending();
  p->kind = detail::pending::what::one_way;
  p->conn = conn;
  p->id = conn->next_id.fetch_add(1, std::memory_order_relaxed);
  detail::frame_view f;
  f.call_id = p->id;
  f.kind = wire::Kind::OneWay;
  f.method = method;
  f.payload = payload;
  f.timeout_us = timeout_us;
  const detail::metadata_to_send md{conn->metadata, pairs};
  if (!md.defaults.empty() || !md.pairs.empty()) f.metadata_out = &md;
  encode_request(f, p->frame);
  if (!conn->admit(p->frame.size())) {
    loop.recycle(p);
    return false;
  }
  p->counted = true;
  loop.post(p);
  return true;
}

}  // namespace

bool client::send_one_way(std::string_view method, std::span<const std::byte> payload) {
  static const call_options none;
  return send_one_way(method, payload, none);
}

// --- one-way messages with options (metadata, budget)
bool client::send_one_way(std::string_view method, std::span<const std::byte> payload,
                          const call_options& options) {
  if (_conn == nullptr) return false;
  detail::client_loop& loop = *_runtime->_loop;
  const std::uint64_t budget = options.timeout.count() > 0 ? static_cast<std::uint64_t>(options.timeout.count()) : 0;
  if (_conn->interceptors) [[unlikely]] {  // client_interceptors.cpp
    return detail::intercept_one_way(_conn->interceptors, method, payload,
                                     [&](std::span<const metadata_entry> added) {
                                       std::vector<metadata_entry> pairs(options.metadata.begin(), options.metadata.end());
                                       pairs.insert(pairs.end(), added.begin(), added.end());
                                       return post_one_way(loop, _conn, method, payload, pairs, budget);
                                     });
  }
  return post_one_way(loop, _conn, method, payload, options.metadata, budget);
}

void client::close() {
  if (_conn == nullptr) return;
  detail::client_loop& loop = *_runtime->_loop;
  detail::pending* p = loop.get_pending();
  p->kind = detail::pending::what::detach;
  p->conn = _conn;
  _conn = nullptr;
  if (_runtime->in_runtime_thread()) {
    loop.post(p);  // handled at the end of this loop turn
  } else {
    std::promise<void> freed;
    auto f = freed.get_future();
    p->detached = &freed;
    loop.post(p);
    f.wait();
  }
  _runtime.reset();
}

}  // namespace ringrpc

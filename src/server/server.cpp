#include "ringrpc/server.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "ringrpc/call_parent.hpp"
#include "ringrpc/record_layer.hpp"
#include "server/interceptors.hpp"
#include "server/running_calls.hpp"
#include "server/server_core.hpp"
#include "server/stream_endpoint.hpp"

namespace ringrpc {

namespace {

using detail::encode_error;
using detail::encode_reply;

bool call_cancelled(const detail::call& c) noexcept {
  if (c.abandoned.load(std::memory_order_relaxed)) return true;
  return c.conn != nullptr && c.conn->is_cancelled(c.id);
}

std::chrono::nanoseconds call_remaining(const detail::call& c) noexcept {
  if (c.deadline_ns == 0) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(c.deadline_ns - detail::now_ns());
}

}  // namespace

// --- call_context

std::uint64_t call_context::call_id() const noexcept { return _call.id; }
std::string_view call_context::method() const noexcept { return _call.method_name; }
std::span<const std::byte> call_context::payload() const noexcept { return _call.payload; }
const peer_identity* call_context::peer() const noexcept { return _call.peer; }
metadata_view call_context::metadata() const noexcept {
  // Calls from clients keep their whole verified frame in `request`; others have no metadata.
  if (_call.purpose != detail::call_purpose::request && _call.purpose != detail::call_purpose::one_way) return {};
  if (_call.request.size() < detail::frame_prefix_bytes + 8) return {};
  return metadata_view(flatbuffers::GetSizePrefixedRoot<wire::Frame>(_call.request.data())->metadata());
}
std::optional<trace_context> call_context::trace() const noexcept {
  const auto value = metadata().find("traceparent");
  trace_context t;
  if (!value || !parse_traceparent(*value, t)) return std::nullopt;
  return t;
}
bool call_context::has_deadline() const noexcept { return _call.deadline_ns != 0; }
bool call_context::one_way() const noexcept { return _call.purpose != detail::call_purpose::request; }
bool call_context::cancelled() const noexcept {
  return call_cancelled(_call) || (_core != nullptr && _core->abandoning());
}
std::chrono::nanoseconds call_context::remaining() const noexcept { return call_remaining(_call); }

void call_context::reply(std::span<const std::byte> payload) {
  if (_deferred) return;
  encode_reply(_call, payload);
  _answered = true;
}

void call_context::fail(status code, std::string_view message) {
  if (_deferred) return;
  encode_error(_call, code, message);
  _answered = true;
}

std::optional<std::chrono::steady_clock::time_point> call_context::deadline() const noexcept {
  if (_call.deadline_ns == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(_call.deadline_ns));
}

void call_context::on_cancel(std::function<void()> hook) {
  if (_deferred) {
    throw std::logic_error("call_context::on_cancel() after defer(): use the deferred_reply's on_cancel");
  }
  if (_core == nullptr || !hook) return;
  detail::cancel_hub::token t = 0;
  _core->hub_of(_call)->listen(std::move(hook), t);
}

bool call_context::annotate(std::string_view key, std::string_view value) {
  if (_notes == nullptr) return false;
  for (auto& e : _notes->items) {
    if (e.key == key) {
      e.value.assign(value);
      return true;
    }
  }
  _notes->items.push_back({std::string(key), std::string(value)});
  return true;
}

std::optional<std::string_view> call_context::annotation(std::string_view key) const noexcept {
  if (_notes == nullptr) return std::nullopt;
  for (const auto& e : _notes->items) {
    if (e.key == key) return std::string_view(e.value);
  }
  return std::nullopt;
}

deferred_reply call_context::defer() {
  if (_deferred) throw std::logic_error("call_context::defer() called twice");
  if (_core == nullptr) throw std::logic_error("call_context::defer(): not a server call");
  // From now on the call may outlive its handler: a stopping server answers it through its
  // deferred state, not as a running handler's (running_calls.hpp).
  detail::call* running = &_call;
  if (!detail::this_thread_slot().running.compare_exchange_strong(running, nullptr,
                                                                  std::memory_order_acq_rel) &&
      running == detail::claimed_marker()) {
    return deferred_reply();  // the stopping server has answered it; this answer goes nowhere
  }
  _deferred = true;
  _call.reply.clear();
  _deferred_state = _core->defer(&_call);
  return deferred_reply(_deferred_state);
}

namespace {

// The hub of the call a deferred state still owes an answer to; null once it is answered.
std::shared_ptr<detail::cancel_hub> deferred_hub(const std::shared_ptr<detail::deferred_state>& s) {
  if (!s) return nullptr;
  std::lock_guard lock(s->mu);
  if (s->c == nullptr) return nullptr;
  return s->core->hub_of(*s->c);
}

}  // namespace

std::shared_ptr<detail::cancel_hub> detail::server_core::context_hub(const call_context& ctx) {
  if (ctx._core == nullptr) return nullptr;
  if (!ctx._deferred) return ctx._core->hub_of(ctx._call);
  return deferred_hub(ctx._deferred_state);  // the handler runs on after defer(): via the state
}

// --- call_parent

call_parent::call_parent(const call_context& call) : _hub(detail::server_core::context_hub(call)) {}
call_parent::call_parent(const deferred_reply& reply) : _hub(deferred_hub(reply._state)) {}

bool deferred_reply::on_cancel(std::function<void()> hook) {
  std::shared_ptr<detail::cancel_hub> hub = deferred_hub(_state);
  if (!hub) return false;
  detail::cancel_hub::token t = 0;
  return hub->listen(std::move(hook), t) != detail::cancel_hub::listen_result::closed;
}

// --- response metadata, error details, the caller's address (call_context and deferred_reply)

namespace {

bool add_response_pair(detail::call& c, const detail::server_core* core, bool trailer,
                       std::string_view key, std::string_view value) {
  if (c.purpose != detail::call_purpose::request) return false;  // one-way: never answered
  const std::uint32_t max_entries = core != nullptr ? core->options().max_metadata_entries : default_max_metadata_entries;
  const std::uint32_t max_bytes = core != nullptr ? core->options().max_metadata_bytes : default_max_metadata_bytes;
  if (!c.response_md) c.response_md = std::make_unique<detail::response_metadata>();
  return c.response_md->add(trailer, key, value, max_entries, max_bytes);
}

std::string caller_address(const detail::call& c) {
  return c.conn != nullptr ? c.conn->peer() : std::string();
}

}  // namespace

bool call_context::add_header(std::string_view key, std::string_view value) {
  if (_deferred || _answered) return false;
  return add_response_pair(_call, _core, false, key, value);
}

bool call_context::add_trailer(std::string_view key, std::string_view value) {
  if (_deferred || _answered) return false;
  return add_response_pair(_call, _core, true, key, value);
}

void call_context::fail(status code, std::string_view message, std::span<const std::byte> details) {
  if (_deferred) return;
  encode_error(_call, code, message, details);
  _answered = true;
}

std::string call_context::peer_address() const { return caller_address(_call); }

bool deferred_reply::add_header(std::string_view key, std::string_view value) {
  if (!_state) return false;
  std::lock_guard lock(_state->mu);
  return _state->c != nullptr && add_response_pair(*_state->c, _state->core, false, key, value);
}

bool deferred_reply::add_trailer(std::string_view key, std::string_view value) {
  if (!_state) return false;
  std::lock_guard lock(_state->mu);
  return _state->c != nullptr && add_response_pair(*_state->c, _state->core, true, key, value);
}

bool deferred_reply::fail(status code, std::string_view message, std::span<const std::byte> details) {
  return detail::answer_deferred(std::move(_state), code == status::ok ? status::internal : code, message, {},
                                 details);
}

std::string deferred_reply::peer_address() const {
  if (!_state) return {};
  std::lock_guard lock(_state->mu);
  return _state->c != nullptr ? caller_address(*_state->c) : std::string();
}

// --- deferred_reply

deferred_reply& deferred_reply::operator=(deferred_reply&& other) noexcept {
  if (this != &other) {
    if (_state) fail(status::internal, "deferred reply dropped without an answer");
    _state = std::move(other._state);
  }
  return *this;
}

deferred_reply::~deferred_reply() {
  if (_state) fail(status::internal, "deferred reply dropped without an answer");
}

bool deferred_reply::reply(std::span<const std::byte> payload) {
  return detail::answer_deferred(std::move(_state), status::ok, {}, payload);
}

bool deferred_reply::fail(status code, std::string_view message) {
  // An error is never OK on the wire (as encode_error): ok here becomes internal.
  return detail::answer_deferred(std::move(_state), code == status::ok ? status::internal : code, message, {});
}

std::span<const std::byte> deferred_reply::payload() const noexcept {
  if (!_state) return {};
  std::lock_guard lock(_state->mu);
  return _state->c ? _state->c->payload : _state->kept_payload;
}

bool deferred_reply::cancelled() const noexcept {
  if (!_state) return true;
  std::lock_guard lock(_state->mu);
  return _state->c == nullptr || call_cancelled(*_state->c);
}

std::chrono::nanoseconds deferred_reply::remaining() const noexcept {
  if (!_state) return std::chrono::nanoseconds::zero();
  std::lock_guard lock(_state->mu);
  return _state->c ? call_remaining(*_state->c) : std::chrono::nanoseconds::zero();
}

deferred_reply::operator bool() const noexcept {
  if (!_state) return false;
  std::lock_guard lock(_state->mu);
  return _state->c != nullptr;
}

// --- endpoint

void endpoint::receive_and_reply(call_context& call) {
  call.fail(status::unknown_method, "endpoint has no handler for calls to '" +
                                        std::string(call.method()) + "'");
}

std::string_view to_string(dispatch_policy p) noexcept {
  switch (p) {
    case dispatch_policy::all: return "all";
    case dispatch_policy::direct: return "direct";
    case dispatch_policy::message: return "message";
    case dispatch_policy::execution: return "execution";
    case dispatch_policy::connection: return "connection";
  }
  return "unknown";
}

bool parse_dispatch_policy(std::string_view name, dispatch_policy& out) noexcept {
  for (auto p : {dispatch_policy::all, dispatch_policy::direct, dispatch_policy::message,
                 dispatch_policy::execution, dispatch_policy::connection}) {
    if (to_string(p) == name) {
      out = p;
      return true;
    }
  }
  return false;
}

// --- server

namespace {

/// add_method's adapter: one function serves both calls and one-way messages.
class function_endpoint final : public endpoint {
 public:
  explicit function_endpoint(method_handler fn) : _fn(std::move(fn)) {}
  void receive_and_reply(call_context& call) override { _fn(call); }
  void receive(call_context& message) override { _fn(message); }
  bool hears_connection_events() const override { return false; }

 private:
  method_handler _fn;
};

}  // namespace

server::server(server_options options)
    : _core(std::make_unique<detail::server_core>(std::move(options))) {}

server::~server() = default;

void server::add_pool(std::string name, pool_options options) {
  _core->endpoints().add_pool(std::move(name), options);
}

void server::set_authorizer(std::shared_ptr<const authorizer> a) {
  if (_core->state() != detail::server_state::configured) {
    throw std::logic_error("set_authorizer() must come before start()");
  }
  _core->guard().set_authorizer(std::move(a));
}

namespace {
// Names under "ringrpc." belong to the server itself (ringrpc.ping is answered by the reader);
// an endpoint there would be shadowed or would shadow a later built-in.
void refuse_reserved_name(std::string_view name) {
  if (name.starts_with("ringrpc.")) {
    throw std::invalid_argument(std::string("method name '").append(name).append(
        "' is reserved: names starting \"ringrpc.\" belong to the server's built-ins"));
  }
}
}  // namespace

void server::replace_bearer_tokens(std::vector<bearer_token> tokens) {
  if (tokens.empty()) {
    throw std::invalid_argument("replace_bearer_tokens(): no tokens; turning token checks off takes a restart");
  }
  _core->guard().replace_tokens(std::move(tokens));
}

void server::register_endpoint(std::string name, std::shared_ptr<endpoint> ep, endpoint_options options) {
  refuse_reserved_name(name);
  if (const endpoint_options* o = _core->endpoint_override(name)) {
    // The file tunes threads and queues; who may call is the code's decision, so it stays.
    auto who = std::move(options.authorizer);
    options = *o;
    if (options.authorizer == nullptr) options.authorizer = std::move(who);
  }
  _core->endpoints().register_endpoint(std::move(name), std::move(ep), std::move(options), false);
}

bool server::unregister_endpoint(std::string_view name) {
  return _core->endpoints().unregister_endpoint(name);
}

void server::add_method(std::string name, method_handler handler) {
  refuse_reserved_name(name);
  if (!handler) throw std::invalid_argument("method '" + name + "' has no handler");
  endpoint_options o;
  o.policy = _core->options().default_policy;
  if (const endpoint_options* c = _core->endpoint_override(name)) o = *c;
  _core->endpoints().register_endpoint(std::move(name),
                                       std::make_shared<function_endpoint>(std::move(handler)),
                                       std::move(o), true);
}

void server::add_stream_method(std::string name, stream_kind kind, stream_factory factory) {
  refuse_reserved_name(name);
  if (!factory) throw std::invalid_argument("stream method '" + name + "' has no factory");
  if (kind != stream_kind::server && kind != stream_kind::client && kind != stream_kind::bidi) {
    throw std::invalid_argument("stream method '" + name + "' has no valid stream kind");
  }
  endpoint_options o;
  o.policy = _core->options().default_policy;
  if (const endpoint_options* c = _core->endpoint_override(name)) o = *c;
  if (o.policy == dispatch_policy::direct) o.policy = dispatch_policy::message;
  _core->endpoints().register_endpoint(std::move(name),
                                       std::make_shared<detail::stream_endpoint>(kind, std::move(factory)),
                                       std::move(o), true);
}

bool server::post(std::string_view endpoint_name, std::span<const std::byte> payload) {
  return _core->post_local(endpoint_name, payload);
}

std::size_t server::post_to_all(std::span<const std::byte> payload) {
  return _core->post_local_to_all(payload);
}

void server::start() { _core->start(); }
void server::stop() { _core->stop(); }

// --- wait

namespace {

// What the signal handler of wait(wait_signals::stop) may touch: lock-free atomics and an
// eventfd, nothing that allocates or locks.
std::atomic<bool> wait_handles_signals{false};
std::atomic<int> wait_wake_fd{-1};
std::atomic<int> wait_first_signal{0};

void on_stop_signal(int sig) {
  int none = 0;
  if (!wait_first_signal.compare_exchange_strong(none, sig)) {
    // The same rule as ringrpc-server: a second signal means "now", not "drain faster".
    static constexpr char line[] = "ringrpc: second stop signal during the drain: exiting now (status 3)\n";
    [[maybe_unused]] const auto w = ::write(STDERR_FILENO, line, sizeof line - 1);
    ::_exit(3);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto w = ::write(wait_wake_fd.load(), &one, sizeof one);
}

/// Installs on_stop_signal for SIGINT and SIGTERM and puts the previous handlers back on
/// destruction.
class stop_signal_scope {
 public:
  stop_signal_scope() {
    if (wait_handles_signals.exchange(true)) {
      throw std::logic_error("server::wait(wait_signals::stop): another wait() handles the signals");
    }
    _fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (_fd < 0) {
      wait_handles_signals.store(false);
      throw std::system_error(errno, std::generic_category(), "server::wait: eventfd");
    }
    wait_wake_fd.store(_fd);
    wait_first_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &_old_int);
    ::sigaction(SIGTERM, &sa, &_old_term);
  }
  ~stop_signal_scope() {
    ::sigaction(SIGINT, &_old_int, nullptr);
    ::sigaction(SIGTERM, &_old_term, nullptr);
    wait_wake_fd.store(-1);
    ::close(_fd);
    wait_handles_signals.store(false);
  }
  stop_signal_scope(const stop_signal_scope&) = delete;
  stop_signal_scope& operator=(const stop_signal_scope&) = delete;

  int fd() const noexcept { return _fd; }

 private:
  int _fd = -1;
  struct sigaction _old_int {};
  struct sigaction _old_term {};
};

}  // namespace

int server::wait(wait_signals signals) {
  const auto running = [this] {
    const auto s = _core->state();
    return s == detail::server_state::running || s == detail::server_state::draining;
  };
  // Polled: the stop path belongs to server_core and has no hook for waiters, and 50 ms is
  // well below what a caller of wait() notices.
  constexpr int tick_ms = 50;
  if (signals == wait_signals::none) {
    while (running()) ::poll(nullptr, 0, tick_ms);
    return 0;
  }
  stop_signal_scope scope;
  while (running()) {
    pollfd p{scope.fd(), POLLIN, 0};
    ::poll(&p, 1, tick_ms);
    if (const int sig = wait_first_signal.load(); sig != 0) {
      stop();  // a second signal exits from the handler while this drains
      return sig;
    }
  }
  return wait_first_signal.load();
}
std::uint16_t server::port() const noexcept { return _core->port(); }
std::uint16_t server::tls_port() const noexcept { return _core->tls_port(); }
std::string_view server::tls_record_layer() const noexcept {
  return _core->options().tls ? _core->options().tls->name() : std::string_view();
}
const server_options& server::options() const noexcept { return _core->options(); }
server_stats server::stats() const { return _core->stats(); }
std::vector<pool_stats> server::pool_stats_all() const { return _core->endpoints().stats(); }
event_bus& server::events() noexcept { return _core->events(); }

}  // namespace ringrpc

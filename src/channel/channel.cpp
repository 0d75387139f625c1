#include "ringrpc/channel.hpp"

#include <stdexcept>
#include <thread>

#include "channel/channel_core.hpp"
#include "client/call_links.hpp"
#include "client/client_access.hpp"
#include "channel/host_port.hpp"

namespace ringrpc {

namespace {

class static_resolver final : public resolver {
 public:
  static_resolver(std::string text, std::vector<member_address> members)
      : _text(std::move(text)), _members(std::move(members)) {}
  void start(std::function<void(std::vector<member_address>)> update) override { update(_members); }
  void stop() noexcept override {}
  std::string describe() const override { return _text; }

 private:
  std::string _text;
  std::vector<member_address> _members;
};

}  // namespace

std::shared_ptr<resolver> make_static_resolver(std::string_view list) {
  std::vector<member_address> members;
  std::string_view rest = list;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    auto m = detail::parse_host_port(item);
    if (!m) {
      throw std::invalid_argument(std::string("channel target \"").append(list).append("\": \"").append(item) +
                                  "\" is not HOST:PORT (a list is HOST:PORT,HOST:PORT,...; etcd:// targets "
                                  "need ringrpc::discovery::open_channel)");
    }
    members.push_back(std::move(*m));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (members.empty()) throw std::invalid_argument("channel target is empty");
  return std::make_shared<static_resolver>(std::string(list), std::move(members));
}

std::string_view to_string(balancing_policy p) noexcept {
  switch (p) {
    case balancing_policy::round_robin: return "round_robin";
    case balancing_policy::least_outstanding: return "least_outstanding";
    case balancing_policy::power_of_two_choices: return "p2c";
  }
  return "unknown";
}

balancing_policy parse_balancing_policy(std::string_view name) {
  if (name == "round_robin") return balancing_policy::round_robin;
  if (name == "least_outstanding") return balancing_policy::least_outstanding;
  if (name == "p2c" || name == "power_of_two_choices") return balancing_policy::power_of_two_choices;
  throw std::invalid_argument(std::string("unknown balancing policy \"").append(name) +
                              "\"; policies are round_robin, least_outstanding, p2c");
}

channel channel::create(std::string_view target, channel_options options) {
  return channel(make_static_resolver(target), std::move(options));
}

channel::channel(std::shared_ptr<resolver> r, channel_options options) {
  if (!r) throw std::invalid_argument("channel: null resolver");
  _home = std::make_shared<detail::object_home<channel>>();
  _core = std::make_shared<detail::channel_core>(std::move(r), std::move(options));
  _core->start();
  _home->at.store(this, std::memory_order_release);
}

// Typed stubs follow the channel: its home cell moves along and points at the new owner.
channel::channel(channel&& o) noexcept : _core(std::move(o._core)), _home(std::move(o._home)) {
  if (_home) _home->at.store(this, std::memory_order_release);
}
channel& channel::operator=(channel&& o) noexcept {
  if (this != &o) {
    close();
    if (_home) _home->at.store(nullptr, std::memory_order_release);
    _core = std::move(o._core);
    _home = std::move(o._home);
    if (_home) _home->at.store(this, std::memory_order_release);
  }
  return *this;
}
channel::~channel() {
  close();
  if (_home) _home->at.store(nullptr, std::memory_order_release);
}

void channel::close() {
  if (_core) _core->close();
}

void channel::call_async(std::string_view method, std::span<const std::byte> payload, call_callback done,
                         channel_call_options options) {
  if (!_core) {
    call_outcome o;
    o.error = call_error::client_closed;
    o.message = "channel is closed";
    detail::run_callback(done, o);
    return;
  }
  _core->call_async(method, payload, std::move(done), std::move(options));
}

bool channel::send_one_way(std::string_view method, std::span<const std::byte> payload,
                           const channel_call_options& options) {
  return _core && _core->send_one_way(method, payload, options);
}

client_stream channel::open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request) {
  static const stream_options defaults;
  return open_stream(method, kind, request, defaults);
}

client_stream channel::open_stream(std::string_view method, stream_kind kind, std::span<const std::byte> request,
                                   const stream_options& options) {
  if (!_core) return detail::client_access::ended_stream(kind, call_error::client_closed, status::cancelled, "channel is closed");
  return _core->open_stream(method, kind, request, options);
}

reply_future<call_result> channel::call_future(std::string_view method, std::span<const std::byte> payload,
                                              channel_call_options options) {
  auto promise = std::make_shared<std::promise<call_result>>();
  auto future = promise->get_future();
  call_async(method, payload, [promise](const call_outcome& o) { promise->set_value(call_result::from(o)); },
             std::move(options));
  return future;
}

call_result channel::call(std::string_view method, std::span<const std::byte> payload, channel_call_options options) {
  if (detail::client_loop::on_any_loop_thread()) {
    throw std::logic_error("ringrpc::channel::call: synchronous call from a client runtime's thread (the "
                           "channel's I/O thread included) would wait forever; use call_async");
  }
  if (_core && options.timeout.count() == 0 && _core->options().client.default_timeout.count() == 0) {
    options.timeout = _core->options().client.sync_call_timeout;
  }
  return call_future(method, payload, options).get();
}

bool channel::wait_for_members(std::size_t n, std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (_core && _core->up_count() < n) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return _core != nullptr;
}

std::vector<channel_member_state> channel::members() const { return _core ? _core->members() : std::vector<channel_member_state>{}; }

channel_stats channel::stats() const { return _core ? _core->stats() : channel_stats{}; }

}  // namespace ringrpc

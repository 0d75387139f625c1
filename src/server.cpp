#include "ringrpc/server.hpp"

#include <limits>
#include <stdexcept>

#include "server_core.hpp"

namespace ringrpc {

// --- call_context

std::uint64_t call_context::call_id() const noexcept { return _call.id; }
std::string_view call_context::method() const noexcept { return _call.method_name; }
std::span<const std::byte> call_context::payload() const noexcept { return _call.payload; }
bool call_context::has_deadline() const noexcept { return _call.deadline_ns != 0; }
bool call_context::one_way() const noexcept { return _call.kind == wire::Kind::OneWay; }

std::chrono::nanoseconds call_context::remaining() const noexcept {
  if (_call.deadline_ns == 0) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(_call.deadline_ns - detail::now_ns());
}

void call_context::reply(std::span<const std::byte> payload) {
  detail::frame_view f;
  f.call_id = _call.id;
  f.kind = wire::Kind::Reply;
  f.payload = payload;
  _encoder.encode_into(f, _call.reply);
  _answered = true;
}

void call_context::fail(status code, std::string_view message) {
  detail::frame_view f;
  f.call_id = _call.id;
  f.kind = wire::Kind::Error;
  f.code = code == status::ok ? status::internal : code;
  f.message = message;
  _encoder.encode_into(f, _call.reply);
  _answered = true;
}

// --- server

server::server(server_options options)
    : _core(std::make_unique<detail::server_core>(std::move(options))) {}

server::~server() = default;

void server::add_method(std::string name, method_handler handler) {
  if (_core->state() != detail::server_state::configured) {
    throw std::invalid_argument("add_method('" + name + "') after start()");
  }
  _core->methods_for_setup().add(std::move(name), std::move(handler));
}

void server::start() { _core->start(); }
void server::stop() { _core->stop(); }
std::uint16_t server::port() const noexcept { return _core->port(); }
const server_options& server::options() const noexcept { return _core->options(); }
server_stats server::stats() const { return _core->stats(); }

}  // namespace ringrpc

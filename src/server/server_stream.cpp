// The handle a stream handler holds (ringrpc/stream.hpp) over the stream's shared state, and
// the stream method's endpoint (server/stream_endpoint.hpp).
#include "ringrpc/stream.hpp"

#include <string>

#include "base/clock.hpp"
#include "ringrpc/call_context.hpp"
#include "server/stream_endpoint.hpp"
#include "server/stream_state.hpp"

namespace ringrpc {

std::string_view to_string(stream_kind k) noexcept {
  switch (k) {
    case stream_kind::server: return "server";
    case stream_kind::client: return "client";
    case stream_kind::bidi: return "bidi";
  }
  return "unknown";
}

server_stream::server_stream(std::shared_ptr<detail::stream_state> state) noexcept : _state(std::move(state)) {}

write_result server_stream::write(std::span<const std::byte> message) noexcept {
  return _state ? _state->write(message) : write_result::closed;
}

bool server_stream::finish() noexcept { return _state && _state->end(status::ok, {}, true); }

bool server_stream::finish(std::span<const std::byte> reply) noexcept {
  return _state && _state->end(status::ok, {}, true, reply);
}

bool server_stream::fail(status code, std::string_view message) noexcept {
  return _state && _state->end(code == status::ok ? status::internal : code, message, true);
}

bool server_stream::add_header(std::string_view key, std::string_view value) noexcept {
  return _state && _state->add_pair(false, key, value);
}

bool server_stream::add_trailer(std::string_view key, std::string_view value) noexcept {
  return _state && _state->add_pair(true, key, value);
}

void server_stream::pause_reading() noexcept {
  if (_state) _state->pause_reading();
}

void server_stream::resume_reading() noexcept {
  if (_state) _state->resume_reading();
}

std::uint64_t server_stream::call_id() const noexcept { return _state ? _state->id() : 0; }
std::string_view server_stream::method() const noexcept { return _state ? _state->method() : std::string_view(); }
stream_kind server_stream::kind() const noexcept { return _state ? _state->kind() : stream_kind::bidi; }
bool server_stream::ended() const noexcept { return !_state || _state->ended(); }
std::span<const metadata_entry> server_stream::metadata() const noexcept {
  return _state ? _state->metadata() : std::span<const metadata_entry>();
}
const peer_identity* server_stream::peer() const noexcept { return _state ? _state->peer() : nullptr; }

std::optional<std::string_view> server_stream::annotation(std::string_view key) const noexcept {
  if (!_state) return std::nullopt;
  for (const auto& e : _state->annotations()) {
    if (e.key == key) return std::string_view(e.value);
  }
  return std::nullopt;
}

std::chrono::nanoseconds server_stream::remaining() const noexcept {
  if (!_state || _state->deadline_ns() == 0) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(_state->deadline_ns() - detail::now_ns());
}

}  // namespace ringrpc

namespace ringrpc::detail {

std::string stream_kind_mismatch(std::string_view method, stream_kind kind) {
  return std::string("method '")
      .append(method)
      .append("' is a ")
      .append(to_string(kind))
      .append(" stream; open it with StreamOpen stream_kind ")
      .append(std::to_string(static_cast<int>(kind)));
}

void stream_endpoint::receive_and_reply(call_context& call) {
  call.fail(status::bad_request, stream_kind_mismatch(call.method(), _kind));
}

}  // namespace ringrpc::detail

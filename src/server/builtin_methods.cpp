#include <charconv>
#include <chrono>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "ringrpc/server.hpp"

namespace ringrpc {

namespace {

// The payload starts with ASCII decimal microseconds, at most a minute.
std::optional<std::uint64_t> parse_micros(call_context& ctx) {
  const auto payload = ctx.payload();
  const auto* first = reinterpret_cast<const char*>(payload.data());
  std::uint64_t us = 0;
  auto [end, ec] = std::from_chars(first, first + payload.size(), us);
  if (ec != std::errc() || end == first || us > 60'000'000) {
    ctx.fail(status::bad_request,
             "payload must start with a decimal number of microseconds (at most 60000000)");
    return std::nullopt;
  }
  return us;
}

/// The echo service: replies with the request's payload. An endpoint like any user's, so it
/// follows the server's default dispatch policy.
class echo_endpoint final : public endpoint {
 public:
  void receive_and_reply(call_context& call) override { call.reply(call.payload()); }
  bool hears_connection_events() const override { return false; }
};

}  // namespace

void add_builtin_methods(server& s) {
  endpoint_options echo;
  echo.policy = s.options().default_policy;
  s.register_endpoint("echo", std::make_shared<echo_endpoint>(), echo);
  s.add_method("sleep", [](call_context& ctx) {
    const auto us = parse_micros(ctx);
    if (!us) return;
    // Sleep in slices so a cancelled call (cancel frame, vanished client, server stopping)
    // gives its thread back early.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(*us);
    for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now()) {
      if (ctx.cancelled()) {
        ctx.fail(status::cancelled, "sleep cancelled");
        return;
      }
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(1)));
    }
    ctx.reply(ctx.payload());
  });
  s.add_method("burn", [](call_context& ctx) {
    const auto us = parse_micros(ctx);
    if (!us) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(*us);
    while (std::chrono::steady_clock::now() < until) {
    }
    ctx.reply(ctx.payload());
  });
}

}  // namespace ringrpc

#include <charconv>
#include <chrono>
#include <cstdint>
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

}  // namespace

void add_builtin_methods(server& s) {
  s.add_method("echo", [](call_context& ctx) { ctx.reply(ctx.payload()); });
  s.add_method("sleep", [](call_context& ctx) {
    const auto us = parse_micros(ctx);
    if (!us) return;
    std::this_thread::sleep_for(std::chrono::microseconds(*us));
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

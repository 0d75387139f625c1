#include <charconv>
#include <chrono>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "ringrpc/server.hpp"
#include "server/builtin_methods.hpp"

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

// The request's metadata as response headers (but `authorization`, which is the caller's
// secret), then a trailer `pairs` with how many came back: what protocol clients check response
// metadata against (docs/protocol.md, section 9).
void mirror_metadata(call_context& ctx) {
  unsigned n = 0;
  for (const metadata_item item : ctx.metadata()) {
    if (item.key != "authorization" && ctx.add_header(item.key, item.value)) ++n;
  }
  ctx.add_trailer("pairs", std::to_string(n));
}

}  // namespace

void add_builtin_methods(server& s) {
  endpoint_options echo;
  echo.policy = s.options().default_policy;
  s.register_endpoint("echo", std::make_shared<echo_endpoint>(), echo);
  s.add_method("sleep", [](call_context& ctx) {
    const auto us = parse_micros(ctx);
    if (!us) return;
    // Sleep in slices so a cancelled call (cancel frame, vanished client, server stopping)
    // or one past its deadline gives its thread back early.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(*us);
    for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now()) {
      if (ctx.cancelled()) {
        ctx.fail(status::cancelled, "sleep cancelled");
        return;
      }
      if (ctx.remaining() <= std::chrono::nanoseconds::zero()) {
        ctx.fail(status::deadline_exceeded, "sleep cut short at the call's deadline");
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

namespace ringrpc::detail {

void add_response_metadata_methods(server& s) {
  s.add_method("mirror", [](call_context& ctx) {
    mirror_metadata(ctx);
    ctx.reply(ctx.payload());
  });
  // "CODE" or "CODE DETAILS": an Error with that status (decimal, 1..65535, known or not) and
  // DETAILS as its error details; the metadata mirrored as `mirror` does.
  s.add_method("fail", [](call_context& ctx) {
    const auto payload = ctx.payload();
    const auto* first = reinterpret_cast<const char*>(payload.data());
    const auto* last = first + payload.size();
    unsigned code = 0;
    auto [end, ec] = std::from_chars(first, last, code);
    if (ec != std::errc() || end == first || code == 0 || code > 0xffff || (end != last && *end != ' ')) {
      ctx.fail(status::bad_request, "payload must be a status number (1..65535), then optionally a space and details");
      return;
    }
    mirror_metadata(ctx);
    const auto details = end == last ? std::span<const std::byte>() : payload.subspan(static_cast<std::size_t>(end + 1 - first));
    ctx.fail(static_cast<status>(code), "failed as asked", details);
  });
}

}  // namespace ringrpc::detail

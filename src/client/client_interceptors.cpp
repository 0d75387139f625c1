// Client and channel interceptor chains: see client_interceptors.hpp. A throw from an
// interceptor fails that call (call_error::intercepted, status internal) and nothing else.

#include "client/client_interceptors.hpp"

#include <exception>

#include "base/clock.hpp"

namespace ringrpc::detail {

namespace {

std::string client_threw_message(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& x) {
    return std::string("client interceptor threw: ") + x.what();
  } catch (...) {
    return "client interceptor threw: a non-standard exception";
  }
}

}  // namespace

void client_chain_run::before(std::string_view m, std::span<const std::byte> payload,
                              std::vector<metadata_entry>& metadata, std::chrono::microseconds timeout,
                              bool one_way_) {
  method.assign(m);
  one_way = one_way_;
  start_ns = now_ns();
  client_call call{method, payload, metadata, timeout, one_way};
  for (const auto& in : *chain) {
    ++ran;
    if (!in) continue;
    try {
      call_verdict v = in->before_call(call);
      if (v.refused()) {
        refused = true;
        code = v.code();
        message = v.message();
        return;
      }
    } catch (...) {
      refused = true;
      code = status::internal;
      message = client_threw_message(std::current_exception());
      return;
    }
  }
}

call_outcome client_chain_run::refusal() const noexcept {
  call_outcome o;
  o.error = call_error::intercepted;
  o.code = code;
  o.message = message;
  return o;
}

void client_chain_run::after_then(const call_outcome& first, unsigned attempts, const call_callback& done) {
  call_outcome o = first;
  std::string replaced;  // keeps a replacement message alive for the views
  for (std::uint32_t i = ran; i-- > 0;) {
    const auto& in = (*chain)[i];
    if (!in) continue;
    try {
      client_call_summary s{method, one_way, o, attempts, steady_time_at(start_ns), steady_time_at(now_ns())};
      in->after_call(s);
    } catch (...) {
      replaced = client_threw_message(std::current_exception());
      o = call_outcome{};
      o.error = call_error::intercepted;
      o.code = status::internal;
      o.message = replaced;
    }
  }
  if (done) done(o);
}

bool intercept_call(const std::shared_ptr<const client_interceptors>& chain, std::chrono::microseconds timeout,
                    std::string_view method, std::span<const std::byte> payload, call_callback& done,
                    std::vector<metadata_entry>& metadata) {
  auto run = std::make_shared<client_chain_run>();
  run->chain = chain;
  run->before(method, payload, metadata, timeout, false);
  if (run->refused) {
    run->after_then(run->refusal(), 0, done);
    return false;
  }
  done = [run, inner = std::move(done)](const call_outcome& o) { run->after_then(o, 1, inner); };
  return true;
}

bool intercept_one_way(const std::shared_ptr<const client_interceptors>& chain, std::string_view method,
                       std::span<const std::byte> payload,
                       const std::function<bool(std::span<const metadata_entry>)>& post) {
  client_chain_run run;
  run.chain = chain;
  std::vector<metadata_entry> metadata;
  run.before(method, payload, metadata, std::chrono::microseconds(0), true);
  if (run.refused) {
    run.after_then(run.refusal(), 0, nullptr);
    return false;
  }
  const bool queued = post(metadata);
  call_outcome o;
  if (!queued) {
    o.error = call_error::client_busy;
    o.message = "one-way message refused: the client is closed or at its pending limits";
  }
  bool failed = false;
  run.after_then(o, 1, [&](const call_outcome& last) { failed = !last.ok(); });
  return queued && !failed;
}

}  // namespace ringrpc::detail

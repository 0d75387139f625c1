// The server's interceptor chain around one call (ringrpc/interceptor.hpp). Runs on the thread
// that runs the handler; for a deferred call after_call runs on the thread that answers it.
// A throw from an interceptor answers that call `internal` and goes no further: the connection
// and the other calls never hear of it.

#include "server/interceptors.hpp"

#include <exception>
#include <string>

#include "base/clock.hpp"
#include "ringrpc/call_context.hpp"
#include "server/answer.hpp"
#include "server/call.hpp"

namespace ringrpc::detail {

namespace {

std::chrono::steady_clock::time_point at(std::int64_t ns) noexcept {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

std::string threw_message(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& x) {
    return std::string("server interceptor threw: ") + x.what();
  } catch (...) {
    return "server interceptor threw: a non-standard exception";
  }
}

// As call_context::metadata(): a client's call keeps its whole verified frame in `request`.
metadata_view metadata_of(const call& c) noexcept {
  if (!c.from_client() || c.request.size() < frame_prefix_bytes + 8) return {};
  return metadata_view(flatbuffers::GetSizePrefixedRoot<wire::Frame>(c.request.data())->metadata());
}

server_call_summary summary_of(const call& c, bool deferred) noexcept {
  server_call_summary s;
  s.method = c.method_name;
  s.call_id = c.id;
  s.one_way = c.purpose != call_purpose::request;
  s.deferred = deferred;
  s.code = c.answer_status;
  s.metadata = metadata_of(c);
  s.peer = c.peer;
  s.received = at(c.received_ns);
  // Untimed chains (no interceptor wants_timing) read no clock: start and end are `received`.
  const bool timed = c.intercept_start_ns != 0;
  s.start = timed ? at(c.intercept_start_ns) : s.received;
  s.end = timed ? at(now_ns()) : s.received;
  return s;
}

// after_call for interceptors [0, count) in reverse; the first throw's message, else empty.
// Interceptors after a throw still run (each sees the status as it is then).
template <class OnThrow>
void run_after(const server_interceptors& chain, call& c, bool deferred, OnThrow&& on_throw) noexcept {
  server_call_summary s = summary_of(c, deferred);
  for (std::uint32_t i = c.intercepted_count; i-- > 0;) {
    server_interceptor* in = chain[i].get();
    if (in == nullptr) continue;
    try {
      in->after_call(s);
    } catch (...) {
      try {
        on_throw(threw_message(std::current_exception()));
      } catch (...) {
        // No memory for the message: the status set before stands.
      }
      s.code = c.answer_status;
    }
  }
}

}  // namespace

intercepted_call::intercepted_call(const server_interceptors& chain, call_context& ctx, call& c) noexcept
    : _chain(chain) {
  bool timed = false;
  for (const auto& in : chain) {
    if (in && in->wants_timing()) {
      timed = true;
      break;
    }
  }
  c.intercept_start_ns = timed ? now_ns() : 0;
  c.answer_status = status::ok;  // one-way traffic may never set it
  ctx._notes = &_notes;
  for (const auto& in : chain) {
    ++c.intercepted_count;
    if (!in) continue;
    try {
      call_verdict v = in->before_call(ctx);
      if (v.refused()) {
        ctx.fail(v.code(), v.message());
        _admitted = false;
        return;
      }
    } catch (...) {
      try {
        ctx.fail(status::internal, threw_message(std::current_exception()));
      } catch (...) {
        // Out of memory even for the error frame: the caller gets the empty default reply's
        // replacement below, `internal` without a message.
        try {
          ctx.fail(status::internal, {});
        } catch (...) {
        }
      }
      _admitted = false;
      return;
    }
  }
}

void intercepted_call::complete(call_context& ctx, call& c) noexcept {
  ctx._notes = nullptr;  // the handler has returned: nobody reads them any more
  run_after(_chain, c, false, [&](const std::string& message) { ctx.fail(status::internal, message); });
  c.intercepted_count = 0;
}

void deferred_complete(const server_interceptors& chain, call& c) noexcept {
  run_after(chain, c, true, [&](const std::string& message) {
    if (c.purpose == call_purpose::request) encode_error(c, status::internal, message);
  });
  c.intercepted_count = 0;
}

}  // namespace ringrpc::detail

// The server's interceptor chain around one call (ringrpc/interceptor.hpp). Runs on the thread
// that runs the handler; for a deferred call after_call runs on the thread that answers it.
// A throw from an interceptor answers that call `internal` and goes no further: the connection
// and the other calls never hear of it.

#include "server/interceptors.hpp"

#include <exception>
#include <new>
#include <string>

#include "base/clock.hpp"
#include "ringrpc/call_context.hpp"
#include "server/answer.hpp"
#include "server/call.hpp"

namespace ringrpc::detail {

namespace {

std::string server_threw_message(std::exception_ptr e) {
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
  s.received = steady_time_at(c.received_ns);
  // Untimed chains (no interceptor wants_timing) read no clock: start and end are `received`.
  const bool timed = c.intercept_start_ns != 0;
  s.start = timed ? steady_time_at(c.intercept_start_ns) : s.received;
  s.end = timed ? steady_time_at(now_ns()) : s.received;
  return s;
}

bool wants_timing(const server_interceptors& chain) noexcept {
  for (const auto& in : chain) {
    if (in && in->wants_timing()) return true;
  }
  return false;
}

// after_call for interceptors [0, ran) in reverse with `s`; on a throw, `on_throw` gets its
// message and `refresh` the status as it is then. Interceptors after a throw still run.
template <class OnThrow, class Refresh>
void run_after(const server_interceptors& chain, std::uint32_t ran, server_call_summary& s, OnThrow&& on_throw,
               Refresh&& refresh) noexcept {
  for (std::uint32_t i = ran; i-- > 0;) {
    server_interceptor* in = chain[i].get();
    if (in == nullptr) continue;
    try {
      in->after_call(s);
    } catch (...) {
      try {
        on_throw(server_threw_message(std::current_exception()));
      } catch (...) {
        // No memory for the message: the status set before stands.
      }
      refresh(s);
    }
  }
}

template <class OnThrow>
void run_after(const server_interceptors& chain, call& c, bool deferred, OnThrow&& on_throw) noexcept {
  server_call_summary s = summary_of(c, deferred);
  run_after(chain, c.intercepted_count, s, on_throw, [&](server_call_summary& now) { now.code = c.answer_status; });
}

}  // namespace

call_verdict intercepted_call::run_before(const server_interceptors& chain, call_context& ctx,
                                          call_annotations& notes, std::uint32_t& ran) noexcept {
  ctx._notes = &notes;
  for (const auto& in : chain) {
    ++ran;
    if (!in) continue;
    try {
      call_verdict v = in->before_call(ctx);
      if (v.refused()) return v;
    } catch (...) {
      try {
        return call_verdict::refuse(status::internal, server_threw_message(std::current_exception()));
      } catch (...) {
        // Out of memory even for the message: `internal` without one.
        return call_verdict::refuse(status::internal, {});
      }
    }
  }
  return call_verdict::proceed();
}

intercepted_call::intercepted_call(const server_interceptors& chain, call_context& ctx, call& c) noexcept
    : _chain(chain) {
  c.intercept_start_ns = wants_timing(chain) ? now_ns() : 0;
  c.answer_status = status::ok;  // one-way traffic may never set it
  const call_verdict v = run_before(chain, ctx, _notes, c.intercepted_count);
  if (!v.refused()) return;
  _admitted = false;
  try {
    ctx.fail(v.code(), v.message());
  } catch (...) {
    // Out of memory for the error frame: `internal` without a message.
    try {
      ctx.fail(status::internal, {});
    } catch (...) {
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

// --- streams

call_verdict intercepted_stream::open(const server_interceptors& chain, call_context& ctx, call& open,
                                      std::span<const metadata_entry> metadata) noexcept {
  _received_ns = open.received_ns;
  _start_ns = wants_timing(chain) ? now_ns() : 0;
  if (!metadata.empty()) {
    try {
      const metadata_to_send pairs{{}, metadata};
      frame_view f;
      f.kind = wire::Kind::StreamOpen;
      f.metadata_out = &pairs;
      thread_encoder().encode_into(f, _metadata_frame);
    } catch (const std::bad_alloc&) {
      _metadata_frame.clear();
    }
  }
  return intercepted_call::run_before(chain, ctx, _notes, _ran);
}

void intercepted_stream::end(const server_interceptors& chain, std::string_view method, std::uint64_t id,
                             status final_status, const peer_identity* peer) noexcept {
  server_call_summary s;
  s.method = method;
  s.call_id = id;
  s.code = final_status;
  if (!_metadata_frame.empty()) {
    s.metadata = metadata_view(flatbuffers::GetSizePrefixedRoot<wire::Frame>(_metadata_frame.data())->metadata());
  }
  s.peer = peer;
  s.received = steady_time_at(_received_ns);
  s.start = _start_ns != 0 ? steady_time_at(_start_ns) : s.received;
  s.end = _start_ns != 0 ? steady_time_at(now_ns()) : s.received;
  run_after(chain, _ran, s, [](const std::string&) {}, [](server_call_summary&) {});
  _ran = 0;
}

}  // namespace ringrpc::detail

// Coroutine stream handlers (ringrpc/stream_coro.hpp, add_coroutine_stream_method): a stream's
// callbacks (its stream_handler, on the method's pool lane) feed one coroutine, which runs as a
// handler frame (server/coro_frames.hpp) on that pool. The credit model stays the reactor's:
// each message is copied into a slot of one and reading pauses until the coroutine asks for the
// next (pause_reading), so the client's credit comes back as fast as the coroutine reads.
#include "ringrpc/stream_coro.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/coro_waiter.hpp"
#include "exec/worker_pool.hpp"
#include "seam/server_seam.hpp"
#include "server/coro_frames.hpp"
#include "server/coro_runner.hpp"
#include "server/server_core.hpp"

namespace ringrpc {

namespace detail {

// What a coroutine stream handler and its stream's callbacks share. The callbacks run one at a
// time on the lane; the coroutine runs on the pool too, on whichever worker resumes it.
class coro_stream_state {
 public:
  coro_stream_state(server_stream s, std::span<const std::byte> r) : handle(std::move(s)), request(r.begin(), r.end()) {}

  server_stream handle;
  const std::vector<std::byte> request;  // a server stream's; its bytes live only in the factory

  std::mutex mu;                   // guards what follows
  std::vector<std::byte> message;  // the one message handed on and not yet read (capacity kept)
  bool has_message = false;
  bool handed_out = false;  // `message` is the coroutine's until its next co_read
  bool paused = false;      // reading is paused until the coroutine has read `message`
  bool half_closed = false;
  bool ended = false;
  // on_writable()s so far: a co_write that saw would_block parks only if none came since it
  // looked (on_writable fires once per would_block, and may fire before the park).
  std::uint64_t writable = 0;
  coro_waiter* reader = nullptr;
  coro_waiter* writer = nullptr;
};

// The steps co_read and co_write park with: named types, not lambdas, since the frames of these
// externally linked coroutines hold them (GCC's -Wsubobject-linkage).

// One try of co_read: the message handed on, or the end; else the reader parks.
struct server_read_try {
  coro_stream_state* s;
  std::optional<std::span<const std::byte>>* m;
  bool* done;
  bool operator()(coro_waiter& w) const {
    const std::lock_guard lock(s->mu);
    if (s->ended || (!s->has_message && s->half_closed)) {
      *done = true;
      return false;
    }
    if (s->has_message) {
      s->handed_out = true;
      m->emplace(s->message);
      *done = true;
      return false;
    }
    if (s->reader != nullptr) {
      throw std::logic_error("ringrpc::co_read: another coroutine is already waiting to read this stream");
    }
    s->reader = &w;
    return true;
  }
};

// Parks co_write's writer unless an on_writable came since its write said would_block.
struct server_write_try {
  coro_stream_state* s;
  std::uint64_t seen;
  bool operator()(coro_waiter& w) const {
    const std::lock_guard lock(s->mu);
    if (s->ended || s->writable != seen) return false;
    if (s->writer != nullptr) {
      throw std::logic_error("ringrpc::co_write: another coroutine is already waiting to write this stream");
    }
    s->writer = &w;
    return true;
  }
};

}  // namespace detail

namespace {

using detail::coro_stream_state;
using detail::coro_waiter;

// Wakes `w` from one of the stream's callbacks. They run on the method's pool, the coroutine's
// home unless to_pool moved it: then it runs here at once, inside the callback, instead of
// queued behind it. A message it reads and echoes there goes out with the message's own release
// (the stream's carrier), as a callback's write does.
void wake_from_lane(coro_waiter* w) noexcept {
  if (w == nullptr) return;
  detail::thread_pool* here = detail::thread_pool::current();
  if (here != nullptr && w->slot.home == here->home()) {
    w->wake_here();
  } else {
    w->wake();
  }
}

// The stream's callbacks: each records what happened and wakes the coroutine waiting for it.
class coro_stream_callbacks final : public stream_handler {
 public:
  explicit coro_stream_callbacks(std::shared_ptr<coro_stream_state> s) noexcept : _s(std::move(s)) {}

  void on_message(server_stream& stream, std::span<const std::byte> m) override {
    coro_waiter* w = nullptr;
    bool copied = true;
    {
      const std::lock_guard lock(_s->mu);
      try {
        _s->message.assign(m.begin(), m.end());
        _s->has_message = true;
      } catch (const std::bad_alloc&) {
        copied = false;
      }
      w = std::exchange(_s->reader, nullptr);
    }
    if (!copied) {
      // The end (on_done) wakes the reader again; waking it here is harmless.
      stream.fail(status::resource_exhausted, "server out of memory for a stream message");
      wake_from_lane(w);
      return;
    }
    wake_from_lane(w);
    // Unless the coroutine has read it and asked for the next already (it ran here), the next
    // message waits in the connection until it does.
    const std::lock_guard lock(_s->mu);
    if (_s->has_message && !_s->paused) {
      _s->paused = true;
      stream.pause_reading();
    }
  }
  void on_half_close(server_stream&) override {
    coro_waiter* w = nullptr;
    {
      const std::lock_guard lock(_s->mu);
      _s->half_closed = true;
      w = std::exchange(_s->reader, nullptr);
    }
    wake_from_lane(w);
  }
  void on_writable(server_stream&) override {
    coro_waiter* w = nullptr;
    {
      const std::lock_guard lock(_s->mu);
      ++_s->writable;
      w = std::exchange(_s->writer, nullptr);
    }
    wake_from_lane(w);
  }
  // Every end, the handler's own included, comes here last.
  void on_done(status) override {
    coro_waiter* r = nullptr;
    coro_waiter* w = nullptr;
    {
      const std::lock_guard lock(_s->mu);
      _s->ended = true;
      r = std::exchange(_s->reader, nullptr);
      w = std::exchange(_s->writer, nullptr);
    }
    wake_from_lane(r);
    wake_from_lane(w);
  }

 private:
  std::shared_ptr<coro_stream_state> _s;
};

// Ends a stream its handler left open: `internal`, with the exception's what() when one left it.
void end_if_open(server_stream& stream, const std::exception_ptr& error) noexcept {
  if (stream.ended()) return;
  try {
    if (error) std::rethrow_exception(error);
    stream.fail(status::internal, "coroutine stream handler finished without ending the stream");
  } catch (const std::exception& e) {
    stream.fail(status::internal, e.what());
  } catch (...) {
    stream.fail(status::internal, "coroutine stream handler threw a non-standard exception");
  }
}

// One coroutine stream handler's run, as run_coro_handler (coro_server.cpp) runs a method's:
// the registry entry was taken by the caller and is left last.
detail::handler_run run_coro_stream(detail::server_core* core, coro_abi::coro_home* home, std::string_view method,
                                    const coro_abi::coro_stream_fn* fn_in, std::shared_ptr<coro_stream_state>* state_in) {
  coro_abi::frame_context& ctx = co_await detail::own_context{};
  ctx.core = core;
  ctx.home = home;
  std::memcpy(ctx.method, method.data(), std::min(method.size(), sizeof ctx.method - 1));
  core->coro_frames().link(ctx);
  {
    // Taken before the first suspension, while the factory's objects are still there.
    coro_abi::coro_stream_fn fn = *fn_in;
    coro_stream stream(std::move(*state_in));
    std::exception_ptr error;
    try {
      co_await fn.invoke(fn.object.get(), stream);
    } catch (...) {
      error = std::current_exception();
    }
    end_if_open(stream.stream(), error);
    ctx.release();
  }
  core->coro_frames().leave(ctx);
}

}  // namespace

coro_stream::coro_stream(std::shared_ptr<detail::coro_stream_state> state) noexcept : _state(std::move(state)) {}

server_stream& coro_stream::stream() noexcept { return _state->handle; }

std::span<const std::byte> coro_stream::request() const noexcept { return _state->request; }

task<std::optional<std::span<const std::byte>>> co_read(coro_stream& stream) {
  coro_stream_state& s = *stream._state;
  if (s.handle.kind() == stream_kind::server) co_return std::nullopt;
  bool next = false;
  {
    const std::lock_guard lock(s.mu);
    if (std::exchange(s.handed_out, false)) {
      s.has_message = false;
      next = std::exchange(s.paused, false);
    }
  }
  // The message handed out before is done with: the next may come (if it was held back).
  if (next) s.handle.resume_reading();
  for (;;) {
    std::optional<std::span<const std::byte>> m;
    bool done = false;
    co_await detail::park_awaitable(detail::server_read_try{&s, &m, &done});
    if (done) co_return m;
  }
}

task<write_result> co_write(coro_stream& stream, std::span<const std::byte> message) {
  coro_stream_state& s = *stream._state;
  for (;;) {
    std::uint64_t seen = 0;
    {
      const std::lock_guard lock(s.mu);
      seen = s.writable;
    }
    const write_result r = s.handle.write(message);
    if (r != write_result::would_block) co_return r;
    co_await detail::park_awaitable(detail::server_write_try{&s, seen});
  }
}

namespace coro_abi {

std::unique_ptr<stream_handler> start_coro_stream(server& s, const coro_stream_fn& fn, server_stream& stream,
                                                  std::span<const std::byte> request) {
  detail::server_core& core = detail::server_seam::core_of(s);
  if (!core.coro_frames().enter()) {
    // stop() no longer waits for frames: a frame started now could outlive the pools.
    stream.fail(status::shutting_down, "server stopped before the coroutine stream handler started");
    return nullptr;
  }
  try {
    auto state = std::make_shared<coro_stream_state>(stream, request);
    auto callbacks = std::make_unique<coro_stream_callbacks>(state);
    // Stream callbacks run on a pool (a `direct` stream method's on the default one): the
    // coroutine resumes there, as a unary coroutine handler started on a pool does.
    detail::thread_pool* pool = detail::thread_pool::current();
    run_coro_stream(&core, pool != nullptr ? pool->home() : nullptr, stream.method(), &fn, &state);
    return callbacks;
  } catch (...) {
    core.coro_frames().cancel_enter();
    throw;
  }
}

}  // namespace coro_abi

}  // namespace ringrpc

#pragma once
// ringrpc-load's io_uring engine: T threads, each with its own ring and its own connections.

#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "protocol.hpp"
#include "report.hpp"
#include "schedule.hpp"

namespace ringrpc::load {

struct engine_config {
  target where;
  std::vector<request_kind> kinds;  ///< weighted mix; at least one
  unsigned threads = 1;
  unsigned connections = 64;  ///< in total, spread over the threads
  unsigned depth = 1;         ///< calls in flight per connection at most
  /// Open loop when non-empty: calls are due on this schedule (total rate over all
  /// connections); closed loop otherwise.
  std::vector<rate_step> steps;
  std::chrono::nanoseconds duration{std::chrono::seconds(10)};  ///< closed loop: measured time
  std::uint64_t max_calls = 0;  ///< stop after this many calls in total (0: no limit)
  std::chrono::nanoseconds warmup{std::chrono::seconds(1)};
  std::chrono::nanoseconds connect_timeout{std::chrono::seconds(3)};
  std::chrono::nanoseconds call_timeout{0};  ///< 0: none
};

/// Counters the engine publishes while it runs, read once a second by the live display.
struct live_counters {
  std::atomic<std::uint64_t> calls_ok{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> last_second_p99_ns{0};
};

/// The unparsed bytes of one connection's input. Memory follows the bytes that arrived, never
/// what a reply claims: it grows geometrically from initial_bytes as bytes are appended, and a
/// buffer grown past keep_bytes is freed as soon as everything in it has been parsed, so one
/// huge reply does not pin its size for the rest of the run.
class receive_buffer {
 public:
  static constexpr std::size_t initial_bytes = 4096;
  static constexpr std::size_t keep_bytes = 64 * 1024;

  std::span<const std::byte> data() const noexcept { return {_buf.get() + _start, _end - _start}; }
  bool empty() const noexcept { return _start == _end; }
  std::size_t capacity() const noexcept { return _cap; }

  void append(std::span<const std::byte> bytes);
  /// Drops `n` parsed bytes from the front.
  void consume(std::size_t n) noexcept;
  /// Drops everything (a lost connection).
  void clear() noexcept;

 private:
  std::unique_ptr<std::byte[]> _buf;
  std::size_t _cap = 0;
  std::size_t _start = 0;
  std::size_t _end = 0;
};

/// Send and receive times of the calls in flight on one connection, found by sequence number.
/// Its size is fixed by the most calls that may be in flight (the depth), whatever the
/// sequence numbers are: an open-addressing table at most half full. (A window indexed by the
/// low bits of the sequence number had to double whenever one slow call was still in flight as
/// the numbers wrapped around it, without bound.)
class call_window {
 public:
  static constexpr std::uint64_t no_seq = std::numeric_limits<std::uint64_t>::max();
  struct slot {
    std::uint64_t seq = no_seq;
    std::int64_t intended_ns = 0;
    std::int64_t sent_ns = 0;
    bool timed_out = false;
  };

  explicit call_window(std::size_t max_in_flight = 1);

  /// A free slot for `seq`, which must not be in the window; at most max_in_flight at a time.
  slot& insert(std::uint64_t seq) noexcept;
  slot* find(std::uint64_t seq) noexcept;
  /// Removes a slot returned by insert() or find(); other slots may move.
  void erase(slot& s) noexcept;
  std::size_t size() const noexcept { return _size; }
  std::size_t capacity() const noexcept { return _slots.size(); }
  void clear() noexcept;

  template <class F>
  void for_each(F&& f) {
    for (slot& s : _slots) {
      if (s.seq != no_seq) f(s);
    }
  }
  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : _slots) {
      if (s.seq != no_seq) f(s);
    }
  }

 private:
  std::size_t home(std::uint64_t seq) const noexcept {
    return static_cast<std::size_t>((seq * 0x9e3779b97f4a7c15ull) >> _shift);
  }
  std::size_t mask() const noexcept { return _slots.size() - 1; }

  std::vector<slot> _slots;
  unsigned _shift = 0;
  std::size_t _size = 0;
};

/// Runs the load. Throws std::system_error when no connection can be made at start (e.g.
/// refused), std::invalid_argument for a bad configuration. `tick` is called about once a
/// second from the calling thread with the live counters of every thread.
run_result run_engine(const engine_config& config, const protocol& proto,
                      const std::function<void(double elapsed_s, const std::vector<live_counters*>&)>& tick);

}  // namespace ringrpc::load

#pragma once
// The engine's per-thread half: one worker owns one io_uring and its share of the
// connections; shared_run is what all workers of a run read (and the few flags they set).
// Internal to engine.cpp and engine_worker.cpp.

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/write_queue.hpp"
#include "engine.hpp"
#include "rx_stamp.hpp"
#include "tls_transport.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"
#include "wake_batch.hpp"
#include "worker_tallies.hpp"

namespace ringrpc::load::engine_detail {

int connect_to(const target& t, std::chrono::nanoseconds timeout);

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

using slot = call_window::slot;

// The encoded requests of one turn on one connection: an item of its write queue.
struct tx_batch {
  tx_batch* wq_next = nullptr;
  std::vector<std::byte> bytes;
  std::span<const std::byte> wq_bytes() const noexcept { return bytes; }
};

struct conn_state {
  unsigned index = 0;  // among all connections: the schedule spreads calls by it
  const target* endpoint = nullptr;  // where it connects (and reconnects): one of the config's
  unsigned endpoint_index = 0;       // which of them: its counters in worker::endpoints
  int fd = -1;
  int fixed = -1;  // its slot in the ring's registered files, or -1: ops then name fd
  std::unique_ptr<connection_codec> codec;  // also named by rx's framer
  call_window window;
  std::uint64_t next_seq = 0;
  std::uint64_t next_due = 0;  // open loop: number of the next scheduled call
  poisson_arrivals arrivals;   // open loop with --arrival poisson: the next call's send time
  bool blocked_at_pass = false;  // open loop: could take no call at the last scheduling pass
  unsigned in_flight = 0;
  reply_assembler rx{reply_framer{}};
  // Requests issued this turn go into batch[filling]; the other one may be in a send. At most
  // one batch is queued at a time, so a batch is never appended to while the kernel reads it.
  tx_batch batch[2];
  unsigned filling = 0;
  detail::gathered_writer<tx_batch, 2> out;
  bool recv_armed = false;
  bool flush_queued = false;  // on the worker's list of connections to flush this turn
  bool dead = false;
  bool peer_closing = false;  // the server said it closes after its last reply: send no more
  bool parsed_any = false;    // a reply of the URL's protocol came back on this connection
  std::int64_t reconnect_at = 0;
  std::int64_t open_after_ns = 0;  // --conn-ramp: opened this long after the warm-up (0: at the start)
  // --conn-ramp down: from this long after the warm-up it issues no more calls, and closes once
  // those in flight are answered (0: it stays).
  std::int64_t close_after_ns = 0;
  bool ramped = false;  // past close_after_ns: its calls were taken out of the wake batch's count
  std::unique_ptr<tls_transport> tls;  // TLS targets only: the records between socket and codec
};

struct shared_run {
  const engine_config* config = nullptr;
  const protocol* proto = nullptr;
  std::int64_t start_ns = 0;
  std::int64_t measure_from = 0;
  std::int64_t measure_until = never;  // closed loop with a duration; open loop: schedule end
  const rate_schedule* schedule = nullptr;
  std::size_t first_measured_step = 0;  // 1 when a warm-up step was put in front
  std::vector<unsigned> kind_table;  // weighted mix, indexed by a cheap random number
  std::atomic<bool> stop{false};
  // When the run was stopped early (SIGINT or a diagnosis): replies after it are not counted.
  std::atomic<std::int64_t> stop_at{never};
  std::atomic<bool> diagnosed{false};  // the first worker to set it writes `diagnosis`
  std::atomic<bool> any_reply{false};  // some connection has parsed a reply of the protocol
  // Errors are sorted into hopeless and other (live_counters) until the first answers decided.
  std::atomic<bool> watch_answers{true};
  std::string diagnosis;
  // --stream: the first stream the server refused outright (its end an Error before anything
  // else came back), for the fail-fast message: the first worker to set the flag writes it.
  std::atomic<bool> stream_refused{false};
  std::string stream_refusal;
  std::atomic<std::size_t> ready{0};  // workers whose ring is set up (or failed)
  std::atomic<bool> go{false};        // the fields above are final; start issuing
};

class worker final {
 public:
  worker(shared_run& run, std::vector<conn_state> conns, std::uint64_t quota)
      : _run(run), _cfg(*run.config), _conns(std::move(conns)), _quota(quota),
        _talks_unasked(run.proto->talks_unasked()), _streams(_cfg.stream) {}

  void start() {
    _thread = std::thread([this] {
      run();
      finished.store(true, std::memory_order_release);
    });
  }
  void join() { if (_thread.joinable()) _thread.join(); }

  live_counters live;
  worker_tallies tallies;  // this thread's; engine.cpp sums them once every worker has finished
  bool quota_used_up = false;  // issued all of its share of -n
  std::string failure;  // set if the thread could not run at all
  std::atomic<bool> finished{false};

 private:
  void run();
  void size_tallies();
  void open_connections(std::int64_t start);
  bool turn(wake_batch& wake);
  void reconnect_dead(std::int64_t now);
  void publish_last_second(std::int64_t now);
  void hand_over_seconds(std::int64_t end, bool last);
  bool drained(std::int64_t now, std::int64_t& drain_until);
  bool close_streams();
  void count_stream(const conn_state& c);
  void arm_recv(conn_state& c);
  void register_fd(conn_state& c) noexcept;
  void issue(conn_state& c, std::int64_t intended, std::int64_t now);
  void on_recv(conn_state& c, const io_uring_cqe& cqe, std::int64_t now);
  bool on_reply(conn_state& c, const reply& r, std::int64_t now, std::int64_t received);
  void enable_stamps(conn_state& c) noexcept;
  void stamp_sends() noexcept;
  void on_send(conn_state& c, int res, std::int64_t now);
  void flush(conn_state& c);
  void want_flush(conn_state& c) noexcept;
  void mark_dead(conn_state& c) noexcept;
  void send(conn_state& c);
  void lose(conn_state& c, const std::string& why, std::int64_t now);
  void retire(conn_state& c, std::int64_t now);
  bool ramped_down(conn_state& c, std::int64_t now);
  void leave_wake_batch(conn_state& c) noexcept;
  void count_connection(std::int64_t now);
  void count_error(const std::string& kind, std::int64_t now, const conn_state& c, const slot* s = nullptr);
  void diagnose(const conn_state& c, std::int64_t now, bool closed = false);
  void schedule_open_loop(std::int64_t now, std::int64_t& next_wake);
  template <bool poisson>
  void schedule_calls(std::int64_t now, std::int64_t& next_wake);
  void take_arrival(conn_state& c) noexcept;
  void count_poisson_scheduled() noexcept;
  void count_late(std::int64_t due, bool was_blocked) noexcept;
  void count_issued_by_step();
  void note_bytes(std::int64_t now) noexcept;
  void watch_error(const std::string& kind) noexcept;
  void expire(std::int64_t now);
  bool start_tls(conn_state& c, std::int64_t now);
  bool tls_receive(conn_state& c, std::span<const std::byte>& bytes, std::int64_t now);
  void stop_with(const std::string& diagnosis, std::int64_t now);
  bool issuing(std::int64_t now) const noexcept;
  bool schedule_pass_owed() const noexcept;
  second_bucket* bucket(std::int64_t now);
  std::uint32_t pick_kind() noexcept;

  shared_run& _run;
  const engine_config& _cfg;
  std::vector<conn_state> _conns;
  std::uint64_t _quota;  // calls this thread may issue (its share of max_calls, or no limit)
  std::uint64_t _issued = 0;
  bool _talks_unasked = false;  // the protocol sends bytes after receiving (HTTP/2)
  bool _streams = false;        // --stream: each codec carries a stream (engine_streams.cpp)
  detail::ring* _ring = nullptr;
  detail::provided_buffers* _buffers = nullptr;
  std::uint64_t _rng = 0x9e3779b97f4a7c15ull;
  std::int64_t _published_second = -1;
  std::int64_t _handed_over = 0;  // publish_seconds: the seconds before this one are in live.seconds
  // The connections with bytes to send (or records to seal) since the last turn, so a turn
  // costs what happened in it, not a visit to every connection; reserved for all of them.
  std::vector<conn_state*> _to_flush;
  bool _any_dead = false;  // some connection awaits its reconnection
  unsigned _sends_queued = 0;  // send SQEs since the last submit: each posts a completion
  wake_batch* _wake = nullptr;  // the closed loop's, while run() loops: told of ramped-down calls
  std::int64_t _last_schedule_ns = 0;  // `now` of the previous open-loop scheduling pass
  std::uint64_t _bytes_sent = 0;       // over the whole run; the window is cut by note_bytes
  std::uint64_t _sent_before = 0, _received_before = 0;  // at the last turn before the window
  // Kernel receive stamps (rx_stamp.hpp): on when the first socket accepted SO_TIMESTAMPNS;
  // receives are then multishot recvmsgs into the provided buffers, laid out by _rx_layout.
  bool _kernel_stamps = false;
  bool _stamps_probed = false;
  msghdr _rx_layout{};
  rx_clock _rx_clock;
  // The calls issued since the last submit: their send time is read once, right before it.
  std::vector<slot*> _unsent;
  std::thread _thread;
};

}  // namespace ringrpc::load::engine_detail

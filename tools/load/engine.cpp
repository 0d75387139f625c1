#include "engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "base/clock.hpp"
#include "engine_fail_fast.hpp"
#include "engine_worker.hpp"
#include "sniff.hpp"
#include "uring/uring_probe.hpp"

namespace ringrpc::load {

using namespace engine_detail;
using detail::now_ns;

namespace {

// The first answers of the run: once they show the target is hopeless, the run stops (the
// workers drain at once, as for a diagnosis) and the message is returned; once they show it
// is not, the workers stop sorting their errors.
std::string watch_first_answers(shared_run& run, const std::vector<live_counters*>& live, std::int64_t now) {
  std::uint64_t ok = 0, hopeless = 0, other = 0;
  int kind = -1;
  for (const live_counters* l : live) {
    ok += l->calls_ok.load(std::memory_order_relaxed);
    hopeless += l->hopeless_errors.load(std::memory_order_relaxed);
    other += l->other_errors.load(std::memory_order_relaxed);
    if (kind < 0) kind = l->hopeless_kind.load(std::memory_order_relaxed);
  }
  const auto v = answer_watch{}.observe(ok, hopeless, other, now - run.start_ns);
  if (v == answer_watch::verdict::watching) return {};
  run.watch_answers.store(false, std::memory_order_relaxed);
  bool expected = false;
  if (v == answer_watch::verdict::fine || run.stop.load() || !run.diagnosed.compare_exchange_strong(expected, true)) {
    return {};
  }
  run.stop_at.store(now, std::memory_order_relaxed);
  run.stop.store(true, std::memory_order_relaxed);
  return hopeless_message(hopeless_error_name(kind), hopeless, run.config->where);
}

// Per-second buckets, summed over the threads; the last one is as wide as what is left of the
// measured window.
void report_seconds(run_result& r, worker_tallies& all) {
  for (std::size_t i = 0; i < all.seconds.size(); ++i) {
    second_bucket& merged = all.seconds[i];
    const double span_s = std::clamp(r.measured_s - static_cast<double>(i), 1e-3, 1.0);
    r.per_second.push_back({static_cast<double>(i) + span_s, merged.ok, merged.errors,
                            merged.latency.value_at_percentile(99), span_s});
    r.interval_latency_ns.push_back(std::move(merged.latency));
  }
}

// Each measured step of an open loop: what was scheduled (until an interruption), sent, sent
// late, answered, and whether it kept up.
void report_steps(run_result& r, const engine_config& cfg, const shared_run& run, const worker_tallies& all) {
  double requested_calls = 0, scheduled_s = 0, issued = 0, answered = 0;
  r.kept_up = true;
  for (std::size_t i = 0; i < cfg.steps.size(); ++i) {
    const std::size_t k = i + run.first_measured_step;
    const std::int64_t from = run.schedule->step_start_ns(k);
    const std::int64_t until = std::min(run.schedule->step_start_ns(k + 1), run.stop_at.load());
    if (until <= from) break;  // interrupted before this step
    step_result sr;
    sr.start_s = static_cast<double>(from - run.measure_from) / 1e9;
    sr.duration_s = static_cast<double>(until - from) / 1e9;
    sr.requested_rate = cfg.steps[i].mean_rate();
    if (cfg.steps[i].ramp()) {
      const rate_step& st = cfg.steps[i];
      const double part = static_cast<double>(until - from) / static_cast<double>(st.duration_ns);
      sr.ramp_from = st.rate;
      sr.ramp_to = st.rate + (st.rate_to - st.rate) * part;  // where an interruption left it
      // What was asked over the part that ran, not over the whole segment: a ramp cut short
      // must not be judged (or summed into the run's requested rate) against its far end.
      sr.requested_rate = (sr.ramp_from + sr.ramp_to) / 2;
    }
    // Random arrivals: those drawn due before the end (or a stop); even ones: the schedule's.
    sr.scheduled = cfg.poisson_arrivals ? (i < all.step_scheduled.size() ? all.step_scheduled[i] : 0) : run.schedule->due_before(k, until);
    sr.answered = all.step_ok[i];
    sr.issued = all.step_issued[i];
    sr.late_client = all.step_late_client[i];
    sr.late_held = all.step_late_held[i];
    // An interrupted step: only the calls due before the interruption count as asked for.
    sr.issued = std::min(sr.issued, sr.scheduled);
    sr.answered = std::min(sr.answered, sr.issued);
    sr.achieved_rate = static_cast<double>(sr.answered) / sr.duration_s;
    sr.p99_ns = all.step_latency[i].value_at_percentile(99);
    judge_keep_up(sr);
    r.kept_up = r.kept_up && sr.kept_up;
    requested_calls += sr.requested_rate * sr.duration_s;
    scheduled_s += sr.duration_s;
    issued += static_cast<double>(sr.issued);
    answered += static_cast<double>(sr.answered);
    r.steps.push_back(std::move(sr));
  }
  r.kept_up = r.kept_up && !r.steps.empty();
  r.requested_rate = scheduled_s > 0 ? requested_calls / scheduled_s : 0;
  r.issued_rate = scheduled_s > 0 ? issued / scheduled_s : 0;
  r.answered_rate = scheduled_s > 0 ? answered / scheduled_s : 0;
}

using worker_list = std::vector<std::unique_ptr<worker>>;

// --conn-ramp: when connection `i` opens, after the warm-up. Those past the first `from` open
// one by one, evenly, the last (number `connections`) at the ramp's end; 0: at the start.
std::int64_t conn_open_after_ns(const engine_config& cfg, unsigned i) {
  if (cfg.conn_ramp_time.count() <= 0 || i < cfg.conn_ramp_from || cfg.connections <= cfg.conn_ramp_from) return 0;
  const double nth = i + 1 - cfg.conn_ramp_from, of = cfg.connections - cfg.conn_ramp_from;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(nth * static_cast<double>(cfg.conn_ramp_time.count()) / of)));
}

// --conn-ramp down: when connection `i` stops taking calls, after the warm-up. Those past the
// first `conn_ramp_to` close one by one, evenly, the last (index conn_ramp_to) at the ramp's
// end; 0: it stays.
std::int64_t conn_close_after_ns(const engine_config& cfg, unsigned i) {
  if (cfg.conn_ramp_time.count() <= 0 || cfg.conn_ramp_to == 0 || i < cfg.conn_ramp_to) return 0;
  const double nth = cfg.connections - i, of = cfg.connections - cfg.conn_ramp_to;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(nth * static_cast<double>(cfg.conn_ramp_time.count()) / of)));
}

// Connects everything first: an unreachable target is one clear error, not a run of failures
// (but for those a --conn-ramp opens later). The connections, dealt to the threads in turn.
std::vector<std::vector<conn_state>> connect_all(const engine_config& cfg, const protocol& proto, unsigned threads) {
  std::vector<std::vector<conn_state>> per_thread(threads);
  for (unsigned i = 0; i < cfg.connections; ++i) {
    const unsigned endpoint_index = cfg.endpoints.empty() ? 0 : static_cast<unsigned>(i % cfg.endpoints.size());
    const target& endpoint = cfg.endpoints.empty() ? cfg.where : cfg.endpoints[endpoint_index];
    const std::int64_t open_after = conn_open_after_ns(cfg, i);
    const int fd = open_after > 0 ? -1 : connect_to(endpoint, cfg.connect_timeout);
    if (open_after == 0 && fd < 0) {
      for (auto& v : per_thread) for (auto& c : v) ::close(c.fd);
      throw std::system_error(-fd, std::system_category(),
                              "cannot connect to " + endpoint.host + ":" + std::to_string(endpoint.port));
    }
    conn_state c;
    c.endpoint = &endpoint;
    c.endpoint_index = endpoint_index;
    c.index = i;
    c.fd = fd;
    c.open_after_ns = open_after;
    c.close_after_ns = conn_close_after_ns(cfg, i);
    c.codec = proto.new_connection();
    c.rx.framer().codec = c.codec.get();
    per_thread[i % threads].push_back(std::move(c));
  }
  return per_thread;
}

// The clock starts once every thread has its ring: set-up time is not charged to the schedule
// or the warm-up. Returns the open loop's schedule (null in a closed loop), which `run` points to.
std::unique_ptr<rate_schedule> start_clock(shared_run& run, const engine_config& cfg, const worker_list& workers) {
  while (run.ready.load(std::memory_order_acquire) < workers.size()) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  run.start_ns = now_ns();
  run.measure_from = run.start_ns + cfg.warmup.count();
  std::unique_ptr<rate_schedule> schedule;
  if (!cfg.steps.empty()) {
    std::vector<rate_step> steps;
    if (cfg.warmup.count() > 0) {
      // At the first step's (starting) rate: a ramp's warm-up is flat at its start.
      const rate_step& first = cfg.steps.front();
      steps.push_back({first.rate, cfg.warmup.count(), first.ramp() ? first.rate : -1});
      run.first_measured_step = 1;
    }
    steps.insert(steps.end(), cfg.steps.begin(), cfg.steps.end());
    schedule = std::make_unique<rate_schedule>(steps, cfg.connections, run.start_ns);
    run.schedule = schedule.get();
    run.measure_until = schedule->end_ns();
  } else if (cfg.duration.count() > 0) {
    run.measure_until = run.measure_from + cfg.duration.count();
  }
  return schedule;
}

// How watching the run ended, beside the workers' own results.
struct watch_outcome {
  bool interrupted = false;
  std::string fail_fast;
};

// The engine's own thread while the workers run: a tick a second for the live display, and the
// three reasons to stop early (SIGINT, a silent server, hopeless first answers).
watch_outcome watch_run(shared_run& run, const engine_config& cfg, const worker_list& workers,
                        const std::function<void(double, const std::vector<live_counters*>&)>& tick) {
  std::vector<live_counters*> live;
  for (auto& w : workers) live.push_back(&w->live);
  auto all_finished = [&] {
    for (auto& w : workers) {
      if (!w->finished.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  // A silent server is only diagnosed when calls were due on every connection from the start.
  const bool silence_check =
      cfg.silence_limit.count() > 0 &&
      (cfg.steps.empty() || cfg.steps.front().rate * static_cast<double>(cfg.silence_limit.count()) / 1e9 >=
                                2.0 * static_cast<double>(cfg.connections));
  watch_outcome out;
  std::int64_t next_tick = run.start_ns + 1'000'000'000;
  while (!all_finished()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::int64_t now = now_ns();
    if (!out.interrupted && cfg.stop_requested != nullptr && cfg.stop_requested->load(std::memory_order_relaxed)) {
      out.interrupted = true;
      std::int64_t expected = never;
      run.stop_at.compare_exchange_strong(expected, now);
      run.stop.store(true, std::memory_order_relaxed);
    }
    if (silence_check && now - run.start_ns >= cfg.silence_limit.count() && !run.stop.load()) {
      std::uint64_t bytes = 0;
      for (auto* l : live) bytes += l->bytes_received.load(std::memory_order_relaxed);
      bool expected = false;
      if (bytes == 0 && run.diagnosed.compare_exchange_strong(expected, true)) {
        run.diagnosis = diagnose_silence(cfg.where, static_cast<double>(cfg.silence_limit.count()) / 1e9,
                                         cfg.connections);
        run.stop_at.store(now, std::memory_order_relaxed);
        run.stop.store(true, std::memory_order_relaxed);
      }
    }
    if (run.watch_answers.load(std::memory_order_relaxed)) out.fail_fast = watch_first_answers(run, live, now);
    if (now >= next_tick) {
      next_tick += 1'000'000'000;
      if (tick) tick(static_cast<double>(now - run.start_ns) / 1e9, live);
    }
  }
  return out;
}

// The workers' tallies summed (worker_tallies::operator+=), or the message of the first worker
// that could not run at all.
worker_tallies sum_tallies(const worker_list& workers) {
  worker_tallies all;
  for (auto& w : workers) {
    if (!w->failure.empty()) throw std::runtime_error(w->failure);
    all += w->tallies;
  }
  return all;
}

// A --mix kind's or an endpoint's line of the report.
kind_result as_result(std::string name, call_tally& t) {
  kind_result out;
  out.name = std::move(name);
  out.calls_ok = t.ok;
  out.errors = std::move(t.errors);
  out.latency_ns.merge(t.latency);
  return out;
}

// Per --mix kind (only when there is more than one kind).
void report_kinds(run_result& r, const engine_config& cfg, worker_tallies& all) {
  if (cfg.kinds.size() <= 1) return;
  all.kinds.resize(std::max(all.kinds.size(), cfg.kinds.size()));
  for (std::size_t k = 0; k < cfg.kinds.size(); ++k) r.kinds.push_back(as_result(cfg.kinds[k].name, all.kinds[k]));
}

// Per endpoint of a registry URL, the way the --mix kinds are.
void report_members(run_result& r, const engine_config& cfg, worker_tallies& all) {
  if (!cfg.per_endpoint) return;
  const std::size_t n = std::max<std::size_t>(cfg.endpoints.size(), 1);
  all.endpoints.resize(std::max(all.endpoints.size(), n));
  for (std::size_t e = 0; e < n; ++e) {
    const target& t = cfg.endpoints.empty() ? cfg.where : cfg.endpoints[e];
    const bool v6 = t.host.find(':') != std::string::npos;
    std::string name;
    name.append(v6 ? "[" : "").append(t.host).append(v6 ? "]:" : ":").append(std::to_string(t.port));
    r.members.push_back(as_result(std::move(name), all.endpoints[e]));
  }
}

// The totals, and the measured window: from the warm-up's end to the schedule's end, an
// interruption, or (a run that reached its call count early, -n with -T) its last completion.
void report_totals(run_result& r, const shared_run& run, const worker_list& workers, const worker_tallies& all) {
  r.calls_ok = all.calls_ok;
  r.latency_ns.merge(all.latency);
  r.service_ns.merge(all.service);
  r.errors = all.errors;
  r.handshake_ns.merge(all.handshake);
  r.handshake_failures = all.handshake_failures;
  r.connections_measured = all.connections_measured;
  r.handshakes_measured = all.handshakes_measured;
  r.streams_opened = all.streams_opened;
  r.streams_failed = all.streams_failed;
  r.stream_failures = all.stream_failures;
  r.stream_credit_waits = all.stream_credit_waits;
  r.bytes_sent = all.bytes_sent_measured;
  r.bytes_received = all.bytes_received_measured;
  r.latency_clock = all.stamped_receives == 0 ? "user" : all.unstamped_receives == 0 ? "kernel" : "mixed";
  const std::int64_t last = std::max(run.measure_from, all.last_completion_ns);
  bool all_quotas = true;
  for (auto& w : workers) all_quotas = all_quotas && w->quota_used_up;
  std::int64_t window_end =
      run.measure_until == never || (all_quotas && last < run.measure_until) ? last : run.measure_until;
  window_end = std::min(window_end, run.stop_at.load());
  r.measured_s = static_cast<double>(std::max<std::int64_t>(window_end - run.measure_from, 1)) / 1e9;
}

}  // namespace

run_result run_engine(const engine_config& cfg, const protocol& proto,
                      const std::function<void(double, const std::vector<live_counters*>&)>& tick) {
  if (cfg.kinds.empty()) throw std::invalid_argument("no request kinds to send");
  if (cfg.connections == 0 || cfg.depth == 0) throw std::invalid_argument("connections and depth must be at least 1");
  if (cfg.new_connection_per_call && cfg.depth != 1) {
    throw std::invalid_argument("a new connection per call carries one call: depth must be 1");
  }
  const unsigned threads = std::max(1u, std::min(cfg.threads, cfg.connections));
  detail::probe_io_uring();  // one clear message before anything else when io_uring is unusable

  shared_run run;
  run.config = &cfg;
  run.proto = &proto;
  for (unsigned i = 0; i < cfg.kinds.size(); ++i) {
    for (unsigned w = 0; w < std::max(1u, cfg.kinds[i].weight); ++w) run.kind_table.push_back(i);
  }
  auto per_thread = connect_all(cfg, proto, threads);
  worker_list workers;
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint64_t quota = cfg.max_calls == 0 ? std::numeric_limits<std::uint64_t>::max()
                                                   : cfg.max_calls / threads + (t < cfg.max_calls % threads ? 1 : 0);
    workers.push_back(std::make_unique<worker>(run, std::move(per_thread[t]), quota));
  }
  for (auto& w : workers) w->start();
  const auto schedule = start_clock(run, cfg, workers);
  run.go.store(true, std::memory_order_release);
  const watch_outcome watched = watch_run(run, cfg, workers, tick);
  for (auto& w : workers) w->join();
  if (cfg.on_finished) {
    std::vector<live_counters*> live;
    for (auto& w : workers) live.push_back(&w->live);
    cfg.on_finished(live);
  }

  run_result r;
  r.tls = cfg.tls != nullptr;
  r.new_connection_per_call = cfg.new_connection_per_call;
  r.interrupted = watched.interrupted;
  if (run.diagnosed.load()) r.diagnosis = run.diagnosis;
  r.fail_fast = watched.fail_fast;
  r.streams = cfg.stream;
  if (cfg.stream && !r.fail_fast.empty() && run.stream_refused.load()) {
    // The server's own words say more than the generic hint for its status.
    r.fail_fast = "stopped: every answer so far was an error no retry changes; the server refused the stream: " +
                  run.stream_refusal;
  }
  r.warmup_s = static_cast<double>(cfg.warmup.count()) / 1e9;
  r.open_loop = run.schedule != nullptr;
  worker_tallies all = sum_tallies(workers);
  report_totals(r, run, workers, all);
  report_kinds(r, cfg, all);
  report_members(r, cfg, all);
  report_seconds(r, all);
  if (r.open_loop) report_steps(r, cfg, run, all);
  return r;
}

}  // namespace ringrpc::load

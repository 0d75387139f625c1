#!/usr/bin/env bash
# Tail latency at half load (issue 31): the raw io_uring echo loop, ringrpc-server's `direct`
# path and its default pool path, each a fresh server pinned to SERVER_CPU, ringrpc-load on
# LOAD_CPU, 64 connections, 64-byte echo. Each round first measures the pool path's saturation
# (closed loop, depth 16), then runs every variant open loop at half of it: the same offered
# rate for all three, at most half of each one's capacity (the pool path's is the lowest).
# ringrpc-load's open loop times each call from when it was due, not from when it went out, so
# a stalled server shows in the tail instead of slowing the load down. Per run: latency p50,
# p99, p99.9, p99.99 and server CPU per call; then per figure the ratio to the raw loop of the
# same round, median [min-max].
#
#   bench/tail_latency.sh                                # 3 rounds of 5 s
#   ROUNDS=5 DURATION=10 OUT_JSON=/tmp/tail.json bench/tail_latency.sh
#
# Environment: DURATION [5] WARMUP [1] ROUNDS [3] CONNECTIONS [64] SIZE [64] DEPTH [16]
# LOAD_SHARE [0.5] (the fraction of the pool path's saturation offered), MAX_RATE [100000]: the
# offered rate's cap. ringrpc-load's open loop is one thread on LOAD_CPU, and on the 2-CPU VM
# this was written on it kept up with about 200k calls/s (at 400k it achieved 200k and its
# own backlog became the latency), well below half of a server's depth-16 saturation
# (0.8-0.9M); past about half its own capacity the generator's jitter, not the server's, is the
# tail. So the rate is min(LOAD_SHARE x saturation, MAX_RATE), and the summary says which share
# of the pool path's saturation that was.
# SERVER_CPU / LOAD_CPU [0 / 1] BUILD_DIR [build/bench] OUT_JSON KEEP_WORK=1.
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

pinned_bench_knobs tail_latency.sh
rounds=${ROUNDS:-3}
share=${LOAD_SHARE:-0.5}
max_rate=${MAX_RATE:-100000}
raw_bin=$(raw_loop_bin "$build_dir")
server_bin=$build_dir/tools/ringrpc-server
load_bin=$build_dir/tools/ringrpc-load
bench_need_built tail_latency.sh "$build_dir" "$raw_bin" "$server_bin" "$load_bin"
clk_tck=$(getconf CLK_TCK)
bench_work_dir tail_latency
lifetime=$(python3 -c "import math; print(math.ceil(3 * ($duration + $warmup + 20) + 30))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 20))")

start_variant() {
  local -a cmd
  case $1 in
    raw) cmd=("$raw_bin" --port 0) ;;
    direct) cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=direct) ;;
    pool) cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=all) ;;
  esac
  if ! start_pinned_server "$work/server" "$lifetime" "$server_cpu" "${cmd[@]}"; then
    echo "tail_latency.sh: $1 did not start" >&2
    exit 1
  fi
  url="ringrpc://127.0.0.1:$listen_port/echo"
  if [[ $1 == raw ]]; then url="echo://127.0.0.1:$listen_port"; fi
}

load() {
  timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" -s "$size" -c "$connections" "$@" "$url" \
    >/dev/null 2>"$work/load.err" ||
    { echo "tail_latency.sh: ringrpc-load failed: $(tail -2 "$work/load.err")" >&2; exit 1; }
}

for ((r = 1; r <= rounds; r++)); do
  printf 'round %d/%d: saturation' "$r" "$rounds" >&2
  start_variant pool
  load -P "$depth" --duration "${duration}s" --warmup "${warmup}s" --json "$work/sat.$r.json"
  stop_pinned_server
  sat=$(python3 -c "import json; print(int(json.load(open('$work/sat.$r.json'))['calls_per_sec']))")
  rate=$(python3 -c "print(min(int($sat * $share), $max_rate))")
  printf ' %s calls/s, offering %s' "$sat" "$rate" >&2
  for v in raw direct pool; do
    printf ', %s' "$v" >&2
    start_variant "$v"
    load -R "$rate" --duration "${warmup}s" --warmup 0s
    c0=$(cpu_ticks "$pinned_pid")
    load -R "$rate" --duration "${duration}s" --warmup 0s --json "$work/$v.$r.json"
    c1=$(cpu_ticks "$pinned_pid")
    stop_pinned_server
    echo "$r $v $work/$v.$r.json $c0 $c1 $rate $sat" >>"$work/index"
  done
  echo " done" >&2
done

TL_WORK=$work TL_CLK_TCK=$clk_tck TL_OUT_JSON=$out_json TL_CONNECTIONS=$connections TL_SHARE=$share \
TL_DURATION=$duration TL_SIZE=$size TL_DEPTH=$depth TL_MAX_RATE=$max_rate python3 - <<'PY'
import json, os, statistics
e = os.environ
clk = int(e["TL_CLK_TCK"])
runs = {}
for line in open(os.path.join(e["TL_WORK"], "index")):
    r, v, path, c0, c1, rate, sat = line.split()
    j = json.load(open(path))
    calls = j["calls_ok"]
    lat = j["latency_us"]
    runs[(int(r), v)] = {
        "offered_rate": int(rate), "pool_saturation": int(sat), "achieved_rate": j["achieved_rate"], "calls_ok": calls,
        "errors": sum(j["errors"].values()),
        "cpu_us_per_call": (int(c1) - int(c0)) / clk * 1e6 / calls if calls else float("nan"),
        "p50_us": lat["p50"], "p99_us": lat["p99"], "p99.9_us": lat["p99.9"], "p99.99_us": lat["p99.99"]}
rounds = sorted({k[0] for k in runs})
rates = [runs[(r, "raw")]["offered_rate"] for r in rounds]
shares = [runs[(r, "raw")]["offered_rate"] / runs[(r, "raw")]["pool_saturation"] for r in rounds]
print(f"\n{len(rounds)} round(s) of {e['TL_DURATION']} s; {e['TL_CONNECTIONS']} connections, {e['TL_SIZE']} B; "
      f"offered {min(rates):,}-{max(rates):,} calls/s = {min(shares):.2f}-{max(shares):.2f} of the pool path's "
      f"depth-{e['TL_DEPTH']} saturation (asked: {float(e['TL_SHARE']):.2f}, capped by MAX_RATE)")
variants = ("direct", "pool")
print(f"{'figure':<18}{'raw':>10}" + "".join(f"{v:>10}{'ratio':>7}{'min':>6}{'max':>6}" for v in variants))
summary = {}
for key, label in (("p50_us", "p50, us"), ("p99_us", "p99, us"), ("p99.9_us", "p99.9, us"),
                   ("p99.99_us", "p99.99, us"), ("cpu_us_per_call", "CPU per call, us")):
    row = {"raw_median": statistics.median(runs[(r, "raw")][key] for r in rounds)}
    line = f"{label:<18}{row['raw_median']:>10.2f}"
    for v in variants:
        ratios = [runs[(r, v)][key] / runs[(r, "raw")][key] for r in rounds if runs[(r, "raw")][key]]
        row[v] = {"median": statistics.median(runs[(r, v)][key] for r in rounds),
                  "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
        line += f"{row[v]['median']:>10.2f}{row[v]['ratio_median']:>7.2f}{row[v]['ratio_min']:>6.2f}{row[v]['ratio_max']:>6.2f}"
    summary[key] = row
    print(line)
errors = {v: sum(runs[(r, v)]["errors"] for r in rounds) for v in ("raw", "direct", "pool")}
short = {v: min(runs[(r, v)]["achieved_rate"] / runs[(r, v)]["offered_rate"] for r in rounds) for v in ("raw", "direct", "pool")}
print(f"errors: {errors}; lowest achieved/offered rate: " + ", ".join(f"{v} {s:.3f}" for v, s in short.items()))
print("goal (issue 31): pool p99.9 <= 1.5x raw at half load (here: at the share above)")
if e["TL_OUT_JSON"]:
    json.dump({"config": {k[3:].lower(): v for k, v in e.items() if k.startswith("TL_") and k not in ("TL_WORK", "TL_OUT_JSON")},
               "summary": summary, "errors": errors,
               "runs": [{"round": r, "variant": v, **runs[(r, v)]} for (r, v) in sorted(runs)]},
              open(e["TL_OUT_JSON"], "w"), indent=1)
    print(f"wrote {e['TL_OUT_JSON']}")
PY

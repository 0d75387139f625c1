#!/usr/bin/env bash
# Many connections at a low rate each (issue 31): 10,000 connections, 20,000 calls/s in all
# (2 calls/s each, open loop), 64-byte echo. The raw io_uring echo loop, ringrpc-server's default
# pool path, and the same with every reply handed to the shard (RINGRPC_INLINE_REPLIES=0),
# alternated within each round, each a fresh server pinned to SERVER_CPU, ringrpc-load on
# LOAD_CPU. Per run: server CPU per call (utime+stime over the calls the run answered; a warm-up
# run of its own comes first) and latency p50/p99; then per figure the ratio to the raw loop of
# the same round, median [min-max].
#
#   bench/many_connections.sh                        # 3 rounds of 5 s
#   ROUNDS=5 CONNECTIONS=10000 RATE=20k OUT_JSON=/tmp/many.json bench/many_connections.sh
#
# Environment: DURATION [5] WARMUP [2] ROUNDS [3] CONNECTIONS [10000] SIZE [64] RATE [20k]
# SERVER_CPU / LOAD_CPU [0 / 1] BUILD_DIR [build/bench] OUT_JSON KEEP_WORK=1.
# ringrpc-load and ringrpc-server raise their own open-file limit; the raw loop inherits this
# shell's, which is raised here to the hard limit. Only 127.0.0.1 is used; every process runs
# under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

: "${CONNECTIONS:=10000}" "${WARMUP:=2}"
pinned_bench_knobs many_connections.sh
rounds=${ROUNDS:-3}
raw_bin=$(raw_loop_bin "$build_dir")
server_bin=$build_dir/tools/ringrpc-server
load_bin=$build_dir/tools/ringrpc-load
bench_need_built many_connections.sh "$build_dir" "$raw_bin" "$server_bin" "$load_bin"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [[ $(ulimit -n) != unlimited ]] && (($(ulimit -n) < connections + 64)); then
  echo "many_connections.sh: the open-file limit $(ulimit -n) is below $connections connections" >&2
  exit 2
fi
clk_tck=$(getconf CLK_TCK)
bench_work_dir many_connections
lifetime=$(python3 -c "import math; print(math.ceil(2 * ($duration + $warmup + 30) + 30))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 30))")

run_variant() {
  local v=$1 r=$2 url
  local -a cmd env=()
  case $v in
    raw) cmd=("$raw_bin" --port 0) ;;
    pool) cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=all) ;;
    handoff)
      env=(env RINGRPC_INLINE_REPLIES=0)
      cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=all)
      ;;
  esac
  if ! start_pinned_server "$work/server" "$lifetime" "$server_cpu" "${env[@]}" "${cmd[@]}"; then
    echo "many_connections.sh: $v did not start" >&2
    exit 1
  fi
  url="ringrpc://127.0.0.1:$listen_port/echo"
  [[ $v == raw ]] && url="echo://127.0.0.1:$listen_port"
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" -s "$size" -c "$connections" -R "$rate")
  "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" ||
    { echo "many_connections.sh: ringrpc-load failed (warm-up, $v): $(tail -2 "$work/load.err")" >&2; exit 1; }
  local c0 c1 json=$work/$v.$r.json
  c0=$(cpu_ticks "$pinned_pid")
  "${load[@]}" --duration "${duration}s" --warmup 0s --json "$json" "$url" >/dev/null 2>"$work/load.err" ||
    { echo "many_connections.sh: ringrpc-load failed ($v): $(tail -2 "$work/load.err")" >&2; exit 1; }
  c1=$(cpu_ticks "$pinned_pid")
  stop_pinned_server
  echo "$r $v $json $c0 $c1" >>"$work/index"
}

# The env wrapper execs the server: start_pinned_server's PID is still the server's own.
for ((r = 1; r <= rounds; r++)); do
  for v in raw pool handoff; do
    printf 'round %d/%d: %-8s' "$r" "$rounds" "$v" >&2
    run_variant "$v" "$r"
    echo " done" >&2
  done
done

MC_WORK=$work MC_CLK_TCK=$clk_tck MC_OUT_JSON=$out_json MC_CONNECTIONS=$connections MC_RATE=$rate \
MC_DURATION=$duration MC_SIZE=$size python3 - <<'PY'
import json, os, statistics
e = os.environ
clk = int(e["MC_CLK_TCK"])
runs = {}
for line in open(os.path.join(e["MC_WORK"], "index")):
    r, v, path, c0, c1 = line.split()
    j = json.load(open(path))
    calls = j["calls_ok"]
    errors = sum(j["errors"].values())
    runs[(int(r), v)] = {
        "cpu_us_per_call": (int(c1) - int(c0)) / clk * 1e6 / calls if calls else float("nan"),
        "p50_us": j["latency_us"]["p50"], "p99_us": j["latency_us"]["p99"],
        "calls_ok": calls, "errors": errors, "achieved_rate": j["achieved_rate"]}
rounds = sorted({k[0] for k in runs})
print(f"\n{len(rounds)} round(s); {e['MC_CONNECTIONS']} connections, {e['MC_RATE']} calls/s in all, "
      f"{e['MC_SIZE']} B, {e['MC_DURATION']} s per run")
summary = {}
print(f"{'figure':<18}{'raw':>10}{'pool':>10}{'ratio':>7}{'min':>6}{'max':>6}{'handoff':>10}{'ratio':>7}{'min':>6}{'max':>6}")
for key, label in (("cpu_us_per_call", "CPU per call, us"), ("p50_us", "p50, us"), ("p99_us", "p99, us")):
    row = {"raw_median": statistics.median(runs[(r, "raw")][key] for r in rounds)}
    line = f"{label:<18}{row['raw_median']:>10.2f}"
    for v in ("pool", "handoff"):
        ratios = [runs[(r, v)][key] / runs[(r, "raw")][key] for r in rounds if runs[(r, "raw")][key]]
        row[v] = {"median": statistics.median(runs[(r, v)][key] for r in rounds),
                  "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
        line += f"{row[v]['median']:>10.2f}{row[v]['ratio_median']:>7.2f}{row[v]['ratio_min']:>6.2f}{row[v]['ratio_max']:>6.2f}"
    summary[key] = row
    print(line)
errors = {v: sum(runs[(r, v)]["errors"] for r in rounds) for v in ("raw", "pool", "handoff")}
print(f"errors: {errors}; goals (issue 31): pool CPU per call <= 1.3x raw, p99 <= 1.5x")
if e["MC_OUT_JSON"]:
    json.dump({"config": {k[3:].lower(): v for k, v in e.items() if k.startswith("MC_") and k not in ("MC_WORK", "MC_OUT_JSON")},
               "summary": summary, "errors": errors,
               "runs": [{"round": r, "variant": v, **runs[(r, v)]} for (r, v) in sorted(runs)]},
              open(e["MC_OUT_JSON"], "w"), indent=1)
    print(f"wrote {e['MC_OUT_JSON']}")
PY

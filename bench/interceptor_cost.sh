#!/usr/bin/env bash
# What one no-op server interceptor costs: server CPU per call with 0 and with 1 interceptor
# (bench/interceptor_server.cpp: the built-in echo behind N no-op interceptors), alternated
# within each round, one fresh server per variant and round pinned to SERVER_CPU, ringrpc-load
# (one thread) pinned to LOAD_CPU. Variants:
#   none   no interceptor installed
#   one    INTERCEPTORS no-op interceptor(s) that want no timing (wants_timing() false)
#   timed  the same, asking for start/end (two clock reads a call)
# The goal (issue 28): one no-op interceptor costs at most 3% server CPU per call ("one").
#
# Per variant and round, two measured runs (each after a warm-up run of its own):
#   d16   closed loop, CONNECTIONS connections at depth DEPTH (the server saturated)
#   rate  open loop at RATE calls/s (the server partly idle)
# Server CPU per call = the server process's utime+stime (/proc/PID/stat, all threads) read just
# before and just after the measured run, over the calls that run reports answered (as
# bench/vs_raw_loop.sh). The table gives, per run kind, each variant's median/min/max, and the
# ratios one/none and timed/none taken within each round: median, min, max.
#
#   bench/interceptor_cost.sh                   # 5 rounds of 5 s runs, about 4 minutes
#   QUICK=1 bench/interceptor_cost.sh           # smoke run: tiny durations, 1 round
#   OUT_JSON=/tmp/ic.json ROUNDS=9 DISPATCH=direct bench/interceptor_cost.sh
#
# Environment (all optional):
#   DURATION [5] measured seconds per run   WARMUP [1] seconds of the warm-up run
#   ROUNDS [5]  CONNECTIONS [64]  SIZE [64]  DEPTH [16]  RATE [20k]
#   DISPATCH [all] where echo runs: all (the default pool: user code's path) or direct (reader)
#   INTERCEPTORS [1] interceptors of the "one" variant (e.g. 4 to see the cost per interceptor)
#   SERVER_CPU / LOAD_CPU [0 / 1]  BUILD_DIR [build/bench]  OUT_JSON  KEEP_WORK=1
#
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

if [[ ${QUICK:-0} == 1 ]]; then
  : "${DURATION:=0.5}" "${WARMUP:=0.2}" "${ROUNDS:=1}"
fi
pinned_bench_knobs interceptor_cost.sh
rounds=${ROUNDS:-5}
dispatch=${DISPATCH:-all}
n_one=${INTERCEPTORS:-1}

server_bin=$build_dir/bench/interceptor_server
load_bin=$build_dir/tools/ringrpc-load
bench_need_built interceptor_cost.sh "$build_dir" "$server_bin" "$load_bin"

clk_tck=$(getconf CLK_TCK)
bench_work_dir interceptor_cost

server_lifetime=$(python3 -c "import math; print(math.ceil(4 * ($duration + $warmup + 15) + 30))")  # per variant
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 20))")

# start_variant VARIANT: sets pinned_pid (the server itself, not `timeout`) and port.
start_variant() {
  local n=0 timed=0
  [[ $1 != none ]] && n=$n_one
  [[ $1 == timed ]] && timed=1
  if ! start_pinned_server "$work/server" "$server_lifetime" "$server_cpu" "$server_bin" \
    --interceptors "$n" --timed "$timed" --dispatch "$dispatch" --readers 1 --handlers 1; then
    echo "interceptor_cost.sh: $1 server did not start" >&2
    exit 1
  fi
  port=$listen_port
}

load_failed() {
  echo "interceptor_cost.sh: ringrpc-load failed against $1 ($2): $(tail -3 "$work/load.err")" >&2
  exit 1
}

# measure VARIANT ROUND NAME LOAD-ARGS...: a warm-up run, then the measured run between two
# reads of the server's CPU time.
measure() {
  local variant=$1 round=$2 name=$3
  shift 3
  local url="ringrpc://127.0.0.1:$port/echo"
  local json=$work/$variant.$round.$name.json
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" -s "$size" "$@")
  if awk "BEGIN { exit !($warmup > 0) }"; then
    "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" || load_failed "$variant" "$name"
  fi
  local c0 c1
  c0=$(cpu_ticks "$pinned_pid")
  "${load[@]}" --duration "${duration}s" --warmup 0s --json "$json" "$url" >/dev/null 2>"$work/load.err" ||
    load_failed "$variant" "$name"
  c1=$(cpu_ticks "$pinned_pid")
  echo "$c0 $c1" >"$json.cpu"
  echo "$round $variant $name $json" >>"$work/index"
}

: >"$work/index"
for ((r = 1; r <= rounds; r++)); do
  for v in none one timed; do
    printf 'round %d/%d: %-5s' "$r" "$rounds" "$v" >&2
    start_variant "$v"
    measure "$v" "$r" d16 -c "$connections" -P "$depth"
    measure "$v" "$r" rate -c "$connections" -R "$rate"
    stop_pinned_server
    echo " done" >&2
  done
done

IC_WORK=$work IC_CLK_TCK=$clk_tck IC_OUT_JSON=$out_json IC_CONFIG="$(printf '{"duration_s": %s, "warmup_s": %s, "rounds": %s, "connections": %s, "payload_bytes": %s, "depth": %s, "rate": "%s", "dispatch": "%s", "interceptors_one": %s, "server_cpu": "%s", "load_cpu": "%s"}' \
  "$duration" "$warmup" "$rounds" "$connections" "$size" "$depth" "$rate" "$dispatch" "$n_one" "$server_cpu" "$load_cpu")" \
python3 - <<'PY'
import json, os, statistics
e = os.environ
work, clk_tck, out_json = e["IC_WORK"], int(e["IC_CLK_TCK"]), e["IC_OUT_JSON"]
config = json.loads(e["IC_CONFIG"])

def cpu_us_per_call(path):
    j = json.load(open(path))
    c0, c1 = (float(x) for x in open(path + ".cpu").read().split())
    calls = j["calls_ok"]
    errors = sum(j["errors"].values())
    return ((c1 - c0) / clk_tck * 1e6 / calls if calls > 0 else float("nan")), calls, errors

runs = {}
for line in open(os.path.join(work, "index")):
    r, v, name, path = line.split()
    runs[(int(r), v, name)] = path
rounds = sorted({k[0] for k in runs})

result = {"config": config, "per_round": [], "summary": {}}
for r in rounds:
    row = {}
    for v in ("none", "one", "timed"):
        for name in ("d16", "rate"):
            us, calls, errors = cpu_us_per_call(runs[(r, v, name)])
            row[f"{v}_{name}"] = {"cpu_us_per_call": us, "calls": calls, "errors": errors}
    result["per_round"].append(row)

def mmm(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

print(f"\nserver CPU per call (us), {config['rounds']} rounds of {config['duration_s']} s, "
      f"dispatch={config['dispatch']}, {config['interceptors_one']} no-op interceptor(s); "
      f"each cell median/min/max; goal: one/none <= 1.03")
print(f"{'run':<22}{'none':>20}{'one':>20}{'timed':>20}{'one/none':>22}{'timed/none':>22}")
f = lambda m, d=2: f"{m['median']:.{d}f}/{m['min']:.{d}f}/{m['max']:.{d}f}"
for name, label in (("d16", f"depth {config['depth']} (saturated)"), ("rate", f"{config['rate']}/s open loop")):
    per = {v: mmm(pr[f"{v}_{name}"]["cpu_us_per_call"] for pr in result["per_round"]) for v in ("none", "one", "timed")}
    ratio = {v: mmm(pr[f"{v}_{name}"]["cpu_us_per_call"] / pr[f"none_{name}"]["cpu_us_per_call"]
                    for pr in result["per_round"] if pr[f"none_{name}"]["cpu_us_per_call"] > 0)
             for v in ("one", "timed")}
    errors = sum(pr[f"{v}_{name}"]["errors"] for pr in result["per_round"] for v in ("none", "one", "timed"))
    result["summary"][name] = {"us": per, "ratio_to_none": ratio, "errors": errors,
                               "goal_met": ratio["one"]["median"] <= 1.03}
    print(f"{label:<22}{f(per['none']):>20}{f(per['one']):>20}{f(per['timed']):>20}"
          f"{f(ratio['one'], 3):>22}{f(ratio['timed'], 3):>22}" + (f"  ({errors} errors)" if errors else ""))
if out_json:
    with open(out_json, "w") as fh:
        json.dump(result, fh, indent=1)
PY

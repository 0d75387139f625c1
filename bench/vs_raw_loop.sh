#!/usr/bin/env bash
# ringrpc-server against a raw io_uring echo loop (bench/raw_echo_loop.cpp) on one server core:
# every figure of the per-core goals as a ratio to the raw loop measured in the same round.
#
# Variants, alternated within each round (raw, handoff-sys, handoff-ring, direct, pool, raw, ...):
#   raw     build/.../bench/raw_echo_loop, driven as echo://127.0.0.1:P
#   handoff-sys   raw_echo_loop --handoff syscalls: the same loop handing each turn's echoes to a
#                 worker thread that sends them with send(2) and parks with futex(2)
#                 (bench/raw_handoff.hpp): the bare form of ringrpc's pool path
#   handoff-ring  --handoff ring: the worker's sends and its park in one io_uring_enter, the
#                 least a worker thread can cost (Linux 6.7+; else sends in one enter, futex(2))
#   The handoffs are the floor of any server that runs user code on a thread of its own; a
#   second table gives pool / each handoff, what ringrpc's pool path adds to that floor.
#   direct  ringrpc-server --dispatch=direct: the built-in echo answered on the reader
#   pool    ringrpc-server --dispatch=all: the same echo through the default pool (user code's path)
# Each variant gets one fresh server per round, pinned to SERVER_CPU; ringrpc-load (one thread)
# is pinned to LOAD_CPU. 64 connections, 64-byte payloads. Per variant and round:
#   calls/s at depth 1 and at depth 16 (closed loop)
#   server CPU per call at depth-16 saturation and at a fixed open-loop 20k calls/s: the server
#     process's utime+stime (/proc/PID/stat, all threads) read just before and just after the
#     measured run (its warm-up is a separate run), divided by the calls that run reports answered
#   ping-pong: 1 connection, 1 call at a time, p50 and p99 latency
# Once per round, bench/idle_connections.py measures server RSS per idle connection for both.
#
#   bench/vs_raw_loop.sh                       # 3 rounds of 5 s runs, about 4 minutes
#   QUICK=1 bench/vs_raw_loop.sh               # smoke run, about 30 s
#   OUT_JSON=/tmp/vs.json ROUNDS=5 bench/vs_raw_loop.sh
#   BASELINE_BUILD_DIR=/tmp/old/build/bench ROUNDS=5 bench/vs_raw_loop.sh   # this build against another
#
# Environment (all optional):
#   DURATION [5] measured seconds per run      WARMUP [1] seconds excluded before each run
#   ROUNDS [3]   CONNECTIONS [64]  SIZE [64]   DEPTH [16]   RATE [20k] open-loop rate
#   SERVER_CPU / LOAD_CPU [0 / 1]              BUILD_DIR [build/bench]
#   CONNECTIONS_IDLE [10000] (0 skips the idle-memory step)   IDLE_ROUNDS [1]
#   OUT_JSON     also write every figure, per round and summarised, to this file
#   BASELINE_BUILD_DIR  a second build (e.g. of the previous commit): its ringrpc-server runs as
#                the variants direct-base and pool-base, alternated with this build's in every
#                round, and a second table gives this build / baseline per figure (median, min, max)
#   HANDOFF ["sys ring"] the handoff variants to run; HANDOFF= (empty) runs neither
#   KEEP_WORK=1  keep the directory of raw ringrpc-load JSONs and CPU samples
#   QUICK=1      DURATION=1 WARMUP=0.3 ROUNDS=1 CONNECTIONS_IDLE=2000 unless set
#
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

if [[ ${QUICK:-0} == 1 ]]; then
  : "${DURATION:=1}" "${WARMUP:=0.3}" "${ROUNDS:=1}" "${CONNECTIONS_IDLE:=2000}"
fi
pinned_bench_knobs vs_raw_loop.sh
rounds=${ROUNDS:-3}
idle_connections=${CONNECTIONS_IDLE:-10000}
idle_rounds=${IDLE_ROUNDS:-1}

raw_bin=$(raw_loop_bin "$build_dir")
server_bin=$build_dir/tools/ringrpc-server
load_bin=$build_dir/tools/ringrpc-load
baseline_dir=${BASELINE_BUILD_DIR:-}
base_server_bin=${baseline_dir:+$baseline_dir/tools/ringrpc-server}
bench_need_built vs_raw_loop.sh "$build_dir" "$raw_bin" "$server_bin" "$load_bin" ${base_server_bin:+"$base_server_bin"}

clk_tck=$(getconf CLK_TCK)
bench_work_dir vs_raw_loop

# Seconds a server must live: four load runs and two warm-up runs, with start-up and slack.
server_lifetime=$(python3 -c "import math; print(math.ceil(6 * ($duration + $warmup + 15) + 30))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 20))")

# start_variant VARIANT: sets pinned_pid (the server itself, not `timeout`) and port.
start_variant() {
  local -a cmd
  case $1 in
    raw) cmd=("$raw_bin" --port 0) ;;
    handoff-sys) cmd=("$raw_bin" --port 0 --handoff syscalls) ;;
    handoff-ring) cmd=("$raw_bin" --port 0 --handoff ring) ;;
    direct) cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=direct) ;;
    pool) cmd=("$server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=all) ;;
    direct-base) cmd=("$base_server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=direct) ;;
    pool-base) cmd=("$base_server_bin" --port 0 --readers 1 --handlers 1 --log-level error --dispatch=all) ;;
  esac
  if ! start_pinned_server "$work/server" "$server_lifetime" "$server_cpu" "${cmd[@]}"; then
    echo "vs_raw_loop.sh: $1 server did not start" >&2
    exit 1
  fi
  port=$listen_port
  if [[ $1 == raw* || $1 == handoff* ]] && [[ ! -s $work/features.$1 ]]; then
    grep '^raw_echo_loop: setup=' "$work/server.err" >"$work/features.$1" || true
  fi
}

# measure VARIANT ROUND NAME CPU(0|1) LOAD-ARGS...: one measured ringrpc-load run. With CPU=1 the
# warm-up is a run of its own and the measured run has none, so the server's CPU read just before
# and just after the measured run covers the calls it reports (plus one set of connects and the
# calls in flight at its end: noise against a run of seconds). Sleeping into a run instead would
# guess at ringrpc-load's start-up time, which is long and erratic on a busy machine.
measure() {
  local variant=$1 round=$2 name=$3 want_cpu=$4
  shift 4
  local url="ringrpc://127.0.0.1:$port/echo"
  [[ $variant == raw || $variant == handoff-* ]] && url="echo://127.0.0.1:$port"
  local json=$work/$variant.$round.$name.json
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" -s "$size" "$@")
  if ((want_cpu)); then
    if awk "BEGIN { exit !($warmup > 0) }"; then
      "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" || load_failed "$variant" "$name"
    fi
    local c0 c1 t0 t1 l0 l1
    c0=$(cpu_ticks "$pinned_pid")
    children_cpu_s
    l0=$children_s
    t0=$EPOCHREALTIME
    "${load[@]}" --duration "${duration}s" --warmup 0s --json "$json" "$url" >/dev/null 2>"$work/load.err" ||
      load_failed "$variant" "$name"
    t1=$EPOCHREALTIME
    c1=$(cpu_ticks "$pinned_pid")
    children_cpu_s
    l1=$children_s
    # The load's CPU time says whether ringrpc-load, rather than the server, was the limit.
    echo "$t0 $c0 $t1 $c1 $l0 $l1" >"$json.cpu"
  else
    "${load[@]}" --duration "${duration}s" --warmup "${warmup}s" --json "$json" "$url" >/dev/null 2>"$work/load.err" ||
      load_failed "$variant" "$name"
  fi
  echo "$round $variant $name $json" >>"$work/index"
}
load_failed() {
  echo "vs_raw_loop.sh: ringrpc-load failed against $1 ($2): $(tail -3 "$work/load.err")" >&2
  exit 1
}

# Idle memory, raw then ringrpc, once per round: 10,000 connections take a few seconds each.
: >"$work/idle"
if ((idle_connections > 0)); then
  hard=$(ulimit -Hn)
  if [[ $hard != unlimited ]] && ((idle_connections + 64 > hard)); then
    idle_connections=$((hard - 64))
    echo "vs_raw_loop.sh: RLIMIT_NOFILE hard limit $hard: holding $idle_connections idle connections" >&2
  fi
fi
idle_step() {
  ((idle_connections > 0)) || return 0
  local v bin value
  for v in raw ringrpc; do
    bin=$server_bin
    [[ $v == raw ]] && bin=$raw_bin
    printf 'round %d/%d: idle memory, %s, %d connections\n' "$1" "$rounds" "$v" "$idle_connections" >&2
    value=$(timeout $((60 + idle_connections * idle_rounds / 100)) python3 bench/idle_connections.py "$bin" \
      --connections "$idle_connections" --rounds "$idle_rounds" |
      sed -n 's/.*per connection: median \([0-9.-]*\) B.*/\1/p' || true)
    echo "$1 $v ${value:-nan}" >>"$work/idle"
  done
}

variants=(raw direct pool)
[[ -n $baseline_dir ]] && variants=(raw direct direct-base pool pool-base)
read -r -a handoffs <<<"${HANDOFF-sys ring}"
for h in "${handoffs[@]}"; do
  [[ $h == sys || $h == ring ]] || { echo "vs_raw_loop.sh: HANDOFF holds '$h', not sys or ring" >&2; exit 2; }
done
variants=(raw "${handoffs[@]/#/handoff-}" "${variants[@]:1}")
for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    printf 'round %d/%d: %-11s' "$r" "$rounds" "$v" >&2
    start_variant "$v"
    measure "$v" "$r" d1 0 -c "$connections" -P 1
    measure "$v" "$r" d16 1 -c "$connections" -P "$depth"
    measure "$v" "$r" rate 1 -c "$connections" -R "$rate"
    measure "$v" "$r" pingpong 0 -c 1 -P 1
    stop_pinned_server
    echo " done" >&2
  done
  idle_step "$r"
done

VS_WORK=$work VS_CLK_TCK=$clk_tck VS_OUT_JSON=$out_json VS_IDLE=$idle_connections VS_DURATION=$duration \
VS_WARMUP=$warmup VS_ROUNDS=$rounds VS_CONNECTIONS=$connections VS_SIZE=$size VS_DEPTH=$depth \
VS_RATE=$rate VS_SERVER_CPU=$server_cpu VS_LOAD_CPU=$load_cpu VS_VARIANTS="${variants[*]}" \
VS_BASELINE="$baseline_dir" python3 - <<'PY'
import json, os, statistics, time
e = os.environ
work, clk_tck, out_json, idle_n = e["VS_WORK"], int(e["VS_CLK_TCK"]), e["VS_OUT_JSON"], int(e["VS_IDLE"])
rate = e["VS_RATE"]
config = {"duration_s": float(e["VS_DURATION"]), "warmup_s": float(e["VS_WARMUP"]),
          "rounds": int(e["VS_ROUNDS"]), "connections": int(e["VS_CONNECTIONS"]),
          "payload_bytes": e["VS_SIZE"], "depth": int(e["VS_DEPTH"]), "rate": rate,
          "server_cpu": e["VS_SERVER_CPU"], "load_cpu": e["VS_LOAD_CPU"], "idle_connections": idle_n,
          "clk_tck": clk_tck}

# (key, label, unit, from which run, how, goal as (op, ratio))
metrics = [
    ("calls_per_sec_d1", "calls/s, depth 1", "calls/s", "d1", "rate", (">=", 0.9)),
    ("calls_per_sec_d16", "calls/s, depth 16", "calls/s", "d16", "rate", (">=", 0.9)),
    ("cpu_us_per_call_20k", f"CPU per call at {rate}/s", "us", "rate", "cpu", ("<=", 1.25)),
    ("cpu_us_per_call_d16", "CPU per call, depth 16", "us", "d16", "cpu", ("<=", 1.25)),
    ("pingpong_p50_us", "ping-pong p50", "us", "pingpong", "p50", ("<=", 1.2)),
    ("pingpong_p99_us", "ping-pong p99", "us", "pingpong", "p99", ("<=", 1.2)),
]

def figure(path, how):
    j = json.load(open(path))
    if how == "rate":
        return j["calls_per_sec"]
    if how in ("p50", "p99"):
        return j["latency_us"][how]
    _, c0, _, c1, _, _ = (float(x) for x in open(path + ".cpu").read().split())
    calls = j["calls_ok"]
    return (c1 - c0) / clk_tck * 1e6 / calls if calls > 0 else float("nan")

runs = {}  # (round, variant, run) -> json path
for line in open(os.path.join(work, "index")):
    r, v, name, path = line.split()
    runs[(int(r), v, name)] = path
rounds = sorted({k[0] for k in runs})
variants = e["VS_VARIANTS"].split()
baseline = e["VS_BASELINE"]
config["variants"] = variants
if baseline:
    config["baseline_build_dir"] = baseline

per_round = []
for r in rounds:
    row = {}
    for v in variants:
        row[v] = {key: figure(runs[(r, v, run)], how) for key, _, _, run, how, _ in metrics}
        t0, c0, t1, c1, l0, l1 = (float(x) for x in open(runs[(r, v, "d16")] + ".cpu").read().split())
        measured_s = json.load(open(runs[(r, v, "d16")]))["measured_s"]
        row[v]["server_busy_d16"] = (c1 - c0) / clk_tck / measured_s  # of one CPU: 1.0 = saturated
        # ringrpc-load's whole process life (start-up included) over the same wall time
        row[v]["load_busy_d16"] = (l1 - l0) / (t1 - t0)
        fixed = json.load(open(runs[(r, v, "rate")]))
        row[v]["fixed_rate_requested"] = fixed["requested_rate"]
        row[v]["fixed_rate_achieved"] = fixed["achieved_rate"]
        row[v]["errors"] = sum(sum(json.load(open(runs[(r, v, n)]))["errors"].values()) for n in ("d1", "d16", "rate", "pingpong"))
    per_round.append(row)

handoffs = [v for v in ("handoff-sys", "handoff-ring") if v in variants]
shown = handoffs + ["direct", "pool"]
summary = {}
for key, label, unit, _, _, goal in metrics:
    summary[key] = {"label": label, "unit": unit, "goal": {"op": goal[0], "ratio": goal[1]},
                    "raw_median": statistics.median(pr["raw"][key] for pr in per_round)}
    for v in shown:
        ratios = [pr[v][key] / pr["raw"][key] for pr in per_round if pr["raw"][key]]
        med = statistics.median(ratios) if ratios else float("nan")
        met = med >= goal[1] if goal[0] == ">=" else med <= goal[1]
        summary[key][v] = {"median": statistics.median(pr[v][key] for pr in per_round),
                           "ratio_median": med, "ratio_min": min(ratios, default=float("nan")),
                           "ratio_max": max(ratios, default=float("nan")), "goal_met": met}
        if baseline and v in ("direct", "pool"):
            vs = [pr[v][key] / pr[v + "-base"][key] for pr in per_round if pr[v + "-base"][key]]
            summary[key][v + "_vs_baseline"] = {
                "baseline_median": statistics.median(pr[v + "-base"][key] for pr in per_round),
                "ratio_median": statistics.median(vs) if vs else float("nan"),
                "ratio_min": min(vs, default=float("nan")), "ratio_max": max(vs, default=float("nan"))}
    for h in handoffs:
        vs = [pr["pool"][key] / pr[h][key] for pr in per_round if pr[h][key]]
        summary[key]["pool_vs_" + h] = {
            "ratio_median": statistics.median(vs) if vs else float("nan"),
            "ratio_min": min(vs, default=float("nan")), "ratio_max": max(vs, default=float("nan"))}

idle_rounds = {}
for line in open(os.path.join(work, "idle")):
    _, v, val = line.split()
    if val != "nan":
        idle_rounds.setdefault(v, []).append(float(val))
idle = {v: statistics.median(vals) for v, vals in idle_rounds.items()}
if idle:
    summary["idle_rss_bytes_per_connection"] = {
        "label": f"RSS per idle connection ({idle_n:,} held)", "unit": "B",
        "goal": {"op": "<=", "bytes": 256}, "raw": idle.get("raw"), "ringrpc": idle.get("ringrpc"),
        "per_round": idle_rounds, "goal_met": idle.get("ringrpc", float("inf")) <= 256}

def features(v):
    fp = os.path.join(work, "features." + v)
    return open(fp).read().strip().removeprefix("raw_echo_loop: ") if os.path.exists(fp) else ""
raw_features = features("raw")

def num(x, unit):
    if x != x:
        return "n/a"
    if unit == "calls/s":
        return f"{x:,.0f}"
    return f"{x:.2f}" if x < 100 else f"{x:,.0f}"

print()
print(f"{len(rounds)} round(s) of {config['duration_s']} s per run; server on CPU {config['server_cpu']}, "
      f"load on CPU {config['load_cpu']}; {config['connections']} connections, {config['payload_bytes']} B payloads")
if raw_features:
    print(f"raw loop ring: {raw_features}")
for h in handoffs:
    print(f"{h}: {features(h).split(' handoff_', 1)[-1].replace(' handoff_', ', ')}")
width = {v: max(11, len(v) + 2) for v in shown}
hdr = f"{'figure':<24}{'raw':>11}" + "".join(f"{v:>{width[v]}}{'ratio':>7}{'min':>6}{'max':>6}" for v in shown) + "  goal (direct/pool)"
print(hdr)
print("-" * len(hdr))
for key, label, unit, _, _, goal in metrics:
    s = summary[key]
    cells = f"{label:<24}{num(s['raw_median'], unit):>11}"
    for v in shown:
        d = s[v]
        cells += f"{num(d['median'], unit):>{width[v]}}{d['ratio_median']:>7.2f}{d['ratio_min']:>6.2f}{d['ratio_max']:>6.2f}"
    marks = "/".join("ok" if s[v]["goal_met"] else "NO" for v in ("direct", "pool"))
    cells += f"  {goal[0]} {goal[1]}x ({marks})"
    print(cells)
if idle:
    s = summary["idle_rss_bytes_per_connection"]
    fmt = lambda x: "n/a" if x is None or x != x else f"{x:,.0f} B"
    spread = lambda v: (f" {min(idle_rounds[v]):,.0f}-{max(idle_rounds[v]):,.0f}" if len(idle_rounds.get(v, [])) > 1 else "")
    spreads = f"; min-max raw{spread('raw')}, ringrpc{spread('ringrpc')}" if len(idle_rounds.get("raw", [])) > 1 else ""
    print(f"{'idle RSS/connection':<24}{fmt(s['raw']):>11}{fmt(s['ringrpc']):>11}  (ringrpc, any dispatch; "
          f"{idle_n:,} held{spreads})"
          f"  <= 256 B ({'ok' if s['goal_met'] else 'NO'})")
if handoffs:
    print()
    print("pool / handoff, same rounds: what ringrpc's pool path adds to a bare hand-off to a worker thread")
    print(f"{'figure':<24}{'pool':>11}" + "".join(f"{h:>13}{'ratio':>7}{'min':>6}{'max':>6}" for h in handoffs))
    for key, label, unit, _, _, _ in metrics:
        s = summary[key]
        cells = f"{label:<24}{num(s['pool']['median'], unit):>11}"
        for h in handoffs:
            d = s["pool_vs_" + h]
            cells += f"{num(s[h]['median'], unit):>13}{d['ratio_median']:>7.2f}{d['ratio_min']:>6.2f}{d['ratio_max']:>6.2f}"
        print(cells)
if baseline:
    print()
    print(f"this build / baseline ({baseline}), same rounds; lower CPU and latency, higher calls/s is better")
    hdr2 = f"{'figure':<24}{'direct':>11}{'base':>11}{'ratio':>7}{'min':>6}{'max':>6}{'pool':>11}{'base':>11}{'ratio':>7}{'min':>6}{'max':>6}"
    print(hdr2)
    print("-" * len(hdr2))
    for key, label, unit, _, _, _ in metrics:
        s = summary[key]
        cells = f"{label:<24}"
        for v in ("direct", "pool"):
            b = s[v + "_vs_baseline"]
            cells += (f"{num(s[v]['median'], unit):>11}{num(b['baseline_median'], unit):>11}"
                      f"{b['ratio_median']:>7.3f}{b['ratio_min']:>6.2f}{b['ratio_max']:>6.2f}")
        print(cells)
for pr_i, pr in enumerate(per_round, 1):
    for v in variants:
        if pr[v]["errors"]:
            print(f"warning: round {pr_i} {v}: {pr[v]['errors']} calls failed")
        got, asked = pr[v]["fixed_rate_achieved"], pr[v]["fixed_rate_requested"]
        if got < 0.95 * asked:
            print(f"warning: round {pr_i} {v}: the fixed-rate run reached only {got:,.0f} of {asked:,.0f} calls/s")
busy = {v: statistics.median(pr[v]["server_busy_d16"] for pr in per_round) for v in variants}
load_busy = {v: statistics.median(pr[v]["load_busy_d16"] for pr in per_round) for v in variants}
print("CPU busy at depth 16 (1.00 = a core saturated): server " +
      ", ".join(f"{v} {busy[v]:.2f}" for v in variants) + "; ringrpc-load " +
      ", ".join(f"{v} {load_busy[v]:.2f}" for v in variants))
if busy["raw"] < 0.9:
    why = ("ringrpc-load's core was" if load_busy["raw"] >= 0.9 else
           "neither its core nor ringrpc-load's was saturated: other processes on these CPUs were")
    print(f"note: the raw loop's core was not saturated at depth 16 ({why} the limit), so depth-16 calls/s"
          " ratios say little about the servers")
print("ratio = variant / raw loop in the same round; the table gives the median over rounds with min and max;")
print("absolute columns are each variant's median over rounds. CPU = server utime+stime / calls answered.")

if out_json:
    doc = {"benchmark": "vs_raw_loop", "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "config": config, "raw_loop_ring": raw_features,
           "handoff_setup": {h: features(h) for h in handoffs}, "summary": summary,
           "server_busy_d16": busy, "load_busy_d16": load_busy, "rounds": per_round}
    def clean(x):  # JSON has no NaN: a figure that could not be computed is null
        if isinstance(x, float) and x != x:
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    with open(out_json, "w") as f:
        json.dump(clean(doc), f, indent=2)
    print(f"wrote {out_json}")
PY

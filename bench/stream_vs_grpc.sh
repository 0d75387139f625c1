#!/usr/bin/env bash
# ringrpc's bidi streams against gRPC's, per server core: ringrpc-server's built-in echo_stream
# and grpc_echo_server's Echo.Chat (libgrpc++'s callback API: tests/load/grpc_echo_server.cpp),
# each server pinned to SERVER_CPU, ringrpc-load pinned to LOAD_CPU driving CONNECTIONS streams x
# DEPTH messages in flight (`--stream -c 8 -P 16`: ringrpc:// and grpc:// alike, the same load
# tool and engine on both sides). grpc_echo_server runs --callback-only: every method a callback
# method and no sync pollers, so no idle thread pool stands beside the one Chat runs on (gRPC
# still sizes its own pools by the machine's CPUs, not the pinning: the threads are printed).
# Rounds alternate which server goes first; each round starts both afresh. Per run: a warm-up
# run, then the measured run with --server-pid, whose server_cost charges the server's CPU time
# (utime+stime of all its threads) over the load's own measured window. Printed per run:
# messages/s per server core (1 / server CPU per message), server_busy (the server's cores over
# that window: below ~0.9 the server was not the limit), the load's CPU seconds and load_busy
# (ringrpc-load's CPU over its wall time, from the shell's `times`: above ~0.9 the load's core
# may have been the limit), the server's threads and context switches in the run (voluntary /
# involuntary, summed over /proc/PID/task/*/status); rows outside those bounds are flagged.
# Then ringrpc/gRPC as median (min, max) over the rounds. Messages are SIZE bytes: the ringrpc
# payload, and the gRPC request's text field (SIZE + 2 bytes of protobuf).
#
#   bench/stream_vs_grpc.sh                    # 5 rounds of 5 s runs per server
#   QUICK=1 bench/stream_vs_grpc.sh            # smoke run: 1 round of 0.5 s runs
#   ROUNDS=9 DURATION=10 OUT_JSON=/tmp/svg.json bench/stream_vs_grpc.sh
#
# Environment (all optional): ROUNDS [5], DURATION [5] measured seconds per run, WARMUP [1] s,
# CONNECTIONS [8], DEPTH [16], SIZE [64], SERVER_CPU / LOAD_CPU [0 / 1], BUILD_DIR
# [build/release] (built with tests, for tests/grpc_echo_server), OUT_JSON, KEEP_WORK=1.
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

if [[ ${QUICK:-0} == 1 ]]; then
  : "${DURATION:=0.5}" "${WARMUP:=0.2}" "${ROUNDS:=1}"
fi
: "${CONNECTIONS:=8}" "${BUILD_DIR:=build/release}"
pinned_bench_knobs stream_vs_grpc.sh
rounds=${ROUNDS:-5}

ringrpc_bin=$build_dir/tools/ringrpc-server
grpc_bin=$build_dir/tests/grpc_echo_server
load_bin=$build_dir/tools/ringrpc-load
for b in "$ringrpc_bin" "$grpc_bin" "$load_bin"; do
  [[ -x $b ]] || { echo "stream_vs_grpc.sh: $b is missing; build $build_dir with tests (and gRPC's dev packages)" >&2; exit 2; }
done

bench_work_dir stream_vs_grpc
server_lifetime=$(python3 -c "import math; print(math.ceil(2 * ($duration + $warmup) + 60))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 30))")
text=$(python3 -c "print('x' * $size)")

# start_target WHICH: the server pinned (pinned_pid) and the URL and message flags to load it with.
start_target() {
  if [[ $1 == ringrpc ]]; then
    start_pinned_server "$work/ringrpc" "$server_lifetime" "$server_cpu" "$ringrpc_bin" --port 0 --log-level error ||
      { echo "stream_vs_grpc.sh: ringrpc-server did not start" >&2; exit 1; }
    url="ringrpc://127.0.0.1:$listen_port/echo_stream" message=(-s "$size")
  else
    start_pinned_server "$work/grpc" "$server_lifetime" "$server_cpu" "$grpc_bin" --callback-only ||
      { echo "stream_vs_grpc.sh: grpc_echo_server did not start" >&2; exit 1; }
    url="grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat"
    message=(--proto tests/load/echo.proto --data "{\"text\": \"$text\"}")
  fi
}

# threads_and_switches PID: "THREADS VOLUNTARY INVOLUNTARY", the context switches summed over the
# process's threads (/proc/PID/status alone has the main thread's; a thread that ended is lost).
threads_and_switches() {
  awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }' \
    /proc/"$1"/task/*/status 2>/dev/null | { read -r v n; echo "$(awk '/^Threads:/ { print $2 }' /proc/"$1"/status) $v $n"; }
}

# measure WHICH ROUND: a warm-up run, then the measured run, charged the server's CPU by
# --server-pid over the load's own measured window (server_cost), and timed for its own CPU.
measure() {
  local json=$work/$1.$2.json t0 t1 l0 l1 s0 s1
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" --stream -c "$connections" -P "$depth"
    "${message[@]}")
  if awk "BEGIN { exit !($warmup > 0) }"; then
    "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" ||
      { echo "stream_vs_grpc.sh: the warm-up against $1 failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  fi
  s0=$(threads_and_switches "$pinned_pid")
  children_cpu_s
  l0=$children_s
  t0=$EPOCHREALTIME
  "${load[@]}" --duration "${duration}s" --warmup 0s --server-pid "$pinned_pid" --json "$json" "$url" \
    >/dev/null 2>"$work/load.err" ||
    { echo "stream_vs_grpc.sh: ringrpc-load against $1 failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  t1=$EPOCHREALTIME
  children_cpu_s
  l1=$children_s
  s1=$(threads_and_switches "$pinned_pid")
  echo "$2 $1 $json $t0 $t1 $l0 $l1 $s0 $s1" >>"$work/index"
}

: >"$work/index"
for ((r = 1; r <= rounds; r++)); do
  order=(ringrpc grpc)
  if ((r % 2 == 0)); then order=(grpc ringrpc); fi
  for which in "${order[@]}"; do
    printf 'round %d/%d: %-7s' "$r" "$rounds" "$which" >&2
    start_target "$which"
    measure "$which" "$r"
    stop_pinned_server
    echo " done" >&2
  done
done

SVG_WORK=$work SVG_OUT_JSON=$out_json SVG_CONFIG="$(printf '{"rounds": %s, "duration_s": %s, "warmup_s": %s, "connections": %s, "depth": %s, "size": %s, "server_cpu": "%s", "load_cpu": "%s"}' \
  "$rounds" "$duration" "$warmup" "$connections" "$depth" "$size" "$server_cpu" "$load_cpu")" \
python3 - <<'PY'
import json, os, statistics
e = os.environ
work, out_json = e["SVG_WORK"], e["SVG_OUT_JSON"]
config = json.loads(e["SVG_CONFIG"])
runs = {}
for line in open(os.path.join(work, "index")):
    r, which, path, t0, t1, l0, l1, th0, v0, n0, th1, v1, n1 = line.split()
    j = json.load(open(path))
    cost = j.get("server_cost", {})
    if "cpu_us_per_call" not in cost:
        raise SystemExit(f"stream_vs_grpc.sh: {path} has no server CPU figure: {cost.get('note', 'no server_cost')}")
    load_cpu_s = float(l1) - float(l0)
    runs[(int(r), which)] = {"messages": j["calls_ok"], "errors": sum(j["errors"].values()),
                             "streams_failed": j.get("streams_failed", 0), "server_cpu_s": cost["cpu_s"],
                             "server_window_s": cost["window_s"], "server_busy": cost["cores"],
                             "messages_per_core_s": 1e6 / cost["cpu_us_per_call"] if cost["cpu_us_per_call"] > 0
                             else float("nan"),
                             "load_cpu_s": load_cpu_s, "load_busy": load_cpu_s / (float(t1) - float(t0)),
                             "server_threads": int(th1), "server_voluntary_switches": int(v1) - int(v0),
                             "server_involuntary_switches": int(n1) - int(n0)}
rounds = sorted({k[0] for k in runs})
print(f"\n{config['connections']} streams x {config['depth']} in flight, {config['size']}-byte messages, "
      f"{config['duration_s']} s per run; server on CPU {config['server_cpu']}, ringrpc-load on CPU {config['load_cpu']}")
print(f"{'round':>5} {'server':<8} {'messages':>10} {'cpu s':>6} {'busy':>5} {'msgs/core-s':>11} {'load cpu s':>10} "
      f"{'load busy':>9} {'threads':>7} {'switches vol/invol':>20}")
flagged = 0
for r in rounds:
    for w in ("ringrpc", "grpc"):
        x = runs[(r, w)]
        flags = []
        if x["server_busy"] < 0.9:
            flags.append("server < 0.9 busy")
        if x["load_busy"] > 0.9:
            flags.append("load core > 0.9 busy")
        if x["errors"] + x["streams_failed"]:
            flags.append(f"{x['errors'] + x['streams_failed']} errors or failed streams")
        flagged += bool(flags)
        switches = f"{x['server_voluntary_switches']}/{x['server_involuntary_switches']}"
        print(f"{r:>5} {w:<8} {x['messages']:>10} {x['server_cpu_s']:>6.2f} {x['server_busy']:>5.2f} "
              f"{x['messages_per_core_s']:>11.0f} {x['load_cpu_s']:>10.2f} {x['load_busy']:>9.2f} "
              f"{x['server_threads']:>7} {switches:>20}" + (f"  ! {'; '.join(flags)}" if flags else ""))
ratios = [runs[(r, "ringrpc")]["messages_per_core_s"] / runs[(r, "grpc")]["messages_per_core_s"] for r in rounds]
print("ratio per round (ringrpc/gRPC msgs/core-s): " + ", ".join(f"{x:.2f}" for x in ratios))
if flagged:
    print(f"{flagged} run(s) flagged !: a server under ~0.9 busy was not saturated (the load, or its core, "
          "held it back), and its messages per core-s are not a server-bound figure")
per = lambda w: statistics.median(runs[(r, w)]["messages_per_core_s"] for r in rounds)
print(f"messages/s per server core: ringrpc median {per('ringrpc'):.0f}, gRPC median {per('grpc'):.0f}")
print(f"ringrpc/gRPC: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
if out_json:
    with open(out_json, "w") as fh:
        json.dump({"config": config, "per_round": [{w: runs[(r, w)] for w in ("ringrpc", "grpc")} for r in rounds],
                   "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}}, fh, indent=1)
PY

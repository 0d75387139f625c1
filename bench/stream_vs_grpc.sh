#!/usr/bin/env bash
# ringrpc's bidi streams against gRPC's, per server core: ringrpc-server's built-in echo_stream
# and grpc_echo_server's Echo.Chat (libgrpc++'s callback API: tests/load/grpc_echo_server.cpp),
# each server pinned to SERVER_CPU, ringrpc-load pinned to LOAD_CPU driving CONNECTIONS streams x
# DEPTH messages in flight (`--stream -c 8 -P 16`: ringrpc:// and grpc:// alike, the same load
# tool and engine on both sides). Rounds alternate which server goes first; each round starts
# both afresh. Per run: a warm-up run, then the measured run between two reads of the server's
# CPU time (utime+stime of all its threads, /proc/PID/stat), over the messages that run reports
# answered (calls_ok). Printed: messages/s per server core (answered / server CPU seconds) for
# each, and ringrpc/gRPC as median (min, max) over the rounds. Messages are SIZE bytes: the
# ringrpc payload, and the gRPC request's text field (SIZE + 2 bytes of protobuf).
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

clk_tck=$(getconf CLK_TCK)
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
    start_pinned_server "$work/grpc" "$server_lifetime" "$server_cpu" "$grpc_bin" ||
      { echo "stream_vs_grpc.sh: grpc_echo_server did not start" >&2; exit 1; }
    url="grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat"
    message=(--proto tests/load/echo.proto --data "{\"text\": \"$text\"}")
  fi
}

# measure WHICH ROUND: a warm-up run, then the measured run between two reads of the server's CPU.
measure() {
  local json=$work/$1.$2.json c0 c1
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" --stream -c "$connections" -P "$depth"
    "${message[@]}")
  if awk "BEGIN { exit !($warmup > 0) }"; then
    "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" ||
      { echo "stream_vs_grpc.sh: the warm-up against $1 failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  fi
  c0=$(cpu_ticks "$pinned_pid")
  "${load[@]}" --duration "${duration}s" --warmup 0s --json "$json" "$url" >/dev/null 2>"$work/load.err" ||
    { echo "stream_vs_grpc.sh: ringrpc-load against $1 failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  c1=$(cpu_ticks "$pinned_pid")
  echo "$2 $1 $((c1 - c0)) $json" >>"$work/index"
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

SVG_WORK=$work SVG_CLK_TCK=$clk_tck SVG_OUT_JSON=$out_json SVG_CONFIG="$(printf '{"rounds": %s, "duration_s": %s, "warmup_s": %s, "connections": %s, "depth": %s, "size": %s, "server_cpu": "%s", "load_cpu": "%s"}' \
  "$rounds" "$duration" "$warmup" "$connections" "$depth" "$size" "$server_cpu" "$load_cpu")" \
python3 - <<'PY'
import json, os, statistics
e = os.environ
work, clk_tck, out_json = e["SVG_WORK"], int(e["SVG_CLK_TCK"]), e["SVG_OUT_JSON"]
config = json.loads(e["SVG_CONFIG"])
runs = {}
for line in open(os.path.join(work, "index")):
    r, which, ticks, path = line.split()
    j = json.load(open(path))
    cpu_s = int(ticks) / clk_tck
    runs[(int(r), which)] = {"messages": j["calls_ok"], "errors": sum(j["errors"].values()),
                             "streams_failed": j.get("streams_failed", 0), "server_cpu_s": cpu_s,
                             "messages_per_core_s": j["calls_ok"] / cpu_s if cpu_s > 0 else float("nan")}
rounds = sorted({k[0] for k in runs})
print(f"\n{config['connections']} streams x {config['depth']} in flight, {config['size']}-byte messages, "
      f"{config['duration_s']} s per run; server on CPU {config['server_cpu']}, ringrpc-load on CPU {config['load_cpu']}")
print(f"{'round':>5}  {'ringrpc msgs':>12} {'cpu s':>6} {'msgs/core-s':>11}  {'gRPC msgs':>12} {'cpu s':>6} "
      f"{'msgs/core-s':>11}  {'ratio':>6}")
ratios = []
for r in rounds:
    a, b = runs[(r, "ringrpc")], runs[(r, "grpc")]
    ratio = a["messages_per_core_s"] / b["messages_per_core_s"]
    ratios.append(ratio)
    bad = sum(x["errors"] + x["streams_failed"] for x in (a, b))
    print(f"{r:>5}  {a['messages']:>12} {a['server_cpu_s']:>6.2f} {a['messages_per_core_s']:>11.0f}  "
          f"{b['messages']:>12} {b['server_cpu_s']:>6.2f} {b['messages_per_core_s']:>11.0f}  {ratio:>6.2f}"
          + (f"  ({bad} errors or failed streams)" if bad else ""))
per = lambda w: statistics.median(runs[(r, w)]["messages_per_core_s"] for r in rounds)
print(f"messages/s per server core: ringrpc median {per('ringrpc'):.0f}, gRPC median {per('grpc'):.0f}")
print(f"ringrpc/gRPC: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
if out_json:
    with open(out_json, "w") as fh:
        json.dump({"config": config, "per_round": [{w: runs[(r, w)] for w in ("ringrpc", "grpc")} for r in rounds],
                   "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}}, fh, indent=1)
PY

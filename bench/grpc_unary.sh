#!/usr/bin/env bash
# Unary gRPC calls, per server core: ringrpc-server answering gRPC clients on its port (its
# built-in echo reached as /echo/echo, i.e. the method echo.echo of the echo endpoint:
# docs/grpc.md), grpc_echo_server's Echo.Say (libgrpc++'s callback API, --callback-only:
# tests/load/grpc_echo_server.cpp), and ringrpc-server's same echo over its own frames
# (ringrpc://.../echo), each server pinned to SERVER_CPU, ringrpc-load pinned to LOAD_CPU driving
# CONNECTIONS connections x DEPTH calls in flight, at each depth of DEPTHS (`-c 16 -P 1` and
# `-c 16 -P 16`: grpc:// and ringrpc:// alike, the same load tool and engine on every side). All
# three get the same request bytes: the protobuf EchoRequest {text: SIZE x's} (SIZE + 2 bytes for
# SIZE < 128), which grpc_echo_server parses and ringrpc's echo sends back as it came.
# Rounds rotate which server goes first; each round starts every server afresh, and runs the
# depths on it in turn. Per run: a warm-up run, then the measured run with --server-pid, whose
# server_cost charges the server's CPU time (utime+stime of all its threads) over the load's own
# measured window. Printed per run: calls/s, the server's CPU per call (µs), server_busy (the
# server's cores over that window: below ~0.9 the server was not the limit, and its CPU per call
# has idle wake-ups in it), the load's CPU seconds and load_busy (ringrpc-load's CPU over its
# wall time, from the shell's `times`: above ~0.9 the load's core may have been the limit), the
# server's threads and context switches in the run (voluntary / involuntary, summed over
# /proc/PID/task/*/status); rows outside those bounds, or with errors, are flagged. Then, per
# depth, as median (min, max) over the rounds: ringrpc-gRPC/grpc_echo_server server CPU per call
# (goal <= 0.2) and calls/s (goal >= 5 at depth 16), and ringrpc-gRPC/ringrpc-frames server CPU
# per call (goal <= 1.5); a goal is judged on the median.
#
# With RAW_LOOP (bench/raw_echo_loop, from a build with -Dbenchmarks=true; found in BUILD_DIR or
# build/bench when unset), the raw io_uring echo loop runs as a fourth server, driven as
# echo://, with the same request bytes: no framing and no protocol, so its CPU per call is the
# floor of any server on this host, and raw-loop/grpc_echo_server says how low the "1/5 of
# gRPC's CPU per call" goal can be met here at all. RAW_LOOP=none leaves it out.
#
#   bench/grpc_unary.sh                        # 5 rounds of 5 s runs per server and depth
#   QUICK=1 bench/grpc_unary.sh                # smoke run: 1 round of 0.5 s runs
#   ROUNDS=3 DURATION=3 OUT_JSON=/tmp/grpc_unary.json bench/grpc_unary.sh
#   RATE=350k SERVERS="ringrpc-grpc ringrpc-frames" DEPTHS=64 bench/grpc_unary.sh
#
# With RATE, every run is an open loop at that many calls/s in all (-R; DEPTHS is then the cap
# on calls in flight per connection): the servers compared at the same load rather than each at
# its own saturation. That is the fair comparison when the load tool cannot saturate one of
# them (at depth 16 ringrpc-load's HTTP/2 client runs out of its core before ringrpc's gRPC
# path does, and a server that is not saturated reads fewer calls per wake-up, which raises
# its CPU per call). A run whose calls/s falls 5% short of RATE is flagged instead of a server
# under 0.9 busy. SERVERS picks the servers (ringrpc-grpc grpc-echo ringrpc-frames raw-loop);
# a ratio is printed when both its servers ran. DISPATCH (all, direct, message, ...) is passed to
# both ringrpc servers as --dispatch: `direct` runs the echo on the shard, as gRPC's callback API
# runs its handler on its own threads; unset, they keep ringrpc-server's default (a pool).
#
# Environment (all optional): ROUNDS [5], DURATION [5] measured seconds per run, WARMUP [1] s,
# CONNECTIONS [16], DEPTHS ["1 16"], SIZE [64], RATE, SERVERS, DISPATCH, SERVER_CPU / LOAD_CPU [0 / 1], BUILD_DIR
# [build/release] (built with tests, for tests/grpc_echo_server), RAW_LOOP, OUT_JSON, KEEP_WORK=1.
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

if [[ ${QUICK:-0} == 1 ]]; then
  : "${DURATION:=0.5}" "${WARMUP:=0.2}" "${ROUNDS:=1}"
fi
: "${CONNECTIONS:=16}" "${BUILD_DIR:=build/release}"
pinned_bench_knobs grpc_unary.sh
rounds=${ROUNDS:-5}
read -r -a depths <<<"${DEPTHS:-1 16}"
for d in "${depths[@]}"; do
  [[ $d =~ ^[1-9][0-9]*$ ]] || { echo "grpc_unary.sh: DEPTHS holds '$d', not a depth" >&2; exit 2; }
done
((${#depths[@]} > 0)) || { echo "grpc_unary.sh: DEPTHS is empty" >&2; exit 2; }
[[ $size =~ ^[0-9]+$ ]] || { echo "grpc_unary.sh: SIZE is '$size', not a byte count" >&2; exit 2; }

ringrpc_bin=$build_dir/tools/ringrpc-server
grpc_bin=$build_dir/tests/grpc_echo_server
load_bin=$build_dir/tools/ringrpc-load
for b in "$ringrpc_bin" "$grpc_bin" "$load_bin"; do
  [[ -x $b ]] || { echo "grpc_unary.sh: $b is missing; build $build_dir with tests (and gRPC's dev packages)" >&2; exit 2; }
done
raw_bin=${RAW_LOOP:-}
if [[ -z $raw_bin ]]; then
  for b in "$build_dir/bench/raw_echo_loop" build/bench/bench/raw_echo_loop "$build_dir/tools/ringrpc-raw-echo"; do
    [[ -x $b ]] && { raw_bin=$b; break; }
  done
fi
[[ $raw_bin == none ]] && raw_bin=
if [[ -n $raw_bin && ! -x $raw_bin ]]; then
  echo "grpc_unary.sh: RAW_LOOP=$raw_bin is not an executable" >&2
  exit 2
fi
[[ -n $raw_bin ]] || echo "grpc_unary.sh: no raw_echo_loop found (RAW_LOOP); running without the floor" >&2

bench_work_dir grpc_unary
server_lifetime=$(python3 -c "import math; print(math.ceil(${#depths[@]} * 2 * ($duration + $warmup) + 60))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 30))")
# The request: echo.proto's EchoRequest with text = SIZE x's (field 1, length-delimited).
python3 - "$size" "$work/request.bin" <<'PY'
import sys
n, out = int(sys.argv[1]), sys.argv[2]
varint = bytearray()
v = n
while True:
    varint.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
    v >>= 7
    if not v:
        break
open(out, "wb").write(b"\x0a" + bytes(varint) + b"x" * n)
PY
message=(--payload-file "$work/request.bin")
rate=${RATE:-}
[[ -z $rate || $rate =~ ^[0-9]+(\.[0-9]+)?[kM]?$ ]] || { echo "grpc_unary.sh: RATE is '$rate', not a rate (350k, 1M)" >&2; exit 2; }
rate_args=()
[[ -n $rate ]] && rate_args=(-R "$rate")
dispatch_args=()
[[ -n ${DISPATCH:-} ]] && dispatch_args=(--dispatch "$DISPATCH")

# start_target WHICH: the server pinned (pinned_pid) and the URL to load it with.
start_target() {
  case $1 in
    ringrpc-grpc | ringrpc-frames)
      start_pinned_server "$work/$1" "$server_lifetime" "$server_cpu" "$ringrpc_bin" --port 0 --log-level error \
        "${dispatch_args[@]}" ||
        { echo "grpc_unary.sh: ringrpc-server did not start" >&2; exit 1; }
      if [[ $1 == ringrpc-grpc ]]; then
        url="grpc://127.0.0.1:$listen_port/echo/echo"  # :path /echo/echo = the method echo.echo: the echo endpoint
      else
        url="ringrpc://127.0.0.1:$listen_port/echo"
      fi
      ;;
    grpc-echo)
      start_pinned_server "$work/grpc" "$server_lifetime" "$server_cpu" "$grpc_bin" --callback-only ||
        { echo "grpc_unary.sh: grpc_echo_server did not start" >&2; exit 1; }
      url="grpc://127.0.0.1:$listen_port/ringtest.Echo/Say"
      ;;
    raw-loop)
      start_pinned_server "$work/raw" "$server_lifetime" "$server_cpu" "$raw_bin" --port 0 ||
        { echo "grpc_unary.sh: raw_echo_loop did not start" >&2; exit 1; }
      url="echo://127.0.0.1:$listen_port"  # the request's bytes back as they came
      ;;
  esac
}

# threads_and_switches PID: "THREADS VOLUNTARY INVOLUNTARY", the context switches summed over the
# process's threads (/proc/PID/status alone has the main thread's; a thread that ended is lost).
threads_and_switches() {
  awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }' \
    /proc/"$1"/task/*/status 2>/dev/null | { read -r v n; echo "$(awk '/^Threads:/ { print $2 }' /proc/"$1"/status) $v $n"; }
}

# measure WHICH ROUND DEPTH: a warm-up run, then the measured run, charged the server's CPU by
# --server-pid over the load's own measured window (server_cost), and timed for its own CPU.
measure() {
  local json=$work/$1.$2.$3.json t0 t1 l0 l1 s0 s1
  local -a load=(timeout "$load_limit" taskset -c "$load_cpu" "$load_bin" -c "$connections" -P "$3" "${rate_args[@]}"
    "${message[@]}")
  if awk "BEGIN { exit !($warmup > 0) }"; then
    "${load[@]}" --duration "${warmup}s" --warmup 0s "$url" >/dev/null 2>"$work/load.err" ||
      { echo "grpc_unary.sh: the warm-up against $1 (depth $3) failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  fi
  s0=$(threads_and_switches "$pinned_pid")
  children_cpu_s
  l0=$children_s
  t0=$EPOCHREALTIME
  "${load[@]}" --duration "${duration}s" --warmup 0s --server-pid "$pinned_pid" --json "$json" "$url" \
    >/dev/null 2>"$work/load.err" ||
    { echo "grpc_unary.sh: ringrpc-load against $1 (depth $3) failed: $(tail -3 "$work/load.err")" >&2; exit 1; }
  t1=$EPOCHREALTIME
  children_cpu_s
  l1=$children_s
  s1=$(threads_and_switches "$pinned_pid")
  echo "$2 $3 $1 $json $t0 $t1 $l0 $l1 $s0 $s1" >>"$work/index"
}

: >"$work/index"
servers=(ringrpc-grpc grpc-echo ringrpc-frames)
[[ -n $raw_bin ]] && servers+=(raw-loop)
if [[ -n ${SERVERS:-} ]]; then
  read -r -a servers <<<"$SERVERS"
  for w in "${servers[@]}"; do
    case $w in
      ringrpc-grpc | grpc-echo | ringrpc-frames) ;;
      raw-loop) [[ -n $raw_bin ]] || { echo "grpc_unary.sh: SERVERS has raw-loop but no raw_echo_loop was found" >&2; exit 2; } ;;
      *) echo "grpc_unary.sh: SERVERS holds '$w', not one of ringrpc-grpc grpc-echo ringrpc-frames raw-loop" >&2; exit 2 ;;
    esac
  done
fi
for ((r = 1; r <= rounds; r++)); do
  # Round r starts with server (r - 1) mod 3: each goes first, second and last alike.
  order=()
  for ((i = 0; i < ${#servers[@]}; i++)); do order+=("${servers[(r - 1 + i) % ${#servers[@]}]}"); done
  for which in "${order[@]}"; do
    printf 'round %d/%d: %-14s' "$r" "$rounds" "$which" >&2
    start_target "$which"
    for depth_now in "${depths[@]}"; do
      measure "$which" "$r" "$depth_now"
      printf ' P%s' "$depth_now" >&2
    done
    stop_pinned_server
    echo " done" >&2
  done
done

GU_WORK=$work GU_OUT_JSON=$out_json GU_CONFIG="$(printf '{"rounds": %s, "duration_s": %s, "warmup_s": %s, "connections": %s, "depths": [%s], "size": %s, "request_bytes": %s, "server_cpu": "%s", "load_cpu": "%s", "rate": "%s", "dispatch": "%s"}' \
  "$rounds" "$duration" "$warmup" "$connections" "$(IFS=,; echo "${depths[*]}")" "$size" \
  "$(stat -c %s "$work/request.bin")" "$server_cpu" "$load_cpu" "$rate" "${DISPATCH:-}")" \
python3 - <<'PY'
import json, os, statistics
e = os.environ
work, out_json = e["GU_WORK"], e["GU_OUT_JSON"]
config = json.loads(e["GU_CONFIG"])
runs = {}
for line in open(os.path.join(work, "index")):
    r, depth, which, path, t0, t1, l0, l1, th0, v0, n0, th1, v1, n1 = line.split()
    j = json.load(open(path))
    cost = j.get("server_cost", {})
    if "cpu_us_per_call" not in cost:
        raise SystemExit(f"grpc_unary.sh: {path} has no server CPU figure: {cost.get('note', 'no server_cost')}")
    load_cpu_s = float(l1) - float(l0)
    runs[(int(r), int(depth), which)] = {
        "calls": j["calls_ok"], "calls_per_s": j["calls_per_sec"], "errors": sum(j.get("errors", {}).values()),
        "server_cpu_s": cost["cpu_s"], "server_window_s": cost["window_s"], "server_busy": cost["cores"],
        "server_cpu_us_per_call": cost["cpu_us_per_call"], "load_cpu_s": load_cpu_s,
        "load_busy": load_cpu_s / (float(t1) - float(t0)), "server_threads": int(th1),
        "server_voluntary_switches": int(v1) - int(v0), "server_involuntary_switches": int(n1) - int(n0)}
rounds = sorted({k[0] for k in runs})
servers = [w for w in ("ringrpc-grpc", "grpc-echo", "ringrpc-frames", "raw-loop") if (rounds[0], config["depths"][0], w) in runs]
depths = config["depths"]
rate = config["rate"]
rate_value = float(rate.rstrip("kM")) * {"k": 1e3, "M": 1e6}.get(rate[-1:], 1) if rate else 0
print(f"\n{config['connections']} connections x depth {' and '.join(map(str, depths))}, unary calls of "
      f"{config['request_bytes']} bytes (EchoRequest with {config['size']} x's), {config['duration_s']} s per run; "
      f"server on CPU {config['server_cpu']}, ringrpc-load on CPU {config['load_cpu']}"
      + (f"; open loop at {rate} calls/s (depth: the cap on calls in flight per connection)" if rate else "")
      + (f"; ringrpc-server --dispatch {config['dispatch']}" if config["dispatch"] else ""))
print(f"{'round':>5} {'depth':>5} {'server':<14} {'calls':>9} {'calls/s':>9} {'cpu s':>6} {'busy':>5} {'us/call':>7} "
      f"{'load cpu s':>10} {'load busy':>9} {'threads':>7} {'switches vol/invol':>19}")
flagged = unsaturated = 0
for r in rounds:
    for d in depths:
        for w in servers:
            x = runs[(r, d, w)]
            flags = []
            if rate:
                if x["calls_per_s"] < 0.95 * rate_value:
                    flags.append(f"under 95% of {rate} calls/s")
            elif x["server_busy"] < 0.9:
                flags.append("server < 0.9 busy")
                unsaturated += 1
            if x["load_busy"] > 0.9 and not rate:
                flags.append("load core > 0.9 busy")
            if x["errors"]:
                flags.append(f"{x['errors']} errors")
            flagged += bool(flags)
            switches = f"{x['server_voluntary_switches']}/{x['server_involuntary_switches']}"
            print(f"{r:>5} {d:>5} {w:<14} {x['calls']:>9} {x['calls_per_s']:>9.0f} {x['server_cpu_s']:>6.2f} "
                  f"{x['server_busy']:>5.2f} {x['server_cpu_us_per_call']:>7.2f} {x['load_cpu_s']:>10.2f} "
                  f"{x['load_busy']:>9.2f} {x['server_threads']:>7} {switches:>19}"
                  + (f"  ! {'; '.join(flags)}" if flags else ""))
if flagged and rate:
    print(f"{flagged} run(s) flagged !: short of the rate asked for (or with errors): not a comparison at the same load")
elif flagged:
    print(f"{flagged} run(s) flagged !: a server under ~0.9 busy was not saturated ({unsaturated} such; the load, "
          "or its core, held it back), and its calls/s is not a server-bound figure nor its CPU per call one at full load")

def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "per_round": values}

def fmt(s):
    return f"{s['median']:.2f} (min {s['min']:.2f}, max {s['max']:.2f})"

ratios = {}
print("\nper depth, median (min, max) over rounds:")
for d in depths:
    med = lambda w, k: statistics.median(runs[(r, d, w)][k] for r in rounds)
    print(f"depth {d}: server CPU per call (us) " + ", ".join(f"{w} {med(w, 'server_cpu_us_per_call'):.2f}" for w in servers)
          + "; calls/s " + ", ".join(f"{w} {med(w, 'calls_per_s'):.0f}" for w in servers))
    per = lambda a, b, k: [runs[(r, d, a)][k] / runs[(r, d, b)][k] for r in rounds]
    both = lambda a, b: a in servers and b in servers
    rd = ratios[str(d)] = {}
    goal = lambda s, ok, text: f"  goal {text}: {'met' if ok(s['median']) else 'MISSED'}"
    if both("ringrpc-grpc", "grpc-echo"):
        rd["cpu_per_call_ringrpc_grpc_vs_grpc_echo"] = summary(per("ringrpc-grpc", "grpc-echo", "server_cpu_us_per_call"))
        rd["calls_per_s_ringrpc_grpc_vs_grpc_echo"] = summary(per("ringrpc-grpc", "grpc-echo", "calls_per_s"))
        print(f"  ringrpc-gRPC/grpc_echo_server CPU per call: {fmt(rd['cpu_per_call_ringrpc_grpc_vs_grpc_echo'])}"
              + goal(rd["cpu_per_call_ringrpc_grpc_vs_grpc_echo"], lambda m: m <= 0.2, "<= 0.2"))
        print(f"  ringrpc-gRPC/grpc_echo_server calls/s:      {fmt(rd['calls_per_s_ringrpc_grpc_vs_grpc_echo'])}"
              + (goal(rd["calls_per_s_ringrpc_grpc_vs_grpc_echo"], lambda m: m >= 5, ">= 5") if d == 16 and not rate else ""))
    if both("ringrpc-grpc", "ringrpc-frames"):
        rd["cpu_per_call_ringrpc_grpc_vs_ringrpc_frames"] = summary(per("ringrpc-grpc", "ringrpc-frames", "server_cpu_us_per_call"))
        print(f"  ringrpc-gRPC/ringrpc-frames CPU per call:   {fmt(rd['cpu_per_call_ringrpc_grpc_vs_ringrpc_frames'])}"
              + goal(rd["cpu_per_call_ringrpc_grpc_vs_ringrpc_frames"], lambda m: m <= 1.5, "<= 1.5"))
    if both("raw-loop", "grpc-echo") and both("ringrpc-frames", "raw-loop"):
        rd["cpu_per_call_raw_loop_vs_grpc_echo"] = summary(per("raw-loop", "grpc-echo", "server_cpu_us_per_call"))
        rd["cpu_per_call_ringrpc_frames_vs_raw_loop"] = summary(per("ringrpc-frames", "raw-loop", "server_cpu_us_per_call"))
        print(f"  raw-loop/grpc_echo_server CPU per call:     {fmt(rd['cpu_per_call_raw_loop_vs_grpc_echo'])}"
              "  (the floor: no server here does the 1/5 goal better)")
        print(f"  ringrpc-frames/raw-loop CPU per call:       {fmt(rd['cpu_per_call_ringrpc_frames_vs_raw_loop'])}")
if out_json:
    with open(out_json, "w") as fh:
        json.dump({"config": config,
                   "per_round": [{str(d): {w: runs[(r, d, w)] for w in servers} for d in depths} for r in rounds],
                   "ratios": ratios}, fh, indent=1)
PY
